"""The weekly lab digest: which week is due, what it says, who may turn it on, and that a
rerun or a late start never posts twice or posts stale news."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.config import ConfigError, IdentityConfig, load_config, parse_config
from core.digest import LabWeek, digest_lines, week_ending
from handlers.commands import command_table
from handlers.identity import IdentityDirectory
from handlers.services import Services
from scheduler.digest import WeeklyDigest
from store.digests import DigestChannel, add_digest_channel, digest_channels
from store.outbox import outbox_rows
from store.writer import StoreWriter
from tests.support.asking import answer_with_services
from tests.support.factories import make_snapshot, make_view

# Monday 30 Nov 2026, 09:00 UTC: a digest is due.
MONDAY_9 = datetime(2026, 11, 30, 9, tzinfo=UTC).timestamp()
HOUR = 3600.0


@pytest.mark.parametrize(
    ("now", "due"),
    [
        (MONDAY_9, MONDAY_9),
        (MONDAY_9 + 5 * HOUR, MONDAY_9),
        (MONDAY_9 - 60, MONDAY_9 - 7 * 24 * HOUR),
        (MONDAY_9 + 6.9 * 24 * HOUR, MONDAY_9),
        (MONDAY_9 + 7 * 24 * HOUR, MONDAY_9 + 7 * 24 * HOUR),
    ],
)
def test_week_ending_is_the_latest_posting_time(now: float, due: float) -> None:
    assert week_ending(now, "mon", 9, UTC) == due


def test_week_ending_on_another_weekday_and_hour() -> None:
    friday_17 = datetime(2026, 11, 27, 17, tzinfo=UTC).timestamp()
    assert week_ending(MONDAY_9, "fri", 17, UTC) == friday_17


def week(**fields: Any) -> LabWeek:
    base: dict[str, Any] = {
        "lab": "hoffman-lab",
        "since": MONDAY_9 - 7 * 24 * HOUR,
        "until": MONDAY_9,
        "cap": 4,
    }
    return LabWeek(**{**base, **fields})


def test_digest_names_gpu_hours_by_user_overcap_preemptions_and_growth() -> None:
    tib = 1024**3
    lines = digest_lines(
        week(
            gpu_hours={
                ("alice", False): 300.0,
                ("bob", False): 36.5,
                ("alice", True): 20.0,
                ("dave", True): 0.5,
            },
            requeues={"alice": 3, "dave": 1},
            growth={
                "/srv/hoffman-lab/flash9/alice": (2 * tib, 3 * tib),
                "/srv/hoffman-lab/flash9/bob": (tib, tib),
            },
        )
    )
    gpu, overcap, storage = lines
    assert gpu.splitlines() == [
        "*GPU-hours in `hoffman-lab`*: 336 h of 672 h under the cap of 4 GPUs (50%)",
        "• `alice`: 300 h (+20.0 h on overcap)",
        "• `bob`: 36.5 h",
    ]
    assert overcap == (
        "*Overcap*: 20.5 h of GPU time by 2 members; 4 jobs preempted and requeued "
        "(`alice` 3, `dave` 1)."
    )
    assert storage.splitlines() == [
        "*Storage*: +1.0T this week, 4.0T in all; grew the most:",
        "• `/srv/hoffman-lab/flash9/alice` +1.0T (now 3.0T)",
    ]


def test_a_quiet_week_says_so() -> None:
    assert digest_lines(week(cap=None)) == [
        "*GPU-hours in `hoffman-lab`*: 0 min\n"
        "Nobody ran GPU jobs in the lab's partition this week.",
        "*Overcap*: not used this week; no jobs were preempted.",
        "*Storage*: no new disk-usage reports this week.",
    ]


def test_long_user_lists_are_summed_up() -> None:
    hours = {(f"user{i:02d}", False): 100.0 - i for i in range(15)}
    gpu = digest_lines(week(gpu_hours=hours), top_users=3)[0].splitlines()
    assert gpu[1:] == [
        "• `user00`: 100 h",
        "• `user01`: 99.0 h",
        "• `user02`: 98.0 h",
        "• … and 12 more users with 1,098 h",
    ]


def test_digest_config_is_checked() -> None:
    assert load_config(None).digest.weekday == "mon"
    with pytest.raises(ConfigError, match=r"digest\.weekday"):
        parse_config({"digest": {"weekday": "monday"}})
    with pytest.raises(ConfigError, match=r"digest\.hour"):
        parse_config({"digest": {"hour": 24}})


# ----------------------------------------------------------------- scheduled posting


async def subscribe(writer: StoreWriter, channel: str, added_at: float) -> None:
    await writer.run(
        add_digest_channel, DigestChannel("hoffman-lab", channel, "T1", "UALICE", added_at)
    )


async def test_due_week_is_posted_once_with_its_chart(writer: StoreWriter) -> None:
    await subscribe(writer, "C0HOFFMAN", MONDAY_9 - 3 * 24 * HOUR)
    await subscribe(writer, "C0LATE", MONDAY_9 + HOUR)  # asked after this week's posting time
    woken = []
    clock = MONDAY_9 + 2 * HOUR
    digest = WeeklyDigest(load_config(None), writer, lambda: woken.append(1), lambda: clock, UTC)
    assert await digest.run() == 2
    rows = await writer.run(outbox_rows)
    assert [(r["target"], r["chart"] is not None, r["refused_to"]) for r in rows] == [
        ("C0HOFFMAN", False, "UALICE"),
        ("C0HOFFMAN", True, "UALICE"),
    ]
    assert rows[0]["text"].startswith("`hoffman-lab`: the week of Mon 23 Nov to Mon 30 Nov 2026")
    chart = json.loads(rows[1]["chart"])
    assert chart == {
        "kind": "lab_gpus",
        "lab": "hoffman-lab",
        "since": MONDAY_9 - 7 * 24 * HOUR,
        "until": MONDAY_9,
    }
    assert woken == [1]
    # Restarted an hour later: the same week is not posted again.
    clock += HOUR
    assert await digest.run() == 0
    # A week later the late channel gets its first digest too.
    clock += 7 * 24 * HOUR
    assert await digest.run() == 4


async def test_a_second_clusters_lab_gets_its_digest(writer: StoreWriter) -> None:
    """A channel subscribed to nova's lab: the digest found no such lab among the first
    cluster's and never posted it."""
    config = parse_config(
        {
            "clusters": [
                {"name": "skynet", "labs": [_lab("hoffman-lab")]},
                {"name": "nova", "labs": [_lab("kira-lab")]},
            ]
        }
    )
    subscribed = DigestChannel("kira-lab", "C0KIRA", "T1", "UDAVE", MONDAY_9 - 3 * 24 * HOUR)
    await writer.run(add_digest_channel, subscribed)
    digest = WeeklyDigest(config, writer, lambda: None, lambda: MONDAY_9 + HOUR, UTC)
    assert await digest.run() == 2
    rows = await writer.run(outbox_rows)
    assert rows[0]["target"] == "C0KIRA" and rows[0]["text"].startswith("`kira-lab`"), rows


