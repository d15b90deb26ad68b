"""Ready-to-use sbatch scripts and srun lines for `/sky template`.

The user guide's advice (one task per GPU, CPUs per task by GPU type, logs in lab storage,
unbuffered output, overcap's partition/account plus checkpoint-on-signal, pyxis options on
srun) written out for one user and lab. Pure: no Slack, no Slurm calls; the checks of what a
user typed live here too, so the command module only parses words and formats the reply.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated

import msgspec

from core.cluster_config import LabConfig
from core.notice_text import plural
from core.records import Node
from core.slack_text import literal

# The guide's rule: 15 CPUs per task on A40 nodes, 7 on every other kind.
DEFAULT_CPUS_BY_GPU = {"a40": 15}
# Enroot image files as the container guide names them (nvcr.io_nvidia_pytorch_23.12-py3,
# huggingface+transformers-pytorch-gpu+latest): no path, nothing the shell would interpret.
_IMAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")
_COUNT = re.compile(r"[0-9]{1,6}")
# Placeholder the user replaces; a real file name so the script is valid shell as printed.
PROGRAM = "train.py"
# Under the runner's --export=NONE, srun's tasks would get none of the script's set-up.
_UNSET_EXPORT = "unset SLURM_EXPORT_ENV  # srun's tasks get the environment set above"


class TemplateError(ValueError):
    """What the user asked for cannot become a job on this cluster; the message says why."""


# sbatch sizes: a number with an optional K/M/G/T unit (what --mem-per-gpu accepts).
_MEMORY = re.compile(r"[1-9][0-9]*[KMGT]?")
# Written into #SBATCH lines and shell words as they are: nothing sbatch or bash would parse.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9_.+/-]*")


def is_plain_path(path: str) -> bool:
    """An absolute path a script can carry as it is: no character sbatch or bash would parse."""
    return _PLAIN_PATH.fullmatch(path) is not None


class TemplateSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The `[template]` config section: this cluster's rules for what a job should ask for.

    A msgspec Struct, so core/config_schema.py reads it from the file as it is; its rules are
    checked whenever one is made, and each message starts with the key it is about.
    """

    # CPUs per task (one task per GPU) by GPU type; other types get default_cpus_per_task.
    cpus_per_task_by_gpu: dict[str, int] = msgspec.field(
        default_factory=lambda: dict(DEFAULT_CPUS_BY_GPU)
    )
    default_cpus_per_task: Annotated[int, msgspec.Meta(ge=1)] = 7
    # Host memory per GPU (sbatch --mem-per-gpu): GPUs per node times this must fit a node.
    mem_per_gpu: str = "15G"
    # overcap jobs get USR1 this long before their time limit: time to write a checkpoint.
    # sbatch --signal takes at most 65535 seconds.
    signal_lead_seconds: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 120
    # Where the squashfs images for pyxis live (`--image NAME` is IMAGE_DIR/NAME.sqsh); the
    # config sets it from images.dir, the directory `/sky images` lists.
    image_dir: str = "/enroot"
    job_name: str = "my-job"

    def __post_init__(self) -> None:
        for gpu_type, cpus in self.cpus_per_task_by_gpu.items():
            if not _PLAIN_NAME.fullmatch(gpu_type) or cpus < 1:
                raise ValueError(
                    f"cpus_per_task_by_gpu: {gpu_type!r} = {cpus!r} must map a GPU type "
                    "to at least 1 CPU"
                )
        if not _MEMORY.fullmatch(self.mem_per_gpu):
            raise ValueError(f'mem_per_gpu must be like "16G", not {self.mem_per_gpu!r}')
        if not is_plain_path(self.image_dir):
            raise ValueError(f"image_dir: {self.image_dir!r} must be a plain absolute path")
        if not _PLAIN_NAME.fullmatch(self.job_name):
            raise ValueError(f"job_name: {self.job_name!r} must be one plain word")

    def cpus_for(self, gpu_type: str | None) -> int:
        if gpu_type is None:
            return self.default_cpus_per_task
        return self.cpus_per_task_by_gpu.get(gpu_type, self.default_cpus_per_task)


