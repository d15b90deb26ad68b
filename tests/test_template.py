"""`/sky template`: the pure generator, the command through answer_from_view(), and the checkpoint
skeleton's shell logic run by a real bash (with stand-ins for srun and scontrol)."""

from __future__ import annotations

import html
import os
import signal
import subprocess
from pathlib import Path

import pytest

from bot.config import ConfigError, parse_config
from core.cluster_config import LabConfig
from core.job_template import (
    GpuAsk,
    JobAsk,
    TemplateError,
    TemplateSettings,
    batch_script,
    check_image,
    gpu_types,
    interactive_command,
    parse_gpus,
)
from core.records import Node
from core.slack_text import fenced_code
from handlers.commands import command_table
from handlers.commands.template import code_sections
from handlers.reply import MAX_SECTION_CHARS, MAX_TEXT_CHARS, Reply
from tests.support.asking import answer_from_view, assert_slack_safe, one_liner
from tests.support.cluster import wait_until
from tests.support.factories import LABS, make_snapshot, make_view, node
from tests.support.sample_cluster import NOW, TAKEN_AT, cluster

HOFFMAN, KIRA = LABS
NODES = (
    node("clippy", "a40", cpus=64),
    node("xaea-12", "rtx_6000", cpus=32),
    node("baymax", "2080_ti", cpus=32, total=8),
)
SETTINGS = TemplateSettings()
IMAGE = "nvcr.io_nvidia_pytorch_23.12-py3"


def sbatch_options(script: str) -> dict[str, str]:
    """The #SBATCH options as sbatch reads them: up to the first command line."""
    options: dict[str, str] = {}
    for line in script.splitlines()[1:]:
        if line.startswith("#SBATCH "):
            name, _, value = line.removeprefix("#SBATCH ").partition("=")
            options[name] = value
        elif line.strip() and not line.startswith("#"):
            break
    return options


def ask(text: str, cluster_user: str | None = "alice", **view_fields: object) -> Reply:
    view = cluster(nodes=NODES, **view_fields)
    reply = answer_from_view(
        command_table(),
        view,
        text,
        team_id="T1",
        user_id="U1",
        cluster_user=cluster_user,
        now=NOW,
    )
    assert_slack_safe(reply)
    return reply


def code_of(reply: Reply) -> str:
    """The code the user copies from Slack: the fenced sections, unescaped as Slack shows them."""
    sections = [b["text"]["text"] for b in reply.blocks if b["type"] == "section"]
    parts = [text for text in sections if text.startswith("```")]
    assert parts, reply.blocks
    body = "\n".join(p.removeprefix("```\n").removesuffix("\n```") for p in parts)
    return html.unescape(body) + "\n"


# ----------------------------------------------------------------- the generator


def test_plain_script_follows_the_guide() -> None:
    script = batch_script(JobAsk("alice", HOFFMAN, GpuAsk("a40", 2)), SETTINGS, NODES)
    assert script.startswith("#!/bin/bash\n")
    assert sbatch_options(script) == {
        "--job-name": "my-job",
        "--output": "/srv/hoffman-lab/flash9/alice/%x-%j.out",
        "--error": "/srv/hoffman-lab/flash9/alice/%x-%j.err",
        "--partition": "hoffman-lab",
        "--account": "hoffman-lab",
        "--nodes": "1",
        "--ntasks-per-node": "2",
        "--cpus-per-task": "15",
        "--gpus-per-node": "a40:2",
        "--mem-per-gpu": "15G",
    }
    assert "export PYTHONUNBUFFERED=1\n" in script
    assert "\nsrun -u python -u train.py" in script
    assert "container" not in script and "trap" not in script


def test_cpus_follow_the_type_rule_and_the_config() -> None:
    def cpus(gpus: GpuAsk | None, settings: TemplateSettings = SETTINGS) -> str:
        return sbatch_options(batch_script(JobAsk("carol", KIRA, gpus), settings, NODES))[
            "--cpus-per-task"
        ]

    assert cpus(GpuAsk("a40", 1)) == "15"
    assert cpus(GpuAsk("rtx_6000", 4)) == "7"
    assert cpus(GpuAsk("2080_ti", 1)) == "7"
    assert cpus(GpuAsk(None, 2)) == "7"
    custom = TemplateSettings(cpus_per_task_by_gpu={"rtx_6000": 6}, default_cpus_per_task=4)
    assert cpus(GpuAsk("rtx_6000", 1), custom) == "6"
    assert cpus(GpuAsk("a40", 1), custom) == "4"


