"""What a user typed after `/sky`, from the escaped form Slack sends it in (`should_escape`).

With `should_escape: true` (bot/install_files/slack-app-manifest.yaml) Slack sends `@alice` as
`<@U123|alice>`, `#chan` as `<#C1|chan>`, links and e-mail addresses as `<url|text>`, and `&`,
`<`, `>` as `&amp;`, `&lt;`, `&gt;`. This is the one place that text is turned back into
words, once: mentions become the linked cluster account (or a clear refusal), the other
sequences the text the user typed, and the entities their characters. Entities are decoded
after the sequences are read, so typed text such as `&lt;@U123&gt;` stays text and can never
become a mention.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from handlers.router import UsageError

_SEQUENCE = re.compile(r"<([^<>]*)>")
_ENTITY = re.compile(r"&(amp|lt|gt);")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}
_USER = re.compile(r"@([UW][A-Z0-9]+)(?:\|(.*))?", re.S)

# Slack user id -> the cluster account linked to it, or None.
ClusterUserOf = Callable[[str], str | None]


def unescape(text: str) -> str:
    """Slack's three entities decoded, in one pass (`&amp;lt;` is `&lt;`, not `<`)."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


def decode_command_text(text: str, cluster_user_of: ClusterUserOf) -> str:
    """The command as typed, with each `@someone` replaced by their cluster account.

    Raises UsageError, naming the person, for a mention of someone with no linked account.
    """
    parts: list[str] = []
    position = 0
    for match in _SEQUENCE.finditer(text):
        parts.append(unescape(text[position : match.start()]))
        parts.append(_sequence(match.group(1), cluster_user_of))
        position = match.end()
    parts.append(unescape(text[position:]))
    return "".join(parts)


def _sequence(inside: str, cluster_user_of: ClusterUserOf) -> str:
    user = _USER.fullmatch(inside)
    if user is not None:
        slack_id = user.group(1)
        cluster_user = cluster_user_of(slack_id)
        if cluster_user is None:
            raise UsageError(
                f"<@{slack_id}> has not linked a cluster account to skybot, so I don't know "
                "who they are on the cluster. Name their cluster user instead, or ask them "
                "to run `/sky link`."
            )
        return cluster_user
    target, _, label = inside.partition("|")
    if target.startswith("#"):  # a channel: <#C123|general>
        return "#" + unescape(label or target[1:])
    if target.startswith("!"):  # @here, @channel, a user group: what was typed
        return unescape(label) if label else "@" + target[1:].split("^")[0]
    if target.startswith("mailto:"):
        return unescape(target.removeprefix("mailto:"))
    return unescape(label or target)  # a link: the text the user typed
