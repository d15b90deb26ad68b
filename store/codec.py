"""How job, node and image records are stored: msgspec JSON, one text per row.

msgspec encodes and decodes the record dataclasses directly, ~20x faster than
json + dataclasses.asdict, which matters at 10,000 jobs every 15 s.
"""

from __future__ import annotations

import msgspec

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