def test_cpus_are_cut_to_what_the_largest_node_has() -> None:
    small = (node("clippy", "a40", cpus=32),)
    script = batch_script(JobAsk("alice", HOFFMAN, GpuAsk("a40", 4)), SETTINGS, small)
    assert sbatch_options(script)["--cpus-per-task"] == "8"
    assert "# 15 CPUs per GPU is the rule for a40 nodes." in script
    assert "has 32 CPUs: 8 per GPU" in script
    # Unknown CPU counts (0) never cut anything.
    unknown = (node("clippy", "a40"),)
    script = batch_script(JobAsk("alice", HOFFMAN, GpuAsk("a40", 4)), SETTINGS, unknown)
    assert sbatch_options(script)["--cpus-per-task"] == "15"


def test_default_is_one_gpu_of_any_type_and_says_so() -> None:
    script = batch_script(JobAsk("carol", KIRA), SETTINGS, NODES)
    options = sbatch_options(script)
    assert options["--gpus-per-node"] == "1"
    assert options["--ntasks-per-node"] == "1"
    assert options["--cpus-per-task"] == "7"
    assert options["--partition"] == options["--account"] == "kira-lab"
    assert options["--output"] == "/srv/kira-lab/share4/carol/%x-%j.out"
    assert "# No GPU type was asked for: 1 GPU of any type" in script
    assert "(a40 nodes allow more)" in script


def test_overcap_script_requeues_and_checkpoints_on_signal() -> None:
    ask = JobAsk("alice", HOFFMAN, GpuAsk("rtx_6000", 2), overcap=("overcap", "overcap"))
    settings = TemplateSettings(signal_lead_seconds=300)
    script = batch_script(ask, settings, NODES)
    options = sbatch_options(script)
    assert options["--partition"] == options["--account"] == "overcap"
    assert options["--requeue"] == ""
    assert options["--signal"] == "B:USR1@300"
    assert "trap on_usr1 USR1" in script and "TERM" in script
    assert 'scontrol requeue "$SLURM_JOB_ID"' in script
    assert "srun -u python -u train.py &" in script
    # Logs still go to the lab's storage.
    assert options["--output"].startswith("/srv/hoffman-lab/flash9/alice/")
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_image_puts_the_pyxis_options_on_srun() -> None:
    lab = LabConfig("hoffman-lab", "hoffman-lab", "hoffman-lab", ("/srv/a", "/srv/b"))
    script = batch_script(JobAsk("alice", lab, image=IMAGE), SETTINGS, NODES)
    assert not any("container" in name for name in sbatch_options(script))
    srun = script[script.index("srun -u") :]
    assert f"--container-image=/enroot/{IMAGE}.sqsh \\\n" in srun
    assert "--container-mounts=/srv/a:/srv/a,/srv/b:/srv/b \\\n" in srun
    assert '--container-workdir="$PWD" \\\n' in srun
    assert srun.rstrip().splitlines()[-1].strip().startswith("python -u train.py")
    other_dir = TemplateSettings(image_dir="/images/")
    assert "--container-image=/images/x.sqsh" in batch_script(
        JobAsk("alice", lab, image="x"), other_dir, NODES
    )


def test_every_combination_is_valid_bash_and_fits_one_slack_section() -> None:
    long_root = LabConfig("lab", "lab", "lab", ("/srv/" + "very-long-storage-name/" * 4,))
    for overcap in (None, ("overcap", "overcap")):
        for image in (None, "x" * 200):
            for gpus in (None, GpuAsk("a40", 4)):
                ask = JobAsk("a" * 32, long_root, gpus, image, overcap)
                for text in (
                    batch_script(ask, SETTINGS, NODES),
                    interactive_command(ask, SETTINGS, NODES),
                ):
                    result = subprocess.run(["bash", "-n"], input=text, text=True)
                    assert result.returncode == 0, text
                    assert len(code_sections(text)) == 1, len(text)
                    assert "<" not in text  # nothing Slack could read as a link or mention


def test_lab_without_storage_logs_where_submitted() -> None:
    lab = LabConfig("nolab", "nolab", "nolab")
    script = batch_script(JobAsk("alice", lab), SETTINGS, NODES)
    assert "--output" not in sbatch_options(script)
    assert "logs go where you submit" in script
    assert "\ncd " not in script


