"""The one way tests wait: `wait_for` (async tests) and `wait_until` (plain ones) return what
the check found, run the check where it belongs, and say what was awaited when time is up."""

from __future__ import annotations

import threading

import pytest

from tests.support.cluster import wait_for, wait_until


def test_wait_until_returns_what_the_check_found_once_it_is_true() -> None:
    answers = iter([None, 0, "", "found"])
    assert wait_until(lambda: next(answers), 5, "an answer", interval=0.001) == "found"


def test_wait_until_names_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match=r"timed out after 0.05 s waiting for the queue"):
        wait_until(lambda: None, 0.05, "the queue", interval=0.01)


async def test_a_blocking_check_runs_in_a_worker_thread() -> None:
    threads: list[threading.Thread] = []

    def check() -> bool:
        threads.append(threading.current_thread())
        return len(threads) == 2

    assert await wait_for(check, 5, "two checks", interval=0.001) is True
    assert threading.main_thread() not in threads


async def test_a_check_on_the_loop_runs_there_and_its_awaitable_is_awaited() -> None:
    loop_thread = threading.current_thread()
    calls: list[threading.Thread] = []

    async def passes() -> int:
        calls.append(threading.current_thread())
        return len(calls) if len(calls) >= 3 else 0

    assert await wait_for(passes, 5, "three passes", interval=0.001) == 3
    assert await wait_for(lambda: passes(), 5, "a fourth", in_thread=False) == 4

    def reads_the_loops_objects() -> list[threading.Thread]:
        calls.append(threading.current_thread())
        return calls

    assert await wait_for(reads_the_loops_objects, 5, "a fifth", in_thread=False) is calls
    assert set(calls) == {loop_thread}


async def test_wait_for_names_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match=r"timed out after 0.05 s waiting for a poll"):
        await wait_for(lambda: None, 0.05, "a poll", interval=0.01)


async def test_the_timeout_is_on_the_clock_given() -> None:
    """As a looptime test passes the loop's fake time: 5 s of it, however fast it runs."""
    readings = iter(range(0, 1000, 2))
    with pytest.raises(AssertionError, match=r"after 5 s waiting for a poll"):
        await wait_for(lambda: None, 5, "a poll", 0, in_thread=False, clock=lambda: next(readings))
    assert next(readings) == 8  # started at 0, gave up at the reading past 5 s
