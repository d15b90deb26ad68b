"""`/sky submit PATH [options]`: submitting as the user, via the runner (`/sky cancel`: cancel.py).

A submission is written to the store before the ack ("queued as #17"), so once the user has
seen that line it survives a restart; the worker performs it and DMs the job id or sbatch's
own error. The runner, running as the user, is what checks the path and the options; the
checks here only give a quick, friendly answer to input that can never pass.
"""

from __future__ import annotations

from core.job_form import form_choices
from core.job_modal import form_view
from core.runner_contract import forbidden_option_char
from core.slack_text import literal
from handlers.commands.common import not_linked, require_data
from handlers.reply import Reply, section, simple
from handlers.router import Command, CommandRequest, UsageError
from handlers.services import Services
from store.submissions import QueueRefused, SubmissionRequest, enqueue

SUBMIT_USAGE = "submit PATH [--partition P] [--gpus TYPE:N] [--time T] [--qos Q] [--account A] [--job-name N] [--dependency D] [--notify-start]"  # noqa: E501
# skybot's own flag, never passed to sbatch: DM the submitter when the job starts.
NOTIFY_START = "--notify-start"
# Allowed sbatch options, as the runner names them (core.runner_contract.SUBMIT_OPTIONS).
OPTIONS = {
    "--partition": "partition",
    "-p": "partition",
    "--gpus": "gpus",
    "--time": "time",
    "-t": "time",
    "--qos": "qos",
    "--account": "account",
    "-A": "account",
    "--job-name": "job_name",
    "-J": "job_name",
    "--dependency": "dependency",
    "-d": "dependency",
}


def parse_submit_args(args: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    if not args:
        raise UsageError(f"Which script? Usage: `/sky {SUBMIT_USAGE}`")
    script, options = args[0], {}
    if script.startswith("-"):
        raise UsageError(f"Give the script path first. Usage: `/sky {SUBMIT_USAGE}`")
    typed: dict[str, str] = {}  # runner name -> the option as the user spelled it
    rest = list(args[1:])
    while rest:
        word = rest.pop(0)
        name, has_value, value = word.partition("=")
        if name not in OPTIONS:
            allowed = ", ".join(sorted({k for k in OPTIONS if k.startswith("--")}))
            raise UsageError(
                f"{literal(word, 40)} is not an option skybot passes to sbatch. "
                f"Allowed: {allowed}. Anything else belongs in the script's #SBATCH lines."
            )
        if OPTIONS[name] in typed:
            first = typed[OPTIONS[name]]
            also = "" if first == name else f" (`{first}` and `{name}` are the same option)"
            raise UsageError(f"`{name}` is given twice{also}: give it once.")
        typed[OPTIONS[name]] = name
        if not has_value:
            if not rest:
                raise UsageError(f"`{name}` needs a value.")
            value = rest.pop(0)
        # The runner would refuse these; refused here, before queueing, it is a quick answer.
        if not value or forbidden_option_char(value) is not None:
            raise UsageError(f"`{name}` has a value skybot will not pass on: {literal(value, 40)}.")
        options[OPTIONS[name]] = value
    return script, options


async def submit(request: CommandRequest, services: Services) -> Reply:
    if not request.cluster_user:
        raise not_linked(SUBMIT_USAGE)
    if not request.args:
        return job_form(request.cluster_user, services)
    notify_start = NOTIFY_START in request.args
    script, options = parse_submit_args(tuple(a for a in request.args if a != NOTIFY_START))
    if services.writer is None or services.submissions is None:
        raise UsageError("Submitting is not enabled on this skybot.")
    asked = SubmissionRequest(
        team_id=request.team_id,
        user_id=request.user_id,
        cluster_user=request.cluster_user,
        script=script,
        options=options,
        notify_start=notify_start,
    )
    try:
        submission = await services.writer.run(
            enqueue,
            services.cluster_name,
            asked,
            services.config.submit,
            request.now,
        )
    except QueueRefused as refusal:
        raise UsageError(str(refusal)) from None
    services.submissions.wake()
    start = " and again when it starts" if notify_start else ""
    return simple(
        f"Queued as #{submission.id}: {literal(script)} as {literal(request.cluster_user)}. "
        f"I'll DM you the job id, or sbatch's error, in a moment{start}."
    )


def job_form(user: str, services: Services) -> Reply:
    """The job form (core/job_modal.py) for the listener to open; said instead if it cannot."""
    view = services.current_view()
    if view is None or services.writer is None:
        raise UsageError(f"The job form works in Slack. Usage: `/sky {SUBMIT_USAGE}`")
    require_data(view, "slurm")
    require_data(view, "caps")  # lab memberships and caps come with them
    choices = form_choices(view, user)
    if not choices.places:
        raise UsageError(
            f"skybot finds no lab for {literal(user)}, so there is no partition to offer: "
            "ask your lab's admin to add you to its Slurm account."
        )
    fallback = (
        "Slack did not open the job form in time: type `/sky submit` again, or give a "
        f"script: `/sky {SUBMIT_USAGE}`."
    )
    return Reply(fallback, [section(fallback)], modal=form_view(services.cluster_name, choices))


SUBMIT = Command(
    "submit",
    "submit [PATH [OPTIONS]]",
    "submit a batch script as yourself (sbatch, through skybot's runner); no PATH: a job form",
    act=submit,
    starts_runner=True,
    details=(
        "Options: --partition, --gpus TYPE:N, --time, --qos, --account, --job-name, "
        "--dependency. PATH may be absolute, start with ~, or be relative to your home. "
        "`--notify-start`: a DM when the job starts. Without PATH, a form writes the job "
        "(partition, GPUs, time, image, directory, command) and submits it."
    ),
)
