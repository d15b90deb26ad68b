"""Which part of Slurm a failed poll points at, told from its error, in the words users get.

A poll's error is stored as text (store/snapshots.py `record_poll_failure`), so the part that
failed travels in the text itself: the slurmrestd client (scheduler/slurm/restd.py) starts
each of its own failures with one of the PREFIXES below, and anything else is Slurm's own
answer (slurmctld's, or sacct's for accounting). The same failure reads the same on both
sources: slurmctld not answering is "The Slurm controller (slurmctld) has not answered"
whether squeue or slurmrestd said so.
"""

from __future__ import annotations

from enum import StrEnum


class Part(StrEnum):
    """What failed. The values start the error texts of slurmrestd's own failures."""

    RESTD_UNREACHABLE = "slurmrestd unreachable"
    TOKEN_EXPIRED = "slurmrestd token expired"
    TOKEN_REFUSED = "slurmrestd token refused"
    TOKEN_UNUSABLE = "slurmrestd token unusable"
    TOKEN_UNSAFE = "slurmrestd token refused by skybot"
    NOT_RESTD = "not slurmrestd"
    RESTD_GARBLED = "slurmrestd answer unreadable"
    # Slurm's own answer: the controller, or accounting (the poll's source tells which).
    SLURM = "slurm"


PREFIXES = tuple(part for part in Part if part is not Part.SLURM)

# What users read for each slurmrestd failure; none of it says slurmctld is down, because
# nothing behind slurmrestd was asked.
_REST_API = "Slurm's REST API (slurmrestd)"
_RESTD_WORDS = {
    Part.RESTD_UNREACHABLE: f"{_REST_API}, which skybot reads, is not answering",
    Part.TOKEN_EXPIRED: f"skybot's token for {_REST_API} has expired",
    Part.TOKEN_REFUSED: f"{_REST_API} refuses skybot's token",
    Part.TOKEN_UNUSABLE: f"skybot cannot use its token file for {_REST_API}",
    Part.TOKEN_UNSAFE: (
        f"skybot refuses its token for {_REST_API}: it is for root or SlurmUser, "
        "who can act as anyone"
    ),
    Part.NOT_RESTD: (
        f"Something other than {_REST_API} answered skybot (a proxy or web server's error page)"
    ),
    Part.RESTD_GARBLED: (
        f"The answers of {_REST_API} cannot be read (cut short, or not Slurm's JSON)"
    ),
}


def failed(part: Part, detail: str) -> str:
    """An error text for a slurmrestd failure: the part's prefix, then the detail."""
    return f"{part.value}: {detail}"


def part_of(error: str) -> Part:
    """The part an error text names (Part.SLURM unless a slurmrestd prefix starts it)."""
    for part in PREFIXES:
        if error.startswith(part.value + ":"):
            return part
    return Part.SLURM


def restd_words(error: str) -> str | None:
    """What users read when slurmrestd itself failed (a sentence without its full stop), or
    None when the error is Slurm's own answer."""
    return _RESTD_WORDS.get(part_of(error))


# What waits while a source fails, in the sentence that names the part that failed.
_WHAT_WAITS = {
    "slurm": "jobs and GPUs are shown as of {data_age}.",
    "accounting": "finished jobs may be reported late.",
    "caps": "lab GPU caps are as of {data_age}.",
}


def restd_outage_words(source: str, error: str, since: str, data_age: str) -> str | None:
    """A poll source's outage in users' words when slurmrestd itself failed (nothing behind
    it was asked, so neither slurmctld nor slurmdbd is blamed); None when Slurm answered."""
    words = restd_words(error)
    if words is None or source not in _WHAT_WAITS:
        return None
    return f"{words}{since}: {_WHAT_WAITS[source].format(data_age=data_age)}"
