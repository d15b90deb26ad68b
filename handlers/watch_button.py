"""Clicks on "Remove #N" under `/sky watch`'s list: end that watch, as the clicker.

The button carries only the watch's number. Removal matches the clicking Slack user's own
watches only (store/watches.py), so a forwarded list removes nothing of anyone else's.
The answer replaces the list with the user's watches as they now are.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from handlers.actions import HomeAnswer
from handlers.clicks import BackgroundWork, click_of
from handlers.commands.watch import UNWATCH, unwatch_text, watch_list
from handlers.reply import Reply, section
from handlers.services import Services
from store.reader import SnapshotCache
from store.watches import active_watches_of

log = logging.getLogger(__name__)

UNWATCH_PATTERN = re.compile(rf"^{UNWATCH}:[0-9]{{1,12}}$")
ACTION_IDS = frozenset({UNWATCH})
ACTION_PATTERNS = (UNWATCH_PATTERN,)


async def unwatch_clicked(services: Services, team_id: str, user_id: str, value: str) -> Reply:
    """The list after removing the clicked watch, with a line saying what happened."""
    if services.writer is None or not value.isdigit() or len(value) > 12:
        return Reply("That button does not name a watch skybot can remove.")
    outcome = await unwatch_text(services, team_id, user_id, int(value))
    left = await services.writer.run(active_watches_of, team_id, user_id)
    listing = watch_list(left, time.time())
    return Reply(f"{outcome}\n{listing.text}", [section(outcome), *listing.blocks])


def register_listeners(
    app: AsyncApp, cache: SnapshotCache, services: Services, home: HomeAnswer | None = None
) -> None:
    working = BackgroundWork()

    @app.action(UNWATCH_PATTERN)
    async def remove(
        ack: AsyncAck, respond: AsyncRespond, body: dict[str, Any], client: AsyncWebClient
    ) -> None:
        await ack()
        click = click_of(body)

        async def act() -> None:
            try:
                reply = await unwatch_clicked(services, click.team_id, click.user_id, click.value)
            except Exception:
                log.exception("remove-watch button failed")
                reply = Reply("skybot could not remove that watch; try `/sky unwatch ID`.")
            if click.has_response_url:
                await respond(text=reply.text, blocks=reply.blocks or None, replace_original=True)
            elif home is not None:
                # A click on the Home tab has no response_url: the tab, published again, shows
                # the watches left and what happened.
                await home(client, click.team_id, click.user_id, reply.text.split("\n", 1)[0])

        working.start(act())
