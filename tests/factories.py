"""Small record builders for unit tests of the pure core and the store."""

from __future__ import annotations

from typing import Any

from core.records import Job, Node


def job(job_id: int, **fields: Any) -> Job:
    defaults: dict[str, Any] = {
        "name": f"job{job_id}",
        "user": "alice",
        "account": "hoffman-lab",
        "partition": "hoffman-lab",
        "state": "RUNNING",
    }
    defaults.update(fields)
    return Job(job_id=job_id, **defaults)


def node(name: str, gpu_type: str, total: int = 4, used: int = 0, **fields: Any) -> Node:
    defaults: dict[str, Any] = {
        "state": "MIXED" if used else "IDLE",
        "partitions": ("hoffman-lab", "kira-lab", "debug", "overcap"),
    }
    defaults.update(fields)
    return Node(
        name=name, gpus_total={gpu_type: total}, gpus_used={gpu_type: used} if used else {},
        **defaults,
    )