def _lab(name: str) -> dict[str, str]:
    return {"name": name, "partition": name, "account": name}


async def test_a_digest_missed_for_longer_than_the_catch_up_is_skipped(
    writer: StoreWriter,
) -> None:
    await subscribe(writer, "C0HOFFMAN", MONDAY_9 - 3 * 24 * HOUR)
    late = MONDAY_9 + 25 * HOUR  # back after the default 24 h catch-up
    digest = WeeklyDigest(load_config(None), writer, lambda: None, lambda: late, UTC)
    assert await digest.run() == 0
    assert await writer.run(outbox_rows) == []


# ----------------------------------------------------------------- /sky digest


@pytest.fixture
def services(writer: StoreWriter) -> Services:
    identity = IdentityDirectory(
        IdentityConfig(links={"T1/UALICE": "alice", "T1/UCAROL": "carol"}), writer
    )
    snapshot = make_snapshot(
        members={"hoffman-lab": frozenset({"alice", "bob"}), "kira-lab": frozenset({"carol"})}
    )
    view = make_view(snapshot)

    async def no_runner(user: str, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("/sky digest must not need the runner")

    return Services(load_config(None), identity, no_runner, writer=writer, view=lambda: view)


async def sky(
    services: Services, text: str, user: str = "UALICE", channel: str = "C0HOFFMAN"
) -> str:
    assert services.view is not None
    cluster_user = {"UALICE": "alice", "UCAROL": "carol"}.get(user)
    reply = await answer_with_services(
        command_table(),
        services.view(),
        services,
        text,
        team_id="T1",
        user_id=user,
        cluster_user=cluster_user,
        now=MONDAY_9,
        channel_id=channel,
    )
    return reply.text


async def test_members_turn_the_digest_on_and_off_in_a_channel(
    services: Services, writer: StoreWriter
) -> None:
    answer = await sky(services, "digest hoffman-lab on")
    assert answer.startswith(
        "Done: <#C0HOFFMAN> will get *`hoffman-lab`*'s weekly digest every Mon"
    )
    assert [c.channel for c in await writer.run(digest_channels)] == ["C0HOFFMAN"]
    assert "already gets" in await sky(services, "digest hoffman-lab on")
    # Without a lab, the asker's own.
    assert "will no longer get *`hoffman-lab`*" in await sky(services, "digest OFF")
    assert await writer.run(digest_channels) == []
    assert "nothing to stop" in await sky(services, "digest hoffman-lab off")


async def test_only_members_and_only_in_channels(services: Services, writer: StoreWriter) -> None:
    assert "Only members of *`hoffman-lab`*" in await sky(
        services, "digest hoffman-lab on", user="UCAROL"
    )
    assert "in the channel that should" in await sky(
        services, "digest hoffman-lab on", channel="D0ALICE"
    )
    assert "link it with `/sky link" in await sky(services, "digest hoffman-lab on", user="UBOB")
    assert "I don't know a lab called `hofman-lab`. Did you mean `hoffman-lab`?" in await sky(
        services, "digest hofman-lab on"
    )
    assert "Usage: `/sky digest [LAB] [on|off]`" in await sky(services, "digest a b on")
    assert await writer.run(digest_channels) == []


async def test_preview_shows_the_week_so_far_and_where_it_goes(
    services: Services, writer: StoreWriter
) -> None:
    answer = await sky(services, "digest kira-lab", user="UCAROL")
    # The preview's dates are in the host's time zone.
    title = answer.splitlines()[0]
    assert title.startswith("`kira-lab`: the week of ") and title.endswith(" 2026 (so far)")
    assert "Not posted anywhere yet: `/sky digest kira-lab on`" in answer
    await sky(services, "digest hoffman-lab on")
    assert "Posted every Mon at 09:00 in <#C0HOFFMAN>." in await sky(services, "digest")
