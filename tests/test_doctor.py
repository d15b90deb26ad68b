"""`skybot doctor` on the real machine: a correct set-up passes, each broken one names its fix.

The doctor runs as a subprocess, as an admin would run it: as root, checking as the service
user `skybot`, with the runner and sudo rule that `skybot install` installed, the real
Slurm test cluster, and the Slack stand-in in place of Slack.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import __version__
from store.db import open_db
from tests.support.cluster import slurm_answers
from tests.support.doctor_process import SERVICE_USER, run_doctor
from tests.support.slack_standin import SlackChannel, SlackStandIn

pytestmark = pytest.mark.cluster

RUNNER = "/usr/local/libexec/skybot-runner"
ROOTS = {"hoffman-lab": "/srv/hoffman-lab/flash9", "kira-lab": "/srv/kira-lab/share4"}


@pytest.fixture(scope="module")
def slurm_up(checkout_runner: None) -> None:
    """The real test cluster must answer (and the runner be this checkout's). Unlike
    conftest's `cluster`, this cancels no jobs at the start of each test: the doctor only
    reads Slurm."""
    if not slurm_answers():
        pytest.fail("the Slurm test cluster is not answering: run `deploy/testcluster.sh up`")


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A database directory the service user owns and can reach (pytest's tmp is root-only)."""
    path = Path(tempfile.mkdtemp(prefix="skybot-doctor-", dir="/tmp"))
    os.chown(path, pwd.getpwnam(SERVICE_USER).pw_uid, -1)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_config(
    tmp_path: Path,
    state_dir: Path,
    *,
    runner: str = RUNNER,
    bin_dir: str = "/usr/bin",
    roots: dict[str, str] = ROOTS,
    images_dir: str = "/enroot",
    extra: str = "",
) -> Path:
    labs = "".join(
        f'[[labs]]\nname = "{lab}"\npartition = "{lab}"\naccount = "{lab}"\n'
        f'storage_roots = ["{root}"]\n\n'
        for lab, root in roots.items()
    )
    config = tmp_path / "skybot.toml"
    config.write_text(
        f'[database]\npath = "{state_dir}/skybot.db"\n\n'
        f'[runner]\npath = "{runner}"\n\n'
        f'[slurm]\nbin_dir = "{bin_dir}"\n\n'
        f'[images]\ndir = "{images_dir}"\n\n{labs}{extra}'
    )
    return config


async def test_correct_setup_passes(slurm_up: None, tmp_path: Path, state_dir: Path) -> None:
    # An existing database, as after the bot's first start, so open_db and WAL are checked.
    db = open_db(state_dir / "skybot.db")
    db.conn.close()
    os.chown(state_dir / "skybot.db", pwd.getpwnam(SERVICE_USER).pw_uid, -1)
    async with SlackStandIn() as slack:
        result = await run_doctor(write_config(tmp_path, state_dir), slack)
    print(result.output)
    assert result.status == 0, result.output
    assert "✘" not in result.output and "all checks passed" in result.output
    assert "bot 'skybot' in team 'Sky Test'" in result.line("slack auth")
    assert "commands, chat:write" in result.line("slack scopes")
    assert "apps.connections.open OK" in result.line("socket mode")
    for label in ("squeue --json", "sinfo --json", "sacct --json", "sacctmgr show assoc"):
        assert f"✔ slurm: {label} answered" in result.output
    assert RUNNER in result.line("sudo rule")
    assert "root-owned, mode 0755" in result.line("runner")
    assert "readable by skybot" in result.line("storage hoffman-lab")
    assert "/enroot is readable by skybot (6 images)" in result.line("images")
    assert result.line("job comments").startswith("✔ job comments: slurmdbd stores job")
    assert "WAL" in result.line("database")


async def test_bad_token(slurm_up: None, tmp_path: Path, state_dir: Path) -> None:
    async with SlackStandIn() as slack:
        wrong = "xoxb-1111-not-the-right-token"
        result = await run_doctor(write_config(tmp_path, state_dir), slack, bot_token=wrong)
    assert result.status == 1
    line = result.line("slack auth")
    assert line.startswith("✘") and "invalid_auth" in line
    assert "fix: SLACK_BOT_TOKEN is wrong or revoked" in line


async def test_missing_scope_fails_and_missing_header_warns(
    slurm_up: None, tmp_path: Path, state_dir: Path
) -> None:
    config = write_config(tmp_path, state_dir)
    async with SlackStandIn(bot_scopes="commands") as slack:
        result = await run_doctor(config, slack)
    line = result.line("slack scopes")
    assert result.status == 1 and line.startswith("✘") and "lacks chat:write" in line
    assert "fix: Add the missing Bot Token Scopes" in line
    async with SlackStandIn(bot_scopes=None) as slack:
        result = await run_doctor(config, slack)
    assert result.line("slack scopes").startswith("! slack scopes: Slack sent no x-oauth-scopes")


async def test_runner_path_the_sudo_rule_does_not_list(
    slurm_up: None, tmp_path: Path, state_dir: Path
) -> None:
    config = write_config(tmp_path, state_dir, runner="/usr/local/libexec/not-the-runner")
    async with SlackStandIn() as slack:
        result = await run_doctor(config, slack)
    assert result.status == 1
    line = result.line("sudo rule")
    assert line.startswith("✘") and "not-the-runner is not among the commands" in line
    assert "fix: Install the sudoers rule (`skybot install runner sudoers` as root)" in line
    assert result.line("runner").startswith("✘")


async def test_writable_runner(slurm_up: None, tmp_path: Path, state_dir: Path) -> None:
    runner = tmp_path / "skybot-runner"
    shutil.copy2(RUNNER, runner)
    runner.chmod(runner.stat().st_mode | stat.S_IWOTH)
    async with SlackStandIn() as slack:
        result = await run_doctor(write_config(tmp_path, state_dir, runner=str(runner)), slack)
    assert result.status == 1
    line = result.line("runner")
    assert line.startswith("✘") and "writable by group or others (mode 0757)" in line
    assert "fix: Reinstall the runner" in line


async def test_unreadable_and_missing_storage_roots(
    slurm_up: None, tmp_path: Path, state_dir: Path
) -> None:
    locked = Path(tempfile.mkdtemp(prefix="skybot-doctor-locked-", dir="/tmp"))
    locked.chmod(0)
    try:
        roots = {"hoffman-lab": str(locked), "kira-lab": str(tmp_path / "not-mounted")}
        async with SlackStandIn() as slack:
            result = await run_doctor(write_config(tmp_path, state_dir, roots=roots), slack)
    finally:
        locked.rmdir()
    assert result.status == 1
    line = result.line("storage hoffman-lab")
    assert line.startswith("✘") and "cannot be listed by skybot" in line
    assert "fix: Grant skybot read and search access" in line
    line = result.line("storage kira-lab")
    assert line.startswith("✘") and "does not exist — fix: Mount the filesystem" in line


async def test_missing_image_directory(slurm_up: None, tmp_path: Path, state_dir: Path) -> None:
    async with SlackStandIn() as slack:
        missing = str(tmp_path / "enroot")
        result = await run_doctor(write_config(tmp_path, state_dir, images_dir=missing), slack)
    assert result.status == 1
    line = result.line("images")
    assert line.startswith("✘") and f"{missing} is not a directory" in line
    assert 'or set images.dir = "" to turn /sky images off' in line


async def test_job_comments_not_stored_is_a_warning_with_its_fix(
    slurm_up: None, tmp_path: Path, state_dir: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for command in ("squeue", "sinfo", "sacct", "sacctmgr"):
        (bin_dir / command).symlink_to(f"/usr/bin/{command}")
    scontrol = bin_dir / "scontrol"
    scontrol.write_text("#!/bin/sh\necho 'AccountingStoreFlags    = (null)'\n")
    scontrol.chmod(0o755)
    async with SlackStandIn() as slack:
        result = await run_doctor(write_config(tmp_path, state_dir, bin_dir=str(bin_dir)), slack)
    line = result.line("job comments")
    assert line.startswith("! job comments: AccountingStoreFlags is (null)")
    assert "fix: Add AccountingStoreFlags=job_comment to slurm.conf" in line
    # A warning, not a failure: everything else on this machine is set up right.
    assert result.status == 0, result.output


async def test_slurm_unreachable(slurm_up: None, tmp_path: Path, state_dir: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = bin_dir / "squeue"
    squeue.write_text(
        "#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller' >&2\nexit 1\n"
    )
    squeue.chmod(0o755)
    async with SlackStandIn() as slack:
        result = await run_doctor(write_config(tmp_path, state_dir, bin_dir=str(bin_dir)), slack)
    assert result.status == 1
    line = next(ln for ln in result.output.splitlines() if "squeue --json" in ln)
    assert line.startswith("✘") and "Unable to contact slurm controller" in line
    assert "fix: Is slurmctld (and slurmdbd, for sacct/sacctmgr) reachable" in line


async def test_database_directory_not_writable(slurm_up: None, tmp_path: Path) -> None:
    root_only = tmp_path / "state"  # under pytest's root-only tmp: skybot cannot write here
    root_only.mkdir()
    async with SlackStandIn() as slack:
        result = await run_doctor(write_config(tmp_path, root_only), slack)
    line = result.line("database")
    assert result.status == 1 and line.startswith("✘") and "not writable by skybot" in line
    assert "fix: Create" in line


async def test_lab_partition_or_account_slurm_does_not_have(
    slurm_up: None, tmp_path: Path, state_dir: Path
) -> None:
    typos = (
        '[[labs]]\nname = "vision-lab"\npartition = "vision-lab"\naccount = "hoffman-lab"\n\n'
        '[[labs]]\nname = "typo-lab"\npartition = "kira-lab"\naccount = "kira-lbb"\n'
    )
    async with SlackStandIn() as slack:
        result = await run_doctor(write_config(tmp_path, state_dir, extra=typos), slack)
    assert result.status == 1
    assert result.line("slurm lab hoffman-lab").startswith("✔")
    line = result.line("slurm lab vision-lab")
    assert line.startswith("✘ slurm lab vision-lab: Slurm has no partition 'vision-lab'"), line
    assert "fix: Correct labs.partition for lab vision-lab (Slurm has debug, hoffman-lab," in line
    assert "or add PartitionName=vision-lab to slurm.conf" in line
    line = result.line("slurm lab typo-lab")
    assert line.startswith("✘ slurm lab typo-lab: the accounting database has no account"), line
    assert "fix: Correct labs.account for lab typo-lab (Slurm has " in line
    assert "`sacctmgr add account kira-lbb`" in line


async def test_alert_channel_the_bot_is_not_in_or_that_does_not_exist(
    slurm_up: None, tmp_path: Path, state_dir: Path
) -> None:
    config = write_config(tmp_path, state_dir)
    async with SlackStandIn() as slack:
        slack.add_channel(SlackChannel("C0SKYUSERS", "skynet-users", bot_is_member=False))
        result = await run_doctor(config, slack)
    assert result.status == 1
    line = result.line("alert channel")
    assert line == (
        "✘ alert channel: skybot is not a member of #skynet-users (C0SKYUSERS) — fix: In "
        "#skynet-users, type `/invite @skybot` (the bot posts only where it is a member)."
    )
    # By channel id, a private channel the bot is not in is invisible to it, like a typo.
    hidden = SlackChannel("G0HIDDEN1", "admins", is_private=True, bot_is_member=False)
    for channel in ("G0HIDDEN1", "#skynet-userz"):
        config = write_config(tmp_path, state_dir, extra=f'[slack]\nalert_channel = "{channel}"\n')
        async with SlackStandIn() as slack:
            slack.add_channel(hidden)
            result = await run_doctor(config, slack)
        line = result.line("alert channel")
        assert line.startswith(f"✘ alert channel: {channel} does not exist, or is private"), line
        assert "fix: Set slack.alert_channel to an existing channel" in line
    config = write_config(tmp_path, state_dir, extra='[slack]\nalert_channel = "G0HIDDEN1"\n')
    async with SlackStandIn() as slack:
        slack.add_channel(SlackChannel("G0HIDDEN1", "admins", is_private=True))
        result = await run_doctor(config, slack)
    assert result.line("alert channel") == (
        "✔ alert channel: #admins (G0HIDDEN1) exists and skybot is a member"
    )


async def test_the_doctor_never_creates_or_opens_the_database(
    slurm_up: None, tmp_path: Path, state_dir: Path
) -> None:
    """Run as root without --service-user, it used to create a root-owned database that the
    service could not write; even a read-only SQLite open leaves root-owned -wal/-shm files."""
    database = state_dir / "skybot.db"
    async with SlackStandIn() as slack:
        result = await run_doctor(write_config(tmp_path, state_dir), slack, service_user=None)
        assert f"✔ database: {database} does not exist yet; root can create it" in result.output
        assert list(state_dir.iterdir()) == []
        db = open_db(database)
        db.conn.close()
        result = await run_doctor(write_config(tmp_path, state_dir), slack, service_user=None)
    assert result.line("database").startswith(f"✔ database: {database} is writable, schema")
    assert [p.name for p in state_dir.iterdir()] == ["skybot.db"]


async def test_database_the_service_user_cannot_write(
    slurm_up: None, tmp_path: Path, state_dir: Path
) -> None:
    database = state_dir / "skybot.db"
    db = open_db(database)  # root's, 0644: what the old doctor left behind
    db.conn.close()
    async with SlackStandIn() as slack:
        result = await run_doctor(write_config(tmp_path, state_dir), slack)
    line = result.line("database")
    assert result.status == 1
    assert line.startswith(f"✘ database: {database} is not writable by skybot — fix: chown skybot")


async def test_runner_of_another_version(slurm_up: None, tmp_path: Path, state_dir: Path) -> None:
    other = Path(tempfile.mkdtemp(prefix="skybot-doctor-runner-", dir="/tmp"))
    try:
        other.chmod(0o755)
        runner = other / "skybot-runner"
        text = Path(RUNNER).read_text()
        runner.write_text(text.replace(f'\nVERSION = "{__version__}"\n', '\nVERSION = "0.0.1"\n'))
        runner.chmod(0o755)
        async with SlackStandIn() as slack:
            result = await run_doctor(write_config(tmp_path, state_dir, runner=str(runner)), slack)
    finally:
        shutil.rmtree(other)
    assert result.status == 1
    assert result.line("runner version") == (
        f"✘ runner version: the runner is skybot 0.0.1, the bot is {__version__}: /sky submit, "
        "cancel and link would be refused — fix: Run `skybot install runner` as root, with the "
        "skybot that runs the bot."
    )


async def test_slack_unreachable_is_said_in_words_with_the_network_fix(
    slurm_up: None, tmp_path: Path, state_dir: Path
) -> None:
    """Nothing listens at SLACK_API_URL: each Slack check names the host and the OS's reason,
    its fix is the network (not a token), and no slack_sdk log line lands in the checklist."""
    async with SlackStandIn() as slack:
        pass  # closed: its port now refuses connections
    result = await run_doctor(write_config(tmp_path, state_dir), slack)
    host, port = slack.api_url.split("//")[1].split("/")[0].split(":")
    for name, call in (("slack auth", "auth.test"), ("socket mode", "apps.connections.open")):
        line = result.line(name)
        assert line.startswith(
            f"✘ {name}: {call} failed: cannot connect to {host}:{port} (Connection refused) — "
        ), line
        assert "fix: Check that this host reaches the Slack API" in line, line
    marks = ("✔ ", "✘ ", "! ")
    stray = [ln for ln in result.output.splitlines()[:-1] if not ln.startswith(marks)]
    assert not stray, result.output
