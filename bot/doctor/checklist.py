"""The doctor's checklist: one `Check` per line, printed with its fix, secrets scrubbed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.config import Secrets


@dataclass(frozen=True)
class Check:
    """One line of the checklist. `fix` is empty when ok; `warning` is ok-but-unverified."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False


def passed(checks: Sequence[Check]) -> bool:
    return all(check.ok for check in checks)


def redact(text: str, secrets: Secrets) -> str:
    """Replace every secret value in `text`: the last guard before anything is printed."""
    for value in (secrets.bot_token, secrets.app_token, secrets.signing_secret):
        if value:
            text = text.replace(value, "[redacted]")
    return text


def format_check(check: Check) -> str:
    mark = "!" if check.warning else "✔" if check.ok else "✘"
    line = f"{mark} {check.name}: {check.detail}"
    return f"{line} — fix: {check.fix}" if check.fix else line
