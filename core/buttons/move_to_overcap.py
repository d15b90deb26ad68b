"""The *Move to overcap* button `/sky why` offers under a job waiting at its lab's cap.

core/overcap_move.py says when it fits; handlers/buttons/move_to_overcap.py handles the click.
The button names one plain job (no array task: `scontrol update` moves one job).
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
from core.records import Job
from core.runner_contract import PLAIN_JOB_ID
from core.slack_text import literal
from core.view import ClusterView

MOVE_TO_OVERCAP = ButtonKind(
    "Move to overcap", "skybot_move_to_overcap", rf"(?:{CLUSTER_NAME.pattern}/)?[0-9]+"
)


@dataclass(frozen=True, slots=True)
class MoveButton:
    job_id: int
    cluster: str | None

    @property
    def value(self) -> str:
        return with_cluster(str(self.job_id), self.cluster or "")


def move_button_of(value: str) -> MoveButton | None:
    """The job a button value names, or None unless it is one skybot builds."""
    split = split_cluster(value)
    if split is None or not PLAIN_JOB_ID.fullmatch(split[1]):
        return None
    return MoveButton(int(split[1]), split[0])


def where_to(partition: str, account: str) -> str:
    """ "partition `overcap`, account `overcap`" (no account when overcap needs none)."""
    account_part = f", account {literal(account)}" if account else ""
    return f"partition {literal(partition)}{account_part}"


def move_to_overcap_block(view: ClusterView, job: Job) -> list[Block]:
    """An actions block with the button and its confirm dialog (which says what it costs),
    naming `view`'s cluster; nothing where skybot does not act there."""
    if not view.acts:
        return []
    target = MoveButton(job.job_id, view.cluster_name)
    label = str(job.job_id)
    where = where_to(view.overcap_partition, view.overcap_account)
    confirm = confirm_dialog(
        "Move this job to overcap?",
        f"Job {literal(label)} {literal(job.name, 40)} moves to {where} (as you), keeping its "
        "job id. There it is *preemptible*: when a lab needs those GPUs, Slurm stops it and "
        "requeues it. Save checkpoints.",
        "Move it",
        "Keep it waiting",
    )
    element = button(
        MOVE_TO_OVERCAP, target.value, "Move to overcap", target.value, style="primary",
        confirm=confirm,
    )  # fmt: skip
    return actions_block([element])
