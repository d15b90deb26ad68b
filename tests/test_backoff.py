"""The back-off's wait, and the scheduler's tick that ends it."""

from scheduler.backoff import Backoff


def test_the_wait_doubles_up_to_the_cap_and_ends_on_success() -> None:
    backoff = Backoff(base_seconds=5, max_seconds=30)
    assert [backoff.failed(0.0) for _ in range(5)] == [5, 10, 20, 30, 30]
    backoff.succeeded()
    assert not backoff.should_skip(0.0)


def test_a_retry_due_just_after_the_tick_runs_at_that_tick() -> None:
    backoff = Backoff(base_seconds=5)
    backoff.failed(100.003)  # the failed poll ended a few ms after its tick at 100
    assert backoff.should_skip(102.0)
    assert not backoff.should_skip(105.0), "the tick at 105 must not skip to 110"


def test_a_wall_clock_step_back_does_not_stretch_the_wait() -> None:
    # Issue 28: NTP stepped the clock back an hour during an outage; the wait, measured on
    # the wall clock, would have lasted that hour longer.
    backoff = Backoff(base_seconds=5, max_seconds=30)
    backoff.failed(10_000.0)  # retry at 10,005
    assert not backoff.should_skip(10_000.0 - 3600.0 + 1.0)
