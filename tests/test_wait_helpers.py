"""The one way tests wait: `wait_for` (async tests) and `wait_until` (plain ones) return what
the check found, run the check where it belongs, and say what was awaited when time is up."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

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


# ---------------------------------------------------------------- no hand-made wait loops

ROOT = Path(__file__).parent
# Where a sleep inside a loop is what the code is for, "path::function": why.
PACED: dict[str, str] = {
    "tests/support/cluster.py::wait_until": "the one wait helper, for plain tests",
    "tests/support/cluster.py::wait_for": "the one wait helper, for async tests",
    "tests/support/slack_standin/http_routes.py::_until_or_gone": (
        "the stand-in holds a late answer until a time on its own clock, as Slack answering "
        "late does, and stops when the caller hangs up: it paces an answer"
    ),
    "tests/support/slack_standin/socket_mode.py::SocketModeHub.send": (
        "resends an envelope on the next Socket Mode connection when one closes under it, as "
        "Slack does, within the delivery's own timeout"
    ),
    "tests/support/big_array.py::scrape_polls": (
        "scrapes /metrics every 0.1 s for as long as the run lasts: a sampler, not a wait"
    ),
    "tests/test_clock_steps_cluster.py::test_polls_and_dms_keep_going_across_wall_clock_steps": (
        "watches a fixed window of wall time after each clock step and counts the polls in "
        "it: the window is the measurement"
    ),
    "tests/test_requeue_dms_cluster.py::test_a_node_failure_requeue_never_says_resubmit": (
        "polls six more times, half a second apart, to show nothing more is told of the job: "
        "a count of polls, not a wait for something"
    ),
}


def sleeps_in_loops(source: str) -> list[tuple[str, int]]:
    """(qualified name of the enclosing function, line) of each sleep (time.sleep,
    asyncio.sleep, a bare sleep) called inside a for or while loop."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, name: str, in_loop: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, f"{name}.{child.name}" if name else child.name, False)
                continue
            looping = in_loop or isinstance(child, ast.For | ast.AsyncFor | ast.While)
            if looping and isinstance(child, ast.Call):
                callee = child.func
                called = callee.attr if isinstance(callee, ast.Attribute) else ""
                called = callee.id if isinstance(callee, ast.Name) else called
                if called == "sleep":
                    found.append((name, child.lineno))
            visit(child, name, looping)

    visit(ast.parse(source), "", False)
    return found


def hand_made_waits(root: Path = ROOT, paced: dict[str, str] = PACED) -> list[str]:
    """Each sleep in a loop under `root` that PACED does not list, and each PACED entry
    without such a sleep or without a reason."""
    problems, seen = [], set()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent).as_posix()
        for function, line in sleeps_in_loops(path.read_text()):
            key = f"{relative}::{function}"
            seen.add(key)
            if key not in paced:
                problems.append(f"{relative}:{line} sleeps in a loop in {function or 'the module'}")
    problems += [f"stale: {key}" for key in paced if key not in seen]
    problems += [f"no reason: {key}" for key, why in paced.items() if not why.strip()]
    return problems


def test_tests_wait_with_wait_for_not_a_loop_of_their_own() -> None:
    """A wait is `wait_for`/`wait_until` (tests/support/cluster.py): one deadline, one
    pause, a message naming what was awaited. A loop that sleeps is one more of those."""
    assert hand_made_waits() == []


def test_a_sleep_in_a_loop_is_caught_and_a_stale_entry_too(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_x.py").write_text(
        "import asyncio, time\n"
        "async def test_a():\n"
        "    await asyncio.sleep(1)\n"  # not in a loop: a pause, not a wait
        "    while not done():\n"
        "        if ready():\n"
        "            time.sleep(0.1)\n"
        "class Poller:\n"
        "    async def run(self):\n"
        "        for _ in range(3):\n"
        "            def later(): pass\n"
        "            await asyncio.sleep(0.5)\n"
    )
    paced = {"tests/test_x.py::Poller.run": "paces polls", "tests/test_y.py::f": "gone"}
    assert hand_made_waits(tests, paced) == [
        "tests/test_x.py:6 sleeps in a loop in test_a",
        "stale: tests/test_y.py::f",
    ]
