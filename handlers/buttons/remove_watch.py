"""Clicks on "Remove #N" under `/sky watch`'s list or on the Home tab: end that watch.

The button (core/buttons/remove_watch.py) carries only the watch's number. Removal matches
the clicking Slack user's own watches only (store/watches.py), so a forwarded list removes
nothing of anyone else's. The answer replaces the list with the user's watches as they now
are; on the Home tab, the tab shows them, with what happened on top.
"""

from __future__ import annotations

import time

from core.buttons.remove_watch import REMOVE_WATCH, watch_number_of
from core.view import ClusterView
from handlers.clicks import Answer, Button, Click
from handlers.commands.watch import unwatch_text, watch_list
from handlers.reply import Reply, section
from handlers.services import Services
from store.watches import active_watches_of


async def unwatch_clicked(services: Services, team_id: str, user_id: str, value: str) -> Reply:
    """The list after removing the clicked watch, with a line saying what happened."""
    number = watch_number_of(value)
    if services.writer is None or number is None:
        return Reply("That button does not name a watch skybot can remove.")
    outcome = await unwatch_text(services, team_id, user_id, number)
    left = await services.writer.run(active_watches_of, team_id, user_id)
    listing = watch_list(left, time.time())
    return Reply(f"{outcome}\n{listing.text}", [section(outcome), *listing.blocks])


async def clicked(click: Click, view: ClusterView, services: Services) -> Answer:
    reply = await unwatch_clicked(services, click.team_id, click.user_id, click.value)
    return Answer(reply.text, reply.blocks)


BUTTON = Button(
    REMOVE_WATCH, clicked, lambda _: "skybot could not remove that watch; try `/sky unwatch ID`."
)
