"""Slurm's wall clock as this host can know it between two diagnostics answers.

Job end times are slurmctld's, and sacct's window is asked in them. When only this host's
clock is stepped (NTP on the bot's node; the controller's clock untouched), a window made
from this host's time starts that far away in Slurm's: stepped back an hour, every poll read
the hour's job ends again (seconds a poll on a busy cluster). So the window is made from the
controller's own time, as its last diagnostics answer gave it, carried forward on this host's
monotonic clock, which no step moves.
"""

from __future__ import annotations

from collections.abc import Callable


class SlurmClock:
    """`now()` is the controller's time: this host's wall clock until the controller has
    told its own, then the last time it told plus the monotonic time since."""

    def __init__(self, wall: Callable[[], float], monotonic: Callable[[], float]) -> None:
        self._wall = wall
        self._monotonic = monotonic
        # The controller's time minus this host's monotonic clock, once told.
        self._offset: float | None = None

    def now(self) -> float:
        if self._offset is None:
            return self._wall()
        return self._monotonic() + self._offset

    def told(self, server_time: int, asked: float, answered: float) -> None:
        """The controller said `server_time` (whole seconds) while this host's monotonic
        clock went from `asked` to `answered`: the middle of both is the best guess."""
        self._offset = server_time + 0.5 - (asked + answered) / 2