def test_interactive_line_is_one_task_with_all_the_cpus() -> None:
    ask = JobAsk("alice", HOFFMAN, GpuAsk("a40", 2), image=IMAGE)
    text = interactive_command(ask, SETTINGS, NODES)
    command = " ".join(
        line.rstrip("\\").strip() for line in text.splitlines() if not line.startswith("#")
    )
    assert command.split() == [
        "srun",
        "--partition=hoffman-lab",
        "--account=hoffman-lab",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=30",
        "--gpus-per-node=a40:2",
        "--mem-per-gpu=15G",
        f"--container-image=/enroot/{IMAGE}.sqsh",
        "--container-mounts=/srv/hoffman-lab/flash9:/srv/hoffman-lab/flash9",
        "--container-workdir=/srv/hoffman-lab/flash9/alice",
        "--pty",
        "bash",
    ]
    overcap = interactive_command(
        JobAsk("carol", KIRA, overcap=("overcap", "overcap")), SETTINGS, NODES
    )
    assert "--partition=overcap --account=overcap" in overcap
    assert "can be ended at any moment" in overcap


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("a40:2", GpuAsk("a40", 2)),
        ("A40:2", GpuAsk("a40", 2)),
        ("rtx_6000", GpuAsk("rtx_6000", 1)),
        ("2080_ti:8", GpuAsk("2080_ti", 8)),
        ("2080_ti", GpuAsk("2080_ti", 1)),
        ("3", GpuAsk(None, 3)),
    ],
)
def test_gpu_specs(spec: str, expected: GpuAsk) -> None:
    assert parse_gpus(spec, NODES) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("h100:1", "There is no GPU type `h100` here. Known types: `2080_ti`, `a40`, `rtx_6000`."),
        ("a40:0", "a40 nodes have at most 4 GPUs: ask for 1 to 4."),
        ("a40:5", "a40 nodes have at most 4 GPUs: ask for 1 to 4."),
        ("2080_ti:9", "2080_ti nodes have at most 8 GPUs: ask for 1 to 8."),
        ("9", "The largest node has at most 8 GPUs"),
        ("a40:two", "is not TYPE:N, TYPE or N"),
        ("a40:-1", "is not TYPE:N, TYPE or N"),
        (":2", "is not TYPE:N, TYPE or N"),
        ("", "is not TYPE:N, TYPE or N"),
        ("<!channel>:1", "There is no GPU type `&lt;!channel&gt;` here."),
    ],
)
def test_bad_gpu_specs(spec: str, message: str) -> None:
    with pytest.raises(TemplateError) as error:
        parse_gpus(spec, NODES)
    assert message in str(error.value)


def test_gpu_types_ignore_untyped_gpus_and_take_the_largest_node() -> None:
    nodes = (node("a", "a40", total=2), node("b", "a40", total=4), node("c", "", total=8))
    assert gpu_types(nodes) == {"a40": 4}
    with pytest.raises(TemplateError, match="sees no GPUs"):
        parse_gpus("1", (Node("cpu-only", "IDLE"),))


def test_image_names() -> None:
    assert check_image(IMAGE) == IMAGE
    assert check_image(f"{IMAGE}.sqsh") == IMAGE
    assert check_image("huggingface+transformers-pytorch-gpu+latest") == (
        "huggingface+transformers-pytorch-gpu+latest"
    )
    for bad in ("/enroot/x", "../x", "x/y", ".hidden", "x;rm -rf", "$(id)", "a b", "", "x" * 201):
        with pytest.raises(TemplateError, match="not an image name"):
            check_image(bad)


# ----------------------------------------------------------------- the command


def test_command_answers_with_a_copyable_code_block() -> None:
    reply = ask("template --gpus a40:2")
    assert not reply.in_channel
    intro, block = reply.blocks[0]["text"]["text"], reply.blocks[1]["text"]["text"]
    assert "`/sky submit /srv/hoffman-lab/flash9/alice/job.sh`" in intro
    assert block.startswith("```\n#!/bin/bash\n") and block.endswith("\n```")
    script = code_of(reply)
    assert script == batch_script(JobAsk("alice", HOFFMAN, GpuAsk("a40", 2)), SETTINGS, NODES)
    # The fallback text carries the same script, escaped as in the block (Slack shows & < >).
    assert f"```\n{fenced_code(script).rstrip()}\n```" in reply.text
    assert len(reply.text) <= MAX_TEXT_CHARS


