"""The weekly digest across wall-clock steps, under a running `skybot run` whose clock
libfaketime sets (issue 28, item 1): stepped forward over its time it fires at once (not an
hour later, when APScheduler's monotonic timer would have woken); stepped back over it and
forward again, it does not fire twice."""

from __future__ import annotations

import time
from pathlib import Path

from store.digests import DigestChannel, add_digest_channel
from store.writer import StoreWriter
from tests.support.bot_lifecycle import exit_code_after_sigterm, running
from tests.support.bot_process import free_port, start_bot, wait_until_listening
from tests.support.clock_steps import faketime_env, set_clock
from tests.support.cluster import wait_for
from tests.support.slack_standin import SlackStandIn

CHANNEL = "C0DIGEST"
# A Monday, as the host's local time: the digest's time is Monday 09:00 (the default).
MONDAY = "2026-12-07"


def _config(tmp_path: Path, port: int) -> Path:
    config = tmp_path / "skybot.toml"
    config.write_text(
        '[slack]\nmode = "socket"\n'
        f'[slurm]\nbin_dir = "{tmp_path}/no-slurm"\npoll_seconds = 60\n'
        f'[database]\npath = "{tmp_path}/skybot.db"\n'
        f'[metrics]\nport = {port}\nhost = "127.0.0.1"\n'
        '[digest]\nweekday = "mon"\nhour = 9\n'
        '[[labs]]\nname = "hoffman-lab"\npartition = "hoffman-lab"\naccount = "hoffman-lab"\n'
        f'storage_roots = ["{tmp_path}/flash9"]\n'
    )
    return config


def _digests(slack: SlackStandIn) -> list[str]:
    return [
        str(call.params.get("text"))
        for call in slack.calls_to("chat.postMessage")
        if call.ok and call.params.get("channel") == CHANNEL
    ]


def _lines(log: Path, text: str) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines() if text in line]


async def _logged(log: Path, text: str, count: int = 1, timeout: float = 15) -> str:
    """The `count`th line of the bot's log that holds `text`, once it is there."""

    def enough() -> list[str] | None:
        found = _lines(log, text)
        return found if len(found) >= count else None

    found = await wait_for(enough, timeout, f"{count} lines with {text!r}", 0.05)
    return found[count - 1]


async def _wait_for_digest(slack: SlackStandIn, timeout: float) -> float:
    started = time.monotonic()
    await wait_for(
        lambda: _digests(slack), timeout, "a digest after the step", 0.1, in_thread=False
    )
    return time.monotonic() - started


async def test_the_digest_fires_once_across_steps_over_its_time(tmp_path: Path) -> None:
    writer = StoreWriter(tmp_path / "skybot.db")
    subscribed = DigestChannel("hoffman-lab", CHANNEL, "T0STANDIN", "UALICE", 1_700_000_000.0)
    await writer.run(add_digest_channel, subscribed)
    writer.close()
    control = tmp_path / "faketime"
    set_clock(control, f"@{MONDAY} 08:00:00")
    port = free_port()
    log = tmp_path / "bot.log"
    async with SlackStandIn() as slack:
        with (
            log.open("wb") as out,
            running(
                start_bot(_config(tmp_path, port), slack, log=out, extra_env=faketime_env(control))
            ) as bot,
        ):
            await wait_until_listening(f"http://127.0.0.1:{port}/livez", attempts=400)
            # The catch-up run at start-up has decided: 08:00, last week's is too old.
            assert "not posted late" in await _logged(log, "weekly digest: ")
            assert _digests(slack) == []
            set_clock(control, f"@{MONDAY} 09:00:05")  # forward 1 h, over 09:00
            delay = await _wait_for_digest(slack, 15)
            set_clock(control, f"@{MONDAY} 08:00:10")  # back 1 h
            await _logged(log, "the wall clock jumped back")
            set_clock(control, f"@{MONDAY} 09:00:20")  # forward over 09:00 again
            await _logged(log, "the wall clock jumped forward", 2)
            # The calendar as it stands after the third step: next week's run, or (if due
            # again today) a run that finds this week's digest queued already.
            calendar = await _logged(log, "weekly lab digest: next run", 3)
            if MONDAY in calendar.split("next run")[1]:
                await _logged(log, "is already queued or posted")
            assert len(_lines(log, "messages queued for the week")) == 1
            code, _ = await exit_code_after_sigterm(bot)
    print(f"digest posted {delay:.1f} s after the step forward over its time")
    (digest,) = _digests(slack)
    assert "hoffman-lab" in digest
    assert code == 0
