"""`/sky template [--gpus TYPE:N] [--image NAME] [--overcap] [--interactive] [--lab LAB]`.

A ready sbatch script (or srun line) for the asker's own lab and account, as a code block to
copy. The text comes from core.job_template; this module reads the words and lays out the reply.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.blocks import FENCE as _FENCE
from core.blocks import code_sections as code_sections
from core.cluster_config import LabConfig
from core.job_template import (
    PROGRAM,
    JobAsk,
    TemplateError,
    TemplateSettings,
    batch_script,
    check_image,
    interactive_command,
    parse_gpus,
)
from core.slack_text import fenced_code
from core.view import ClusterView
from handlers.commands.common import find_lab, lab_names, literal, require_data, shown
from handlers.reply import Block, Reply, context, section
from handlers.router import Command, CommandRequest, UsageError

USAGE = "template [--gpus TYPE:N] [--image NAME] [--overcap] [--interactive] [--lab LAB]"
_VALUED = ("--gpus", "--image", "--lab")
_FLAGS = ("--overcap", "--interactive")


@dataclass(frozen=True, slots=True)
class _Options:
    gpus: str | None = None
    image: str | None = None
    lab: str | None = None
    overcap: bool = False
    interactive: bool = False


def parse_options(args: tuple[str, ...]) -> _Options:
    values: dict[str, str] = {}
    flags: set[str] = set()
    rest = list(args)
    while rest:
        word = rest.pop(0)
        name, has_value, value = word.partition("=")
        if name in _FLAGS and not has_value:
            flags.add(name)
            continue
        if name not in _VALUED:
            raise UsageError(f"{shown(word)} is not a template option. Usage: `/sky {USAGE}`")
        if name in values:
            raise UsageError(f"`{name}` is given twice: give it once.")
        if not has_value:
            if not rest or rest[0].startswith("--"):
                raise UsageError(f"`{name}` needs a value. Usage: `/sky {USAGE}`")
            value = rest.pop(0)
        values[name] = value
    return _Options(
        gpus=values.get("--gpus"),
        image=values.get("--image"),
        lab=values.get("--lab"),
        overcap="--overcap" in flags,
        interactive="--interactive" in flags,
    )


def _choose_lab(user: str, view: ClusterView, wanted: str | None) -> tuple[LabConfig, list[str]]:
    """The lab the template is for, and a note when the user could have meant another."""
    labs = view.labs_of_user(user)
    if wanted is not None:
        lab = find_lab(view, wanted)
        if lab not in labs:
            mine = ", ".join(f"{literal(x.name)}" for x in labs) or "none that skybot knows of"
            raise UsageError(
                f"{literal(user)} is not in {literal(lab.name)}'s Slurm account, so Slurm "
                f"would refuse the job. Your labs: {mine}."
            )
        return lab, []
    if not labs:
        raise UsageError(
            f"skybot finds no lab for {literal(user)}: no lab account ({lab_names(view)}) lists "
            "you. Ask your lab's admin to add you to its Slurm account."
        )
    others = [x.name for x in labs[1:]]
    if not others:
        return labs[0], []
    names = ", ".join(f"{literal(x)}" for x in others)
    note = (
        f"You are in several labs: this is for *{literal(labs[0].name)}*; "
        f"`--lab` {names} for another."
    )
    return labs[0], [note]


def template_command(settings: TemplateSettings) -> Command:
    """The command, bound to the cluster's [template] settings."""

    def run(request: CommandRequest, view: ClusterView) -> Reply:
        if not request.cluster_user:
            raise UsageError(
                "A template needs your lab and account, and skybot does not know your cluster "
                "account yet: link it with `/sky link YOUR_CLUSTER_USER`, then ask again."
            )
        options = parse_options(request.args)
        require_data(view, "slurm")
        require_data(view, "caps")  # lab memberships come with the caps
        lab, notes = _choose_lab(request.cluster_user, view, options.lab)
        nodes = view.snapshot.nodes
        try:
            ask = JobAsk(
                user=request.cluster_user,
                lab=lab,
                gpus=parse_gpus(options.gpus, nodes) if options.gpus is not None else None,
                image=check_image(options.image) if options.image is not None else None,
                overcap=(view.overcap_partition, view.overcap_account) if options.overcap else None,
            )
        except TemplateError as error:
            raise UsageError(str(error)) from None
        if options.interactive:
            code = interactive_command(ask, settings, nodes)
            intro = "Run this on a login node for an interactive shell (exit it to free the GPUs):"
        else:
            code = batch_script(ask, settings, nodes)
            intro = _batch_intro(ask)
        return _reply(intro, code, notes)

    return Command(
        "template",
        USAGE,
        "a ready sbatch script (or srun line) for your lab, GPUs, image and overcap",
        run,
        "Partition, account, CPUs per GPU, memory and log paths follow the cluster's rules. "
        "`--overcap` adds requeueing and a checkpoint-on-signal skeleton; `--image NAME` runs "
        "the program in an enroot image through pyxis; `--interactive` gives an `srun --pty "
        "bash` line instead. Without `--gpus`: one GPU of any type.",
    )


def _batch_intro(ask: JobAsk) -> str:
    roots = ask.lab.storage_roots
    path = f"{roots[0].rstrip('/')}/{ask.user}/job.sh" if roots else "job.sh"
    return (
        f"Save this as e.g. {literal(path)}, put your program in place of `{PROGRAM}`, then run "
        f"{literal('sbatch ' + path)} on the cluster, or {literal('/sky submit ' + path)} here."
    )


def _reply(intro: str, code: str, notes: list[str]) -> Reply:
    blocks: list[Block] = [section(intro), *code_sections(code)]
    if notes:
        blocks.append(context(" ".join(notes)))
    text = "\n".join([intro, _FENCE, fenced_code(code).rstrip("\n"), _FENCE, *notes])
    return Reply(text, blocks)
