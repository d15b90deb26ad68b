"""The buttons skybot puts in messages: what each is called, what it carries, how it is drawn.

Each kind of button is a `ButtonKind` in a module of this package (or core/log_more.py, whose
button failure DMs carry), with its value codec and its block builder; the click's handling is
in handlers/buttons/, one module per kind, and handlers/buttons/registry.py registers them all
from one list. `button()` is the only place an element with an "action_id" is written, so a
button cannot be built without a kind, and tests/test_button_registry.py fails for a kind with
no registered handler.

A button only names something; it grants nothing. Slack does not escape a button's id or
value, and anyone who can see a message can send any value back, so each codec accepts exactly
what skybot builds. A value may name the cluster (`CLUSTER/…`) for a bot that serves several;
one that names none means the bot's only (its default) cluster, as every button built so far.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.cluster_config import CLUSTER_NAME as CLUSTER_NAME

Element = dict[str, Any]

# How a cluster is named inside a button value (Slurm's ClusterName, kept plain).
CLUSTER_SEPARATOR = "/"


@dataclass(frozen=True, slots=True)
class ButtonKind:
    """One kind of button: the action ids it uses are `stem`, or `stem:SUFFIX` (Block Kit
    wants action ids unique within a message, so a button's id names what it acts on)."""

    name: str  # for logs: "Cancel"
    stem: str
    # What may follow "stem:" in an action id (a regular expression).
    suffix: str

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(rf"^{self.stem}(?::{self.suffix})?$")

    def action_id(self, suffix: str) -> str:
        return f"{self.stem}:{suffix}"


def button(
    kind: ButtonKind,
    suffix: str,
    text: str,
    value: str,
    *,
    style: str | None = None,
    confirm: Element | None = None,
) -> Element:
    """A button element of `kind` (Slack clips a button's text at 75 characters)."""
    element: Element = {
        "type": "button",
        "action_id": kind.action_id(suffix),
        "text": {"type": "plain_text", "text": text[:75]},
        "value": value,
    }
    if style is not None:
        element["style"] = style
    if confirm is not None:
        element["confirm"] = confirm
    return element


def confirm_dialog(title: str, markdown: str, yes: str, no: str) -> Element:
    return {
        "title": {"type": "plain_text", "text": title},
        "text": {"type": "mrkdwn", "text": markdown},
        "confirm": {"type": "plain_text", "text": yes},
        "deny": {"type": "plain_text", "text": no},
    }


def actions_block(elements: list[Element]) -> list[Element]:
    """An actions block of `elements`, or nothing when there are none."""
    return [{"type": "actions", "elements": elements}] if elements else []


def with_cluster(value: str, cluster: str | None) -> str:
    """`value`, naming `cluster` when there is one to name."""
    return value if cluster is None else f"{cluster}{CLUSTER_SEPARATOR}{value}"


def split_cluster(value: str) -> tuple[str | None, str] | None:
    """(cluster or None, the rest) of a value `with_cluster` built; None if it names a
    cluster no cluster can be called."""
    cluster, separator, rest = value.rpartition(CLUSTER_SEPARATOR)
    if not separator:
        return None, value
    return (cluster, rest) if CLUSTER_NAME.fullmatch(cluster) else None
