"""The buttons skybot puts in messages: what each is called, what it carries, how it is drawn.

Each kind of button is a `ButtonKind` in a module of this package (or core/log_more.py, whose
button failure DMs carry), with its value codec and its block builder; the click's handling is
in handlers/buttons/, one module per kind, and handlers/buttons/registry.py registers them all
from one list. `button()` is the only place an element with an "action_id" is written, so a
button cannot be built without a kind, and tests/test_button_registry.py fails for a kind with
no registered handler.

A button only names something; it grants nothing. Slack does not escape a button's id or
value, and anyone who can see a message can send any value back, so each codec accepts exactly
what skybot builds. A value names the cluster (`CLUSTER/…`): every block builder takes the
view (or the cluster) it is built for, so no button can leave it out. A value that names none
(sent before values named their cluster) means the bot's default cluster.
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


def with_cluster(value: str, cluster: str) -> str:
    """`value`, naming `cluster`: every button a bot builds names its cluster, the default
    one's too, so a click acts where the message was about. A name no cluster may travel
    under (a one-cluster site's free-form notifications.cluster_name, or none) is left out:
    a value naming no cluster is read as the default cluster's."""
    if not cluster or not CLUSTER_NAME.fullmatch(cluster):
        return value
    return f"{cluster}{CLUSTER_SEPARATOR}{value}"


def split_cluster(value: str) -> tuple[str | None, str] | None:
    """(cluster or None, the rest) of a value `with_cluster` built; None if it names a
    cluster no cluster can be called."""
    cluster, separator, rest = value.rpartition(CLUSTER_SEPARATOR)
    if not separator:
        return None, value
    return (cluster, rest) if CLUSTER_NAME.fullmatch(cluster) else None


def on_this_cluster(named: str | None, cluster: str) -> bool:
    """Whether a value naming `named` (None: none, as messages sent before values named
    their cluster) is for `cluster`, the one whose view the click is answered from ("": a
    view that names none, as in tests and tools, takes what it was given)."""
    return named is None or not cluster or named == cluster
