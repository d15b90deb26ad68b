""" "Show more of the log" end to end: a real job on the test cluster, the real bot in HTTP mode
(clicks are signed as Slack signs them and go through Bolt's verification), the real runner
through sudo AS THE SKYBOT SERVICE USER, and the Slack stand-in.

The job's stderr is alice's alone (mode 0600, in a 0700 directory of hers), so every line
that reaches Slack was read as alice. bob clicking alice's button (a forwarded DM) is refused
and gets nothing of the file.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from msgspec.structs import replace

from bot.config import RunnerConfig, SlackConfig
from core.log_more import BEGINNING, LOG_MORE
from tests.support.bot_process import (
    SLACK_IDS,
    dms_about,
    free_port,
    linked_bot_config,
    linked_users,
    running_bot,
    wait_until_listening,
)
from tests.support.cluster import wait_for
from tests.support.private_jobs import private_dir, submit  # noqa: F401 (a fixture)
from tests.support.slack_standin import SlackStandIn, signed_block_action

pytestmark = pytest.mark.cluster

SECRET = "show-more-over-slack"
ACK_SECONDS = 3.0
LINES = 100  # the DM shows the last 15; each click the 15 before


def dm_buttons(slack: SlackStandIn, job_id: int) -> list[dict[str, Any]]:
    """The buttons of the failure DM about `job_id`."""
    for call in slack.calls_to("chat.postMessage"):
        if call.ok and f"Job {job_id} " in str(call.params.get("text")):
            blocks = call.params.get("blocks")
            blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
            return [e for b in blocks or [] if b["type"] == "actions" for e in b["elements"]]
    return []


def shown_lines(text: str) -> list[str]:
    return text.split("```\n", 1)[1].split("\n```", 1)[0].split("\n") if "```" in text else []


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_show_more_walks_back_through_stderr_as_its_owner_only(
    mode: str,
    tmp_path: Path,
    clean_queue: None,
    checkout_runner: None,
    private_dir: Path,  # noqa: F811
) -> None:
    as_skybot = tmp_path / "sudo-as-skybot"
    as_skybot.write_text('#!/bin/sh\nexec /usr/sbin/runuser -u skybot -- /usr/bin/sudo "$@"\n')
    as_skybot.chmod(0o755)
    port = free_port()
    config = replace(
        linked_bot_config(tmp_path),
        runner=RunnerConfig(sudo=str(as_skybot)),
        slack=SlackConfig(mode=mode, http_port=port),
    )
    url = f"http://127.0.0.1:{port}/slack/events"
    async with (
        SlackStandIn(users=linked_users()) as slack,
        running_bot(config, slack, SECRET),
        aiohttp.ClientSession() as session,
    ):
        if mode == "http":
            await wait_until_listening(url)
        else:
            await slack.wait_for_socket_connection(timeout=15)

        async def click(
            user: str, button: dict[str, Any], channel: str | None = None
        ) -> dict[str, Any]:
            payload = slack.block_action_payload(
                user_id=SLACK_IDS[user],
                action_id=button["action_id"],
                value=button["value"],
                channel_id=channel or slack.dm_channel_for("UALICE"),
            )
            if mode == "socket":
                await slack.send_block_action(payload, timeout=ACK_SECONDS)
            else:
                signed = signed_block_action(SECRET, payload)
                started = time.monotonic()
                async with session.post(url, data=signed.body, headers=signed.headers) as r:
                    assert r.status == 200
                assert time.monotonic() - started < ACK_SECONDS
            post = await slack.wait_for_response_url_post(url=payload["response_url"], timeout=60)
            return post.body

        # The job makes its stderr alice's alone, writes LINES numbered lines and fails.
        failed = submit(
            private_dir,
            "chatty",
            'chmod 600 "$D/$SLURM_JOB_NAME-$SLURM_JOB_ID.err"\n'
            f'for i in $(seq 1 {LINES}); do echo "err line $i <!channel>" >&2; done\n'
            "sleep 6\nexit 3",
        )
        await wait_for(
            lambda: dms_about(slack, failed), 120, "the failure's DM", 1, in_thread=False
        )
        (dm,) = dms_about(slack, failed)
        assert "failed with exit code 3" in dm
        expected = [f"err line {i} &lt;!channel&gt;" for i in range(1, LINES + 1)]
        assert shown_lines(dm.split("*stderr*", 1)[1]) == expected[-15:]
        (button,) = [b for b in dm_buttons(slack, failed) if "stderr" in b["text"]["text"]]
        assert button["action_id"] == f"{LOG_MORE}:skynet/{failed}:err"
        # cluster, job, stream, offset: no path
        assert button["value"].startswith(f"skynet/{failed}:err:")

        # bob clicking alice's button (a forwarded DM): refused, for him only, nothing read.
        refused = await click("bob", button)
        assert refused["response_type"] == "ephemeral"
        assert refused["text"] == (
            f"Job {failed} belongs to `alice`, not to you (`bob`): skybot shows a job's output "
            "only to its owner, so nothing was read."
        )
        assert "err line" not in json.dumps(refused)

        # alice walks back through the file, 15 lines a click, to its beginning.
        shown = expected[-15:]
        for _ in range(LINES // 15 + 1):
            answer = await click("alice", button)
            assert answer["response_type"] == "in_channel"
            assert answer["replace_original"] is False  # the failure DM stays as it was
            earlier = shown_lines(answer["text"])
            assert earlier and earlier == expected[: len(expected) - len(shown)][-len(earlier) :]
            shown = earlier + shown
            buttons = [
                e for b in answer.get("blocks", []) if b["type"] == "actions" for e in b["elements"]
            ]
            if not buttons:
                break
            (button,) = buttons
        assert shown == expected
        assert answer["text"].endswith(BEGINNING)

        # The DM forwarded into a channel, alice clicking there: the chunk goes to her DM,
        # the channel is told nothing of the output (issue 27 item 9).
        (first,) = [b for b in dm_buttons(slack, failed) if "stderr" in b["text"]["text"]]
        elsewhere = await click("alice", first, channel="C1")
        assert elsewhere["response_type"] == "ephemeral"
        assert elsewhere["text"].startswith("The earlier output is in your DM with skybot")
        assert "err line" not in json.dumps(elsewhere)
        moved = await slack.wait_for_call(
            "chat.postMessage",
            timeout=30,
            predicate=lambda c: (
                c.params.get("channel") == "UALICE"
                and "Earlier output of job" in str(c.params.get("text"))
            ),
        )
        assert shown_lines(str(moved.params["text"])) == expected[-30:-15]

    # The bot's own user could not have read a byte of it.
    denied = subprocess.run(
        ["runuser", "-u", "skybot", "--", "cat", f"{private_dir}/chatty-{failed}.err"],
        capture_output=True,
        check=False,
    )
    assert denied.returncode != 0
    everything = " ".join(str(c.params) for c in slack.calls_to("chat.postMessage"))
    assert everything.count("err line 1 ") == 0  # the early lines came only through clicks
