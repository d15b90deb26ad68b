"""The runner's replies, decoded once into one type per action, or `Refused`.

On the wire a reply is {"ok": true, ...the action's fields} or {"ok": false, "error": ...}
(core/runner_contract.py, bot/install_files/skybot_runner.py); that wire format is the
runner's and does not change here. Everything that reads a reply goes through a `decode_*`
below, so a missing or mistyped field is noticed in one place, and each kind of refusal is
worded once:

- the runner (or sudo, or the bot's runner client) said no: its own sentence, or NO_REASON;
- the outcome is unknown (the runner did not answer in time, or was killed): it may still
  act, so a submission is asked about again, never sent twice;
- an "ok" reply without the action's fields: UNREADABLE.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, TypeVar

import msgspec

from core.slack_text import literal

REFUSED = "refused"
OUTCOME_UNKNOWN = "outcome-unknown"
UNREADABLE_ANSWER = "unreadable"
RefusalKind = Literal["refused", "outcome-unknown", "unreadable"]

NO_REASON = "The skybot runner refused without saying why."
UNREADABLE = "The skybot runner's answer could not be read."


class Refused(msgspec.Struct, frozen=True):
    """The runner did not do it (or may not have): `reason` is a sentence for a person."""

    reason: str
    kind: RefusalKind = "refused"
    # verify-link's refusal of a link file others could write: the commands that fix it.
    fix: tuple[str, ...] = ()

    @property
    def outcome_unknown(self) -> bool:
        """It may still reach Slurm: ask again later, never act a second time blind."""
        return self.kind == OUTCOME_UNKNOWN

    @property
    def shown(self) -> str:
        """The reason as Slack shows text that did not come from skybot."""
        return literal(self.reason)


class Version(msgspec.Struct, frozen=True):
    version: str


class Submitted(msgspec.Struct, frozen=True):
    job_id: int
    cluster: str | None = None
    script: str = ""


class StillSubmitting(msgspec.Struct, frozen=True):
    """submit-status: a runner holds the submission now."""


class SubmitFailed(msgspec.Struct, frozen=True):
    """submit-status: sbatch refused it (its answer)."""

    error: str = NO_REASON


class NeverSubmitted(msgspec.Struct, frozen=True):
    """submit-status: no runner holds it, and no job since `since` carries its tag."""


SubmitStatus = Submitted | StillSubmitting | SubmitFailed | NeverSubmitted


class Cancelled(msgspec.Struct, frozen=True):
    job_id: str


class Linked(msgspec.Struct, frozen=True):
    user: str


class Tail(msgspec.Struct, frozen=True):
    """The bytes before `start + len(data)` of a file `size` bytes long."""

    data: bytes
    start: int
    size: int


class Moved(msgspec.Struct, frozen=True):
    """Where the job went: the runner's site settings win over what the bot asked."""

    job_id: str
    partition: str
    account: str | None = None


Reply = Mapping[str, object]
T = TypeVar("T")


def refusal(reply: Reply) -> Refused:
    """What a failed reply says, in the one wording its kind has."""
    error = reply.get("error")
    reason = error if isinstance(error, str) and error.strip() else NO_REASON
    fix = reply.get("fix")
    fixes = tuple(fix) if isinstance(fix, list) and all(isinstance(f, str) for f in fix) else ()
    kind: RefusalKind = "outcome-unknown" if reply.get("outcome_unknown") is True else "refused"
    return Refused(reason, kind, fixes)


def _decode(reply: Reply, shape: type[T]) -> T | Refused:
    if reply.get("ok") is not True:
        return refusal(reply)
    try:
        return msgspec.convert(reply, shape)
    except msgspec.ValidationError:
        return Refused(UNREADABLE, "unreadable")


def decode_version(reply: Reply) -> Version | Refused:
    return _decode(reply, Version)


def decode_submit(reply: Reply) -> Submitted | Refused:
    return _decode(reply, Submitted)


def decode_cancel(reply: Reply) -> Cancelled | Refused:
    return _decode(reply, Cancelled)


def decode_link(reply: Reply) -> Linked | Refused:
    return _decode(reply, Linked)


def decode_move(reply: Reply) -> Moved | Refused:
    return _decode(reply, Moved)


def decode_tail(reply: Reply) -> Tail | Refused:
    tail = _decode(reply, Tail)
    if isinstance(tail, Tail) and not 0 <= tail.start <= tail.size:
        return Refused(UNREADABLE, "unreadable")
    return tail


_STATES: dict[object, type[SubmitStatus]] = {
    "submitted": Submitted,
    "running": StillSubmitting,
    "failed": SubmitFailed,
    "absent": NeverSubmitted,
}


def decode_submit_status(reply: Reply) -> SubmitStatus | Refused:
    if reply.get("ok") is not True:
        return refusal(reply)
    shape = _STATES.get(reply.get("state"))
    if shape is None:
        return Refused(UNREADABLE, "unreadable")
    return _decode(reply, shape)


# The actions that change a job in Slurm, and their replies.
CHANGES: dict[str, Callable[[Reply], Submitted | Cancelled | Moved | Refused]] = {
    "submit": decode_submit,
    "cancel": decode_cancel,
    "move-to-overcap": decode_move,
}