@dataclass(frozen=True, slots=True)
class GpuAsk:
    """GPUs on one node; gpu_type None means any type."""

    gpu_type: str | None
    count: int

    def gres(self) -> str:
        return f"{self.gpu_type}:{self.count}" if self.gpu_type else str(self.count)


@dataclass(frozen=True, slots=True)
class JobAsk:
    """Everything a template depends on besides the settings and the nodes."""

    user: str
    lab: LabConfig
    # None: the default, one GPU of any type.
    gpus: GpuAsk | None = None
    image: str | None = None
    # (partition, account) of the preemptible partition, when the job goes there.
    overcap: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class JobStep:
    """What the job form (core/job_form.py) adds to a template: the command srun runs in
    place of the placeholder, the time limit as `--time` takes it, and the directory the job
    is submitted from (where it runs)."""

    command: str
    time: str
    workdir: str


# ---------------------------------------------------------------- checking what was typed


def gpu_types(nodes: Iterable[Node]) -> dict[str, int]:
    """GPU type -> the most GPUs of that type on one node (GPUs of no stated type left out)."""
    most: dict[str, int] = {}
    for node in nodes:
        for gpu_type, count in node.gpus_total.items():
            if gpu_type and count > most.get(gpu_type, 0):
                most[gpu_type] = count
    return dict(sorted(most.items()))


def parse_gpus(spec: str, nodes: Iterable[Node]) -> GpuAsk:
    """`a40:2`, `a40` (one) or `2` (any type), checked against the GPUs the nodes have."""
    nodes = tuple(nodes)
    name, colon, count_text = spec.strip().rpartition(":")
    if not colon:
        name, count_text = ("", count_text) if count_text.isdigit() else (count_text, "1")
    if not _COUNT.fullmatch(count_text) or (colon and not name) or not spec.strip():
        raise TemplateError(
            f"{_clip('--gpus ' + spec)} is not TYPE:N, TYPE or N (e.g. `--gpus a40:2`)."
        )
    count = int(count_text)
    known = gpu_types(nodes)
    gpu_type = None
    if name:
        gpu_type = next((t for t in known if t.casefold() == name.casefold()), None)
        if gpu_type is None:
            listed = ", ".join(literal(t) for t in known) or "none (skybot sees no GPUs)"
            raise TemplateError(f"There is no GPU type {_clip(name)} here. Known types: {listed}.")
        most = known[gpu_type]
        where = f"{gpu_type} nodes have"
    else:
        most = max((sum(n.gpus_total.values()) for n in nodes), default=0)
        where = "The largest node has"
    if most < 1:
        raise TemplateError("skybot sees no GPUs on any node, so it cannot write a GPU job.")
    if not 1 <= count <= most:
        raise TemplateError(
            f"{where} at most {plural(most, 'GPU')}: ask for 1 to {most}. "
            "This template is for one node; more GPUs need a multi-node job."
        )
    return GpuAsk(gpu_type, count)


def check_image(name: str) -> str:
    """An image name as IMAGE_DIR/NAME.sqsh (".sqsh" may be typed), or TemplateError."""
    bare = name.removesuffix(".sqsh")
    if not _IMAGE_NAME.fullmatch(bare):
        raise TemplateError(
            f"{_clip(name)} is not an image name: give the file name in the image directory "
            "without its path, e.g. `--image nvcr.io_nvidia_pytorch_23.12-py3` "
            "(letters, digits and `. _ + -` only)."
        )
    return bare


def _clip(word: str, limit: int = 40) -> str:
    """A word the user typed, echoed as an inert literal."""
    return literal(word, limit)


# ---------------------------------------------------------------- resources


@dataclass(frozen=True, slots=True)
class _Resources:
    partition: str
    account: str
    gpus: GpuAsk
    cpus_per_task: int
    mem_per_gpu: str
    # Comment lines explaining the GPU and CPU numbers.
    why: tuple[str, ...]