def test_command_every_flag_together() -> None:
    reply = ask(f"template --gpus=rtx_6000:3 --overcap --image {IMAGE}.sqsh")
    script = code_of(reply)
    options = sbatch_options(script)
    assert options["--partition"] == "overcap" and options["--gpus-per-node"] == "rtx_6000:3"
    assert f"--container-image=/enroot/{IMAGE}.sqsh" in script
    assert "&gt;" in reply.blocks[1]["text"]["text"]  # `2>/dev/null`, escaped for Slack
    assert len(reply.text) <= MAX_TEXT_CHARS


def test_command_overcap_uses_the_views_overcap_names() -> None:
    view = cluster(nodes=NODES)
    view.overcap_partition, view.overcap_account = "preempt", "preempt-acct"
    reply = answer_from_view(command_table(), view, "template --overcap", team_id="T", user_id="U",
                     cluster_user="carol", now=NOW)  # fmt: skip
    options = sbatch_options(code_of(reply))
    assert (options["--partition"], options["--account"]) == ("preempt", "preempt-acct")


def test_command_interactive() -> None:
    reply = ask("template --interactive --gpus a40:1", cluster_user="carol")
    assert "interactive shell" in reply.blocks[0]["text"]["text"]
    code = code_of(reply)
    assert "--partition=kira-lab --account=kira-lab" in code
    assert code.rstrip().endswith("--pty bash")
    assert "#SBATCH" not in code


def test_command_uses_the_configured_settings() -> None:
    settings = parse_config(
        {"template": {"mem_per_gpu": "40G", "cpus_per_task_by_gpu": {"a40": 12}}}
    ).template
    reply = answer_from_view(command_table(settings), cluster(nodes=NODES), "template --gpus a40:1",
                     team_id="T", user_id="U", cluster_user="alice", now=NOW)  # fmt: skip
    options = sbatch_options(code_of(reply))
    assert options["--mem-per-gpu"] == "40G" and options["--cpus-per-task"] == "12"


def test_command_several_labs_picks_one_and_says_how_to_pick() -> None:
    members = {"hoffman-lab": frozenset({"alice"}), "kira-lab": frozenset({"alice"})}
    reply = ask("template", members=members)
    assert sbatch_options(code_of(reply))["--account"] == "hoffman-lab"
    assert "several labs" in reply.text and "`--lab` `kira-lab`" in reply.text
    assert reply.blocks[-1]["type"] == "context"
    reply = ask("template --lab KIRA-LAB", members=members)
    assert sbatch_options(code_of(reply))["--account"] == "kira-lab"
    assert "several labs" not in reply.text


@pytest.mark.parametrize(
    ("text", "user", "expected"),
    [
        ("template", None, "link it with `/sky link YOUR_CLUSTER_USER`"),
        ("template", "zed", "skybot finds no lab for `zed`"),
        ("template --gpus h100:2", "alice", "no GPU type `h100` here. Known types: `2080_ti`"),
        ("template --gpus a40:0", "alice", "a40 nodes have at most 4 GPUs"),
        ("template --gpus a40:99", "alice", "a40 nodes have at most 4 GPUs"),
        ("template --gpus a40:x", "alice", "is not TYPE:N, TYPE or N"),
        ("template --image ../etc/passwd", "alice", "is not an image name"),
        ("template --image a/b.sqsh", "alice", "is not an image name"),
        ("template --bogus", "alice", "`--bogus` is not a template option. Usage:"),
        ("template extra", "alice", "`extra` is not a template option"),
        ("template --gpus", "alice", "`--gpus` needs a value"),
        ("template --gpus --overcap", "alice", "`--gpus` needs a value"),
        ("template --gpus 1 --gpus 2", "alice", "`--gpus` is given twice"),
        ("template --overcap=yes", "alice", "is not a template option"),
        ("template --lab kira-lab", "alice", "`alice` is not in `kira-lab`'s Slurm account"),
        ("template --lab nolab", "alice", "I don't know a lab called `nolab`"),
    ],
)
def test_command_errors_are_one_clear_line(text: str, user: str | None, expected: str) -> None:
    line = one_liner(ask(text, cluster_user=user))
    assert expected in line


def test_command_before_slurm_was_read_says_so() -> None:
    view = make_view(make_snapshot(None))
    reply = answer_from_view(command_table(), view, "template", team_id="T", user_id="U",
                     cluster_user="alice", now=TAKEN_AT)  # fmt: skip
    assert "has not heard from Slurm yet" in one_liner(reply)


