"""The product is the wheel, not the checkout: build it, install it into a fresh venv made with
the system python3 (as the README's install guide does), and run `skybot console` and
`skybot run` from that venv against the real test cluster and the Slack stand-in.

Everything runs from a directory outside the repository and without PYTHONPATH, so no module
of the checkout can stand in for one the wheel left out (as `handlers.commands` once was).
The wheel is built from a copy of the source tree, so a stale `build/` directory in the
checkout cannot smuggle files into it either.
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import wheels
from tests.support.bot_process import start_bot
from tests.support.cluster import sbatch, squeue_state, wait_for, wait_until
from tests.support.slack_standin import SlackStandIn
from tests.support.wheels import REPO, run

pytestmark = [
    pytest.mark.cluster,
    # The first test builds the wheel and installs its dependencies from the index.
    pytest.mark.timeout(1800),
    # The wheel is built and installed with the package index; the 24.11 lane's sandbox has
    # no network. The wheel is the same for either Slurm: it is proven on the host's cluster.
    pytest.mark.skipif(
        "SKYBOT_TESTCLUSTER" in os.environ,
        reason="inside the Slurm 24.11 sandbox: no package index to install the wheel from",
    ),
]


@dataclass(frozen=True)
class Installed:
    skybot: Path
    wheel: Path
    outside: Path  # a working directory outside the repository
    environment: dict[str, str]


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The wheel built from this checkout, installed with its dependencies from the index
    (tests/support/wheels.py: started in the background when the session began)."""
    venv = wheels.checkout_venv()
    outside = tmp_path_factory.mktemp("wheel-install")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    yield Installed(venv / "bin" / "skybot", wheels.checkout_wheel(), outside, environment)


@pytest.fixture
def running_job(clean_queue: None) -> int:
    """alice holds 2 of hoffman-lab's GPUs, running before the bot's first poll."""
    job = sbatch(
        "alice", "-p", "hoffman-lab", "-A", "hoffman-lab", "--gpus-per-node=a40:2",
        "--chdir=/tmp", "--wrap", "sleep 300",
    )  # fmt: skip
    wait_until(lambda: squeue_state(job) == "RUNNING", 30, "alice's job to run")
    return job


def write_config(directory: Path) -> Path:
    config = directory / "skybot.toml"
    config.write_text(
        f'[database]\npath = "{directory}/skybot.db"\n'
        '[slack]\nmode = "socket"\n'
        '[[labs]]\nname = "hoffman-lab"\npartition = "hoffman-lab"\naccount = "hoffman-lab"\n'
        'storage_roots = ["/srv/hoffman-lab/flash9"]\n'
    )
    return config


def test_the_wheel_holds_every_package_and_the_install_files(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    packages = [
        init.parent.relative_to(REPO).as_posix()
        for top in ("bot", "handlers", "scheduler", "store", "core")
        for init in (REPO / top).rglob("__init__.py")
    ]
    assert "handlers/commands" in packages
    missing = [p for p in packages if f"{p}/__init__.py" not in names]
    assert not missing, f"the wheel lacks {missing}"
    shipped = {p.name for p in (REPO / "bot" / "install_files").iterdir()}
    assert {n.removeprefix("bot/install_files/") for n in names if "install_files/" in n} == shipped
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "deploy/"))]


