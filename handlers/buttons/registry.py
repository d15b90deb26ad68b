"""Every button skybot builds, registered once: ack, work after the ack, answer, log.

Each click is acked at once, within Slack's 3 s; the button's `clicked` runs in a task of its
own (BackgroundWork), against the latest snapshot; its answer goes through the click's
response_url (retried, else by DM: handlers/click_answers.py), or, for a click on the Home tab
(which has none), on top of the tab published again. An action id no button takes (a stale
button of an older skybot, a forged payload) is acked with one warning line.

`ACTION_IDS` and `ACTION_PATTERNS` are derived from `BUTTONS`; the app manifest's interactivity
setting is tested against them (tests/test_deploy_files.py), and tests/test_button_registry.py
fails for a button built without a registered handler.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from core.buttons import split_cluster
from handlers.buttons import cancel, move_to_overcap, remove_watch, show_more_log
from handlers.click_answers import answer_later
from handlers.clicks import Answer, BackgroundWork, Button, Click, HomeAnswer, click_of
from handlers.clusters import ClusterDesk, ClusterDesks, single_desk
from handlers.services import Services
from store.reader import SnapshotCache

log = logging.getLogger(__name__)

BUTTONS: tuple[Button, ...] = (
    cancel.BUTTON,
    move_to_overcap.BUTTON,
    show_more_log.BUTTON,
    remove_watch.BUTTON,
)
ACTION_IDS = frozenset(b.kind.stem for b in BUTTONS)
ACTION_PATTERNS = tuple(b.kind.pattern for b in BUTTONS)
NOT_SERVED = "That button names a cluster this skybot does not serve: nothing was done."
# What no button's pattern took: not a button of this skybot's.
ANY_ACTION = re.compile(".*")


def register_buttons(
    app: AsyncApp,
    cache: SnapshotCache,
    services: Services,
    home: HomeAnswer | None = None,
    desks: ClusterDesks | None = None,
) -> None:
    """A listener per button, then the one that acks what none of them took (Bolt tries
    listeners in order). A value naming a cluster (`CLUSTER/…`) acts on that one of `desks`."""
    working = BackgroundWork()
    clusters = desks or single_desk(services.config, cache.current, services)
    for button in BUTTONS:
        _register(app, button, clusters, services, home, working)

    @app.action(ANY_ACTION)
    async def unknown_action(ack: AsyncAck, body: dict[str, Any]) -> None:
        # Unacked, Slack shows the clicker an error and Bolt logs a multi-line "Unhandled
        # request" block for each one.
        await ack()
        click = click_of(body)
        log.warning(
            "ignored a click on an action skybot does not have: %r from %s",
            click.action_id[:80],
            click.user_id[:20],
        )


def _register(
    app: AsyncApp,
    button: Button,
    desks: ClusterDesks,
    services: Services,
    home: HomeAnswer | None,
    working: BackgroundWork,
) -> None:
    async def listener(
        ack: AsyncAck, respond: AsyncRespond, body: dict[str, Any], client: AsyncWebClient
    ) -> None:
        await ack()
        click = click_of(body)
        log.info("%s click by %s on %r", button.kind.name, click.user_id[:20], click.value[:40])
        working.start(_act(button, click, desks, services, respond, client, home))

    app.action(button.kind.pattern)(listener)


async def _act(
    button: Button,
    click: Click,
    desks: ClusterDesks,
    services: Services,
    respond: AsyncRespond,
    client: AsyncWebClient,
    home: HomeAnswer | None,
) -> None:
    answer = await answer_click(button, click, desks, services)
    what = f"the answer to {click.user_id[:20]}'s {button.kind.name} click on {click.value[:20]!r}"
    if click.has_response_url:
        await answer_later(
            respond, answer.message(), user_id=click.user_id, dm=services.dm, what=what
        )
    elif home is not None:
        await home(client, click.team_id, click.user_id, answer.notice)
    else:
        log.warning("no way to give %s: %s", what, answer.notice)


async def answer_click(
    button: Button, click: Click, desks: ClusterDesks, services: Services
) -> Answer:
    """What `click` on `button` is answered with, worked out on the cluster its value names
    (against that cluster's latest snapshot, with its services)."""
    desk = on_cluster(click, desks)
    if desk is None:
        return Answer(NOT_SERVED)
    try:
        return await button.clicked(click, desk.view(), desk.services or services)
    except Exception:
        log.exception("the %s button failed", button.kind.name)
        return Answer(button.failed(click))


def on_cluster(click: Click, desks: ClusterDesks) -> ClusterDesk | None:
    """The desk of the cluster the click's value names; None for a cluster this bot does not
    serve. The click goes to its button as it came (value and action id alike), and the
    button checks again that it names its view's cluster. A value naming none (a message
    sent before values named their cluster) is the default cluster's."""
    split = split_cluster(click.value)
    if split is None or split[0] is None:
        return desks.default
    return desks.named(split[0])
