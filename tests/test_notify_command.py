"""`/sky notify` and the [notifications] config section."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from bot.config import ConfigError, IdentityConfig, load_config, parse_config
from handlers.commands import command_table
from handlers.identity import IdentityDirectory
from handlers.services import Services
from store.alerts import load_preference, log_tails_wanted
from store.arrays import tasks_wanted
from store.writer import StoreWriter
from tests.support.asking import answer_with_services
from tests.support.factories import make_snapshot, make_view


async def no_runner(user: str, request: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("/sky notify must not need the runner")


@pytest.fixture
def services(writer: StoreWriter) -> Services:
    identity = IdentityDirectory(IdentityConfig(links={"T1/U1": "alice"}), writer)
    return Services(load_config(None), identity, no_runner, writer=writer)


async def sky(services: Services, text: str, user_id: str = "U1") -> str:
    reply = await answer_with_services(
        command_table(),
        make_view(make_snapshot()),
        services,
        text,
        team_id="T1",
        user_id=user_id,
        cluster_user=None,
    )
    return reply.text


async def test_shows_the_default_then_the_choice(services: Services, writer: StoreWriter) -> None:
    assert await sky(services, "notify") == (
        "You get DMs about `alice`'s jobs for: every job end, preemption and requeue "
        "(`all`, the default). Change it with `/sky notify all|end|fail|preempt|off`."
    )
    assert await sky(services, "notify FAIL") == (
        "Done: you will get DMs about `alice`'s jobs for failures, timeouts, out-of-memory, "
        "node failures and preemptions."
    )
    assert await writer.run(load_preference, "T1", "U1") == "fail"
    assert await sky(services, "notify") == (
        "You get DMs about `alice`'s jobs for: failures, timeouts, out-of-memory, node failures "
        "and preemptions (`fail`, your choice). Change it with "
        "`/sky notify all|end|fail|preempt|off`."
    )
    assert await sky(services, "notify off") == (
        "Job DMs are off. `/sky notify all` turns them back on."
    )
    assert await writer.run(load_preference, "T1", "U1") == "off"


async def test_unlinked_users_get_a_one_line_hint(services: Services, writer: StoreWriter) -> None:
    text = await sky(services, "notify all", user_id="U9")
    assert text == (
        "Job DMs go to your linked cluster account: link it first with "
        "`/sky link YOUR_CLUSTER_USER`."
    )
    assert await writer.run(load_preference, "T1", "U9") is None


async def test_bad_choice_is_a_usage_error(services: Services, writer: StoreWriter) -> None:
    text = await sky(services, "notify sometimes")
    assert text == (
        "`/sky notify` takes one of `all`, `end`, `fail`, `preempt`, `off`; "
        "for example `/sky notify fail`."
    )
    assert "Usage" in await sky(services, "notify all now")
    assert await writer.run(load_preference, "T1", "U1") is None


def test_notifications_section_defaults_and_validation() -> None:
    n = load_config(None).notifications
    assert (n.default_preference, n.filesystem_thresholds, n.rearm_margin) == (
        "all",
        (90.0, 95.0, 98.0),
        3.0,
    )
    custom = parse_config({"notifications": {"filesystem_thresholds": [85, 99]}})
    assert custom.notifications.filesystem_thresholds == (85.0, 99.0)
    for data, message in [
        ({"default_preference": "loud"}, "notifications.default_preference must be one of"),
        ({"filesystem_thresholds": [95, 90]}, "must be increasing percentages"),
        ({"filesystem_thresholds": ["90"]}, "must be a list of numbers"),
        ({"messages_per_second_per_channel": 0}, "must be greater than 0"),
        ({"hoard_top_n": -1}, "notifications.hoard_top_n must not be negative"),
        ({"hoard_threshold": 1}, "unknown config key: notifications.hoard_threshold"),
    ]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
            parse_config({"notifications": data})


async def test_job_output_in_failure_dms_can_be_turned_off_and_on(
    services: Services, writer: StoreWriter
) -> None:
    shown = (
        "Failure DMs show the last lines of your job's stderr and stdout, read as `alice` and "
        "shown only in your DM."
    )
    assert await sky(services, "notify logs") == f"{shown} `/sky notify logs off` leaves them out."
    assert await sky(services, "notify LOGS off") == (
        "Done: failure DMs will leave your job's output out."
    )
    assert await writer.run(log_tails_wanted, "T1", "U1") is False
    assert await sky(services, "notify logs") == (
        "Failure DMs leave your job's output out. `/sky notify logs on` shows it."
    )
    # The job-event choice is separate from it.
    assert await writer.run(load_preference, "T1", "U1") is None
    assert await sky(services, "notify logs on") == f"Done. {shown}"
    assert await writer.run(log_tails_wanted, "T1", "U1") is True
    assert "Usage" in await sky(services, "notify logs maybe")
    assert "Usage" in await sky(services, "notify logs on now")


async def test_a_site_that_turned_job_output_off_says_so(writer: StoreWriter) -> None:
    identity = IdentityDirectory(IdentityConfig(links={"T1/U1": "alice"}), writer)
    base = load_config(None)
    config = replace(base, notifications=replace(base.notifications, log_tail_lines=0))
    services = Services(config, identity, no_runner, writer=writer)
    assert await sky(services, "notify logs on") == (
        "This skybot does not show job output in DMs: an admin turned it off."
    )
    assert await writer.run(log_tails_wanted, "T1", "U1") is True  # nothing stored


def test_log_tail_settings_are_validated() -> None:
    assert load_config(None).notifications.log_tail_lines == 15
    for key, bad in (("log_tail_lines", -1), ("log_tail_lines", 500), ("log_tail_seconds", 0)):
        with pytest.raises(ConfigError, match=rf"notifications\.{key}"):
            parse_config({"notifications": {key: bad}})


async def test_notify_tasks_turns_a_dm_per_array_task_on_and_off(
    services: Services, writer: StoreWriter
) -> None:
    """Issue 40: one DM per array by default; `/sky notify tasks on` for one per task."""
    assert (await sky(services, "notify tasks")).startswith(
        "Job arrays of `alice` get one DM when their last task ends"
    )
    assert await sky(services, "notify tasks on") == (
        "Done: you will get a DM for each task of `alice`'s job arrays."
    )
    assert await writer.run(tasks_wanted, "T1", "U1")
    assert (await sky(services, "notify tasks")).startswith("You get a DM for each task")
    assert await sky(services, "notify tasks off") == (
        "Done: one DM per job array, when its last task ends."
    )
    assert not await writer.run(tasks_wanted, "T1", "U1")
    assert "`/sky notify tasks on` or `/sky notify tasks off`" in await sky(
        services, "notify tasks maybe"
    )
