"""The Cancel button under `/sky jobs` and on the Home tab: one per job, as scancel names it.

Its handling (checked again at every click, as the clicker's own account) is
handlers/buttons/cancel.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.blocks import Block
from core.buttons import (
    CLUSTER_NAME,
    ButtonKind,
    actions_block,
    button,
    confirm_dialog,
    split_cluster,
    with_cluster,
)
from core.job_facts import job_label
from core.records import Job
from core.runner_contract import JOB_ID
from core.slack_text import literal
from core.view import ClusterView

CANCEL = ButtonKind("Cancel", "skybot_cancel_job", rf"(?:{CLUSTER_NAME.pattern}/)?[0-9_]+")
# Slack allows 25 elements in an actions block; a long list offers the first few.
MAX_BUTTONS = 5


@dataclass(frozen=True, slots=True)
class JobButton:
    """What a Cancel button carries: a job as scancel takes it (Slurm's array task text can
    be anything, "1-3%2" or worse, so only plain ids and tasks get a button)."""

    label: str
    cluster: str | None

    @property
    def value(self) -> str:
        return with_cluster(self.label, self.cluster or "")


def job_button_of(value: str) -> JobButton | None:
    """The job a button value names, or None unless it is one skybot builds."""
    split = split_cluster(value)
    if split is None or not JOB_ID.fullmatch(split[1]):
        return None
    return JobButton(split[1], split[0])


def cancel_buttons(view: ClusterView, jobs: list[Job]) -> Block:
    """An actions block with a Cancel button (and its confirm dialog) per job of `view`'s
    cluster, or none where skybot does not act there (scancel is not skybot's to run)."""
    cluster = view.cluster_name
    labelled = [(job, JobButton(job_label(job), cluster)) for job in jobs if view.acts]
    elements = [
        button(
            CANCEL,
            target.value,
            f"Cancel {target.label}",
            target.value,
            style="danger",
            confirm=confirm_dialog(
                "Cancel this job?",
                f"Job {literal(target.label)} {literal(job.name, 60)} will be cancelled "
                "(scancel, as you). This cannot be undone.",
                "Cancel the job",
                "Keep it",
            ),
        )
        for job, target in labelled
        if JOB_ID.fullmatch(target.label)
    ][:MAX_BUTTONS]
    return {"type": "actions", "elements": elements}


def cancel_block(view: ClusterView, jobs: list[Job]) -> list[Block]:
    """The actions block for `jobs` of `view`'s cluster, or nothing when none can carry a
    button."""
    return actions_block(cancel_buttons(view, jobs)["elements"])