def _resources(ask: JobAsk, settings: TemplateSettings, nodes: Iterable[Node]) -> _Resources:
    gpus = ask.gpus or GpuAsk(None, 1)
    partition, account = ask.overcap or (ask.lab.partition, ask.lab.account)
    rule = settings.cpus_for(gpus.gpu_type)
    why: list[str] = []
    if ask.gpus is None:
        why.append(
            "No GPU type was asked for: 1 GPU of any type (/sky template --gpus TYPE:N picks one)."
        )
    if gpus.gpu_type is None:
        others = sorted(t for t, c in settings.cpus_per_task_by_gpu.items() if c != rule)
        but = f" ({', '.join(others)} nodes allow more)" if others else ""
        why.append(f"{rule} CPUs per GPU is the rule for nodes of any GPU type{but}.")
    else:
        why.append(f"{rule} CPUs per GPU is the rule for {gpus.gpu_type} nodes.")
    cpus = rule
    room = _most_cpus(nodes, gpus)
    if room and rule * gpus.count > room:
        cpus = max(1, room // gpus.count)
        why.append(f"The largest node with {gpus.count} such GPUs has {room} CPUs: {cpus} per GPU.")
    return _Resources(partition, account, gpus, cpus, settings.mem_per_gpu, tuple(why))


def _most_cpus(nodes: Iterable[Node], gpus: GpuAsk) -> int:
    """CPUs of the largest node that holds the GPUs asked for (0: unknown)."""

    def holds(node: Node) -> bool:
        if gpus.gpu_type is None:
            return sum(node.gpus_total.values()) >= gpus.count
        return node.gpus_total.get(gpus.gpu_type, 0) >= gpus.count

    return max((node.cpus for node in nodes if holds(node)), default=0)


def _user_dir(ask: JobAsk) -> str | None:
    roots = ask.lab.storage_roots
    return f"{roots[0].rstrip('/')}/{ask.user}" if roots else None


def _container_options(ask: JobAsk, settings: TemplateSettings, workdir: str) -> list[str]:
    if ask.image is None:
        return []
    image = f"{settings.image_dir.rstrip('/')}/{ask.image}.sqsh"
    options = [f"--container-image={shlex.quote(image)}"]
    mounts = ",".join(f"{root}:{root}" for root in ask.lab.storage_roots)
    if mounts:
        options.append(f"--container-mounts={shlex.quote(mounts)}")
    options.append(f"--container-workdir={workdir}")
    return options


def _describe(ask: JobAsk, res: _Resources) -> str:
    gpus = res.gpus
    if gpus.gpu_type:
        kind = f"{gpus.count} x {gpus.gpu_type}"
    else:
        kind = f"{plural(gpus.count, 'GPU')} of any type"
    where = "overcap (preemptible)" if ask.overcap else res.partition
    return f"{ask.user} in {ask.lab.name}, {kind} on {where}"


# ---------------------------------------------------------------- the batch script


def batch_script(
    ask: JobAsk, settings: TemplateSettings, nodes: Iterable[Node], step: JobStep | None = None
) -> str:
    """The template; with `step`, the job form's script: its command, time and directory."""
    res = _resources(ask, settings, nodes)
    user_dir = _user_dir(ask)
    origin = "script from skybot's job form" if step else "template from skybot"
    lines = [
        "#!/bin/bash",
        f"# sbatch {origin}: {_describe(ask, res)}.",
        f"#SBATCH --job-name={settings.job_name}",
    ]
    if user_dir:
        lines += [
            "# Logs go to your directory in the lab storage, not home (Slurm will not create it).",
            f"#SBATCH --output={user_dir}/%x-%j.out",
            f"#SBATCH --error={user_dir}/%x-%j.err",
        ]
    else:
        lines.append(f"# skybot knows no storage for {ask.lab.name}: logs go where you submit.")
    lines += [
        f"#SBATCH --partition={res.partition}",
        f"#SBATCH --account={res.account}",
        "#SBATCH --nodes=1",
        "# One task per GPU: srun starts one copy of your program per task.",
        f"#SBATCH --ntasks-per-node={res.gpus.count}",
        *(f"# {line}" for line in res.why),
        f"#SBATCH --cpus-per-task={res.cpus_per_task}",
        f"#SBATCH --gpus-per-node={res.gpus.gres()}",
        f"#SBATCH --mem-per-gpu={res.mem_per_gpu}",
        *([f"#SBATCH --time={step.time}"] if step else []),
    ]
    if ask.overcap:
        lines += [
            "# overcap jobs are preempted when a lab needs its GPUs: come back requeued, and get",
            f"# USR1 {settings.signal_lead_seconds} s before the time limit to save a checkpoint.",
            "#SBATCH --requeue",
            f"#SBATCH --signal=B:USR1@{settings.signal_lead_seconds}",
        ]
    lines += [
        "",
        "export PYTHONUNBUFFERED=1",
        "# Set up your environment here, e.g. source ~/.bashrc && conda activate myenv",
    ]
    if step:
        lines.append(f"# skybot submits it from {step.workdir}, where it runs.")
    elif user_dir:
        lines.append(f"cd {shlex.quote(user_dir)}  # your code's directory")
    lines += _step_lines(ask, settings, step.command if step else None)
    return "\n".join(lines) + "\n"


def _step_lines(ask: JobAsk, settings: TemplateSettings, command: str | None) -> list[str]:
    containers = _container_options(ask, settings, '"$PWD"')
    lines = [_UNSET_EXPORT]
    if containers:
        lines.append("# pyxis options belong to srun (sbatch does not know them).")
    background = " &" if ask.overcap else ""
    example = f"python -u {PROGRAM}{background}  # replace {PROGRAM} with your script and args"
    program = example if command is None else f"{command}{background}"
    if containers:
        lines += ["srun -u \\", *(f"    {option} \\" for option in containers), f"    {program}"]
    else:
        lines.append(f"srun -u {program}")
    if not ask.overcap:
        return lines
    # The trap must be set before srun starts, so it goes in front of the srun line(s).
    return [*_checkpoint_preamble(settings), *lines, *_checkpoint_wait()]


def _checkpoint_preamble(settings: TemplateSettings) -> list[str]:
    return [
        "# Checkpoint on signal: USR1 comes "
        f"{settings.signal_lead_seconds} s before the time limit (--signal above),",
        "# TERM when a lab job preempts this one. Your program must save a checkpoint on",
        "# SIGUSR1 and SIGTERM, and resume from its latest checkpoint whenever it starts.",
        "on_usr1() {",
        '    echo "USR1: time limit near, checkpointing, then requeueing"',
        '    kill -USR1 "$step"  # srun passes the signal on to every task',
        "    requeue=1",
        "}",
        "trap on_usr1 USR1",
        "# Untrapped, TERM would end the shell, and the step, before it saves.",
        "trap 'echo \"TERM: preempted, letting the program checkpoint\"' TERM",
    ]


def _checkpoint_wait() -> list[str]:
    return [
        "step=$!",
        "# A trapped signal interrupts wait: wait until the program has ended.",
        'wait "$step"',
        "status=$?",
        'while kill -0 "$step" 2>/dev/null; do',
        '    wait "$step"',
        "    status=$?",
        "done",
        'if [ -n "${requeue:-}" ]; then',
        '    scontrol requeue "$SLURM_JOB_ID"',
        "fi",
        'exit "$status"',
    ]


# ---------------------------------------------------------------- the interactive line


def interactive_command(ask: JobAsk, settings: TemplateSettings, nodes: Iterable[Node]) -> str:
    """An `srun … --pty bash` line: one task holding all the GPUs, with all their CPUs."""
    res = _resources(ask, settings, nodes)
    user_dir = _user_dir(ask)
    total_cpus = res.cpus_per_task * res.gpus.count
    comments = [f"# Interactive shell from skybot: {_describe(ask, res)}."]
    comments += [f"# {line}" for line in res.why]
    comments.append(
        f"# One task holds every GPU, so it gets {total_cpus} CPUs "
        f"({res.cpus_per_task} per GPU x {res.gpus.count})."
    )
    if ask.overcap:
        comments.append(
            "# overcap: this shell can be ended at any moment when a lab needs the GPUs."
        )
    options = [
        f"--partition={shlex.quote(res.partition)} --account={shlex.quote(res.account)}",
        f"--nodes=1 --ntasks=1 --cpus-per-task={total_cpus}",
        f"--gpus-per-node={res.gpus.gres()} --mem-per-gpu={res.mem_per_gpu}",
        *_container_options(ask, settings, shlex.quote(user_dir) if user_dir else '"$PWD"'),
        "--pty bash",
    ]
    body = " \\\n    ".join(["srun", *options])
    return "\n".join([*comments, body]) + "\n"