def test_code_longer_than_a_section_is_cut_between_lines() -> None:
    code = "".join(f"echo {i:03d} {'x' * 60} > /dev/null\n" for i in range(100))
    blocks = code_sections(code)
    assert len(blocks) == 3
    texts = [b["text"]["text"] for b in blocks]
    assert all(len(t) <= MAX_SECTION_CHARS for t in texts)
    assert all(t.startswith("```\n") and t.endswith("\n```") for t in texts)
    body = "\n".join(t.removeprefix("```\n").removesuffix("\n```") for t in texts)
    assert html.unescape(body) + "\n" == code


def test_help_explains_template() -> None:
    text = ask("help template").text
    assert "`/sky template [--gpus TYPE:N]" in text and "checkpoint-on-signal" in text


# ----------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"cpus_per_task_by_gpu": {"a40": "15"}}, "must be a table of whole numbers"),
        ({"cpus_per_task_by_gpu": {"a40": 0}}, "to at least 1 CPU"),
        ({"default_cpus_per_task": 0}, "template.default_cpus_per_task must be at least 1"),
        ({"mem_per_gpu": "16 GB"}, 'template.mem_per_gpu must be like "16G"'),
        ({"signal_lead_seconds": 70000}, "template.signal_lead_seconds must be at most 65535"),
        ({"image_dir": "enroot"}, "template.image_dir"),
        ({"job_name": "my job"}, "template.job_name"),
        ({"cpu_per_task": 7}, "unknown config key: template.cpu_per_task"),
    ],
)
def test_bad_template_config_names_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config({"template": table})
    assert message in str(error.value)


# ----------------------------------------------------------------- the checkpoint skeleton


def _run_skeleton(tmp_path: Path, send: signal.Signals) -> tuple[int, list[str]]:
    """Run the overcap script under bash with stand-in srun/scontrol; send it `send`.

    The stand-in program saves a "checkpoint" half a second after USR1 or TERM, so the test
    sees whether the script waits for it instead of exiting at once.
    """
    log = tmp_path / "log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(
        "#!/bin/bash\n"
        f'save() {{ echo "got $1" >> {log}; sleep 0.5; echo saved >> {log}; exit 3; }}\n'
        "trap 'save USR1' USR1\ntrap 'save TERM' TERM\n"
        f"echo started >> {log}\n"
        "while :; do sleep 0.05; done\n"
    )
    (bin_dir / "scontrol").write_text(f'#!/bin/bash\necho "scontrol $*" >> {log}\n')
    for stand_in in bin_dir.iterdir():
        stand_in.chmod(0o755)
    lab = LabConfig("lab", "lab", "lab", (str(tmp_path),))
    (tmp_path / "alice").mkdir()
    script = tmp_path / "job.sh"
    script.write_text(batch_script(JobAsk("alice", lab, overcap=("o", "o")), SETTINGS, NODES))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "42"}
    # Its own session, so whatever happens nothing it started outlives the test.
    shell = subprocess.Popen(["bash", str(script)], env=env, start_new_session=True)
    try:
        # Slurm's USR1 comes minutes into a job, never before the script reached `wait`.
        wait_until(
            lambda: log.exists() and "started" in log.read_text() and _in_wait(shell.pid),
            10,
            "the script to wait for srun",
            0.05,
        )
        shell.send_signal(send)
        if send == signal.SIGTERM:
            # On preemption Slurm signals every process of the job, not only the batch shell.
            children = subprocess.run(["pgrep", "-P", str(shell.pid)], capture_output=True,
                                      text=True).stdout.split()  # fmt: skip
            for pid in children:
                os.kill(int(pid), signal.SIGTERM)
        status = shell.wait(timeout=10)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
    return status, log.read_text().splitlines()


def _in_wait(pid: int) -> bool:
    """Whether the process is blocked waiting for a child (bash's `wait`)."""
    return Path(f"/proc/{pid}/wchan").read_text() == "do_wait"


def test_skeleton_usr1_checkpoints_waits_then_requeues(tmp_path: Path) -> None:
    status, log = _run_skeleton(tmp_path, signal.SIGUSR1)
    assert log == ["started", "got USR1", "saved", "scontrol requeue 42"]
    assert status == 3  # the program's own exit status


def test_skeleton_term_waits_for_the_checkpoint_without_requeueing(tmp_path: Path) -> None:
    status, log = _run_skeleton(tmp_path, signal.SIGTERM)
    assert log == ["started", "got TERM", "saved"]
    assert status == 3


def test_template_images_come_from_the_directory_images_lists() -> None:
    assert parse_config({"images": {"dir": "/data/enroot"}}).template.image_dir == "/data/enroot"
    assert parse_config({}).template.image_dir == "/enroot"
