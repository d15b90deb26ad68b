"""How job, node, image and lab usage records are stored: msgspec JSON, one text per row.

msgspec encodes and decodes the record dataclasses directly, ~20x faster than
json + dataclasses.asdict, which matters at 10,000 jobs every 15 s.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from core.lab_usage import LabUsage
from core.records import ContainerImage, Job, Node

_encoder = msgspec.json.Encoder()
_job_decoder = msgspec.json.Decoder(Job)
_node_decoder = msgspec.json.Decoder(Node)
_image_decoder = msgspec.json.Decoder(ContainerImage)


def encode_record(record: Job | Node | ContainerImage) -> str:
    return _encoder.encode(record).decode()


def decode_job(text: str | bytes) -> Job:
    """Decode a job as stored in `jobs.record` or `job_transitions.record`."""
    return _job_decoder.decode(text)


def decode_node(text: str | bytes) -> Node:
    return _node_decoder.decode(text)


def decode_image(text: str | bytes) -> ContainerImage:
    return _image_decoder.decode(text)


class _UsageRecord(msgspec.Struct):
    """A lab's usage as stored: its waiting jobs by id (they are in the jobs table), and
    no cap (the reader takes the cap as the caps table has it then)."""

    gpus_used: int
    by_user: dict[str, int]
    by_type: dict[str, int]
    overcap_by_user: dict[str, int]
    pending_at_cap: list[int]
    pending: int


_usage_decoder = msgspec.json.Decoder(_UsageRecord)


def encode_usage(usage: LabUsage) -> str:
    record = _UsageRecord(
        gpus_used=usage.gpus_used,
        by_user=usage.by_user,
        by_type=usage.by_type,
        overcap_by_user=usage.overcap_by_user,
        pending_at_cap=[job.job_id for job in usage.pending_at_cap],
        pending=usage.pending,
    )
    return _encoder.encode(record).decode()


def decode_usage(
    text: str | bytes, lab: str, account: str, cap: int | None, job: Callable[[int], Job | None]
) -> LabUsage:
    """A stored usage, its waiting jobs looked up with `job` (by id)."""
    record = _usage_decoder.decode(text)
    # Thousands wait at a big site's caps: looked up and kept without a Python call each (a
    # job not found, which the store's one transaction rules out, is left out).
    waiting = tuple(filter(None, map(job, record.pending_at_cap)))
    return LabUsage(
        lab=lab,
        account=account,
        cap=cap,
        gpus_used=record.gpus_used,
        by_user=record.by_user,
        by_type=record.by_type,
        overcap_by_user=record.overcap_by_user,
        pending_at_cap=waiting,
        pending=record.pending,
    )
