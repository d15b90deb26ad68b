"""When skybot offers to move a pending job to overcap, from one snapshot (pure functions).

A job held by its lab's GPU cap could run now on GPUs nobody is using, through the overcap
partition, at the price of being preemptible. `/sky why` then offers a *Move to overcap*
button to the job's owner; the move itself is the runner's (`move-to-overcap`), as the user.
"""

from __future__ import annotations

from collections import defaultdict

from core.lab_usage import is_held_by_cap
from core.records import Job
from core.view import ClusterView

# Slurm's reasons for "the group's GPU limit is reached": a lab's cap set as GrpTRES=gres/gpu on
# its account (AssocGrpGRES), or on a QOS the lab's jobs run under (QOSGrpGRES).
LAB_CAP_REASONS = frozenset({"AssocGrpGRES", "QOSGrpGRES"})


def overcap_nodes_that_fit(view: ClusterView, job: Job) -> list[tuple[str, dict[str, int]]]:
    """Nodes in the overcap partition whose idle GPUs would take the job's request now, each
    with its idle GPUs by type, in the order of `view.idle` (most idle first)."""
    if not job.gpus:
        return []
    idle_by_node: dict[str, dict[str, int]] = defaultdict(dict)
    for item in view.idle:
        if view.overcap_partition in item.partitions:
            idle_by_node[item.node][item.gpu_type] = item.count
    wanted = {t: n for t, n in job.gpus_by_type.items() if t}
    return [
        (node, idle)
        for node, idle in idle_by_node.items()
        if all(idle.get(t, 0) >= n for t, n in wanted.items()) and sum(idle.values()) >= job.gpus
    ]


def waits_at_lab_cap(view: ClusterView, job: Job) -> bool:
    """Pending only because its lab's account (or QOS) has all the GPUs its cap allows."""
    code = job.reason.split(",")[0].strip()
    return (
        is_held_by_cap(job)
        and code in LAB_CAP_REASONS
        and any(lab.account == job.account for lab in view.labs)
    )


def offers_move_to_overcap(view: ClusterView, job: Job, caller: str | None) -> bool:
    """Whether `caller` (a cluster account, None when unlinked) is offered the button: their own
    single job (no array: the runner moves one job id; no het job: its components have
    partitions and accounts of their own), waiting at its lab's cap, with idle GPUs on
    overcap that fit it, on a cluster where skybot acts."""
    return (
        view.acts
        and caller is not None
        and job.user == caller
        and job.array_job_id is None
        and not job.het_components
        and job.account != view.overcap_account
        and waits_at_lab_cap(view, job)
        and bool(overcap_nodes_that_fit(view, job))
    )