def test_console_from_the_installed_wheel_answers_from_the_cluster(
    installed: Installed, running_job: int, tmp_path: Path
) -> None:
    result = subprocess.run(
        [str(installed.skybot), "console", "--config", str(write_config(tmp_path))],
        input="/sky gpus hoffman-lab\n",
        cwd=installed.outside,
        env=installed.environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "*`hoffman-lab`*: 2/4 GPUs in use (2 free under the cap)" in result.stdout
    assert "Traceback" not in result.stderr


async def test_run_from_the_installed_wheel_answers_over_slack(
    installed: Installed, running_job: int, tmp_path: Path
) -> None:
    log_path = tmp_path / "skybot.log"
    async with SlackStandIn() as slack:
        with log_path.open("wb") as log:
            bot = start_bot(
                write_config(tmp_path),
                slack,
                [str(installed.skybot)],
                cwd=installed.outside,
                environment=installed.environment,
                log=log,
            )
            try:
                await slack.wait_for_socket_connection(timeout=60)
                # The bot may connect before its first Slurm poll is stored.

                async def answered() -> str | None:
                    delivery = await slack.send_slash_command(
                        command="/sky", text="gpus hoffman-lab", user_id="UALICE", timeout=20
                    )
                    text = str((delivery.payload or {}).get("text"))
                    return None if "has not heard from Slurm yet" in text else text

                text = await wait_for(answered, 60, "an answer from Slurm's data", 0.5)
            except (TimeoutError, AssertionError):
                pytest.fail(f"the installed skybot did not answer:\n{log_path.read_text()}")
            finally:
                bot.terminate()
                bot.wait(30)
    assert "*`hoffman-lab`*: 2/4 GPUs in use (2 free under the cap)" in text, log_path.read_text()


def test_install_and_doctor_work_from_the_installed_wheel(
    installed: Installed, tmp_path: Path
) -> None:
    """No checkout needed: `skybot install` takes every file from the installed package (here
    below a staging root, so this machine's /etc stays as it is), and the doctor's package
    check finds every module in the venv."""
    staging = tmp_path / "staging"
    result = subprocess.run(
        [str(installed.skybot), "install", "--root", str(staging)],
        cwd=installed.outside,
        env=installed.environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        "runner", "sudoers", "config", "unit",
    ]  # fmt: skip
    version = subprocess.run(
        [str(installed.skybot), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    assert installed.wheel.name == f"skybot-{version}-py3-none-any.whl"
    runner = (staging / "usr/local/libexec/skybot-runner").read_text()
    assert runner.startswith("#!/usr/bin/python3 -IS\n") and f'\nVERSION = "{version}"\n' in runner
    unit = (staging / "etc/systemd/system/skybot.service").read_text()
    assert f"\nExecStart={installed.skybot} run --config /etc/skybot/skybot.toml\n" in unit
    assert (staging / "etc/sudoers.d/skybot").read_text() == (
        REPO / "bot/install_files/skybot.sudoers"
    ).read_text()

    python = installed.skybot.parent / "python3"
    check = (
        "from bot.doctor.checklist import format_check\n"
        "from bot.doctor.package import check_package\n"
        "print(format_check(check_package()))"
    )
    result = subprocess.run(
        [str(python), "-c", check],
        cwd=installed.outside,
        env=installed.environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    site = installed.skybot.parent.parent / "lib"
    assert result.stdout.startswith(f"✔ package: skybot {version}: all "), result.stdout
    assert f"modules import from {site}/python3" in result.stdout, result.stdout


def test_doctor_names_a_distribution_that_overwrote_a_skybot_file(
    installed: Installed, tmp_path: Path
) -> None:
    """A real pip install of another distribution that ships `core/__init__.py` overwrites
    skybot's without a word; the doctor's RECORD check names it and the fix."""
    project = tmp_path / "dummy"
    (project / "core").mkdir(parents=True)
    (project / "core" / "__init__.py").write_text("# dummy-core's, not skybot's\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "dummy-core"\nversion = "1.0"\n'
        '[tool.setuptools]\npackages = ["core"]\n'
    )
    run(["python3", "-m", "pip", "wheel", "--no-deps", "-w", "dist", "."],
        project)  # fmt: skip
    (dummy,) = (project / "dist").glob("dummy_core-*.whl")
    pip = str(installed.skybot.parent / "pip")
    run([pip, "install", "--quiet", "--no-deps", str(dummy)], tmp_path)
    check = (
        "from bot.doctor.checklist import format_check\n"
        "from bot.doctor.installed_files import check_installed_files\n"
        "print(format_check(check_installed_files()))"
    )
    try:
        output = run([str(installed.skybot.parent / "python3"), "-c", check], installed.outside)
    finally:
        run([pip, "uninstall", "--quiet", "--yes", "dummy-core"], tmp_path)
        run([pip, "install", "--quiet", "--no-deps", "--force-reinstall", str(installed.wheel)],
            tmp_path)  # fmt: skip
    assert output.startswith(
        "✘ files: 1 file(s) differ from the wheel: core/__init__.py, and other distributions "
        "install into skybot's packages: dummy-core (core/__init__.py) — fix: Install skybot "
        "into a venv of its own"
    ), output
