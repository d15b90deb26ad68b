"""A sequence kept as chunks of MessagePack, sent out of band across the poll worker's pipe."""

from __future__ import annotations

import functools
import pickle
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, SupportsIndex, TypeVar, overload

import msgspec

T = TypeVar("T")


class Packed(Sequence[T]):
    """Items (job rows, jobs) kept encoded, a chunk of them per buffer.

    A first, full digest at 100,000 jobs has 100,000 rows and as many jobs observed: as
    objects, 60 MB in the worker and as much again in the bot. Pickled in one call, the
    pickler's memo of every object held the worker 90 MB above its peak, and decoding them
    in one call holds the bot's interpreter for a third of a second (no Python code runs in
    between to let the event loop in). Packed, they cross the pipe as pickle protocol 5's
    out-of-band buffers (scheduler/slurm/worker.py), and the store's writer decodes one
    chunk at a time as it iterates. Chunks are msgspec's MessagePack of the item type, not
    pickles: a pickled dataclass is rebuilt field by field in Python (`__setstate__`), and
    the 6,000 jobs a steady poll observes took 100 ms of the bot's interpreter; msgspec
    decodes them in a fifth of that."""

    __slots__ = ("_chunks", "_item_type", "_length")

    def __init__(
        self, chunks: Sequence[bytes | bytearray | memoryview], length: int, item_type: Any
    ) -> None:
        self._chunks = chunks
        self._length = length
        self._item_type = item_type

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[T]:
        decoder = _decoder(self._item_type)
        for chunk in self._chunks:
            yield from decoder.decode(chunk)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        return list(self)[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Packed):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        if int(protocol) < 5:  # copy.copy, older picklers: in band
            return (
                Packed,
                ([bytes(chunk) for chunk in self._chunks], self._length, self._item_type),
            )
        chunks = [pickle.PickleBuffer(chunk) for chunk in self._chunks]
        return (Packed, (chunks, self._length, self._item_type))


@functools.cache
def _decoder(item_type: Any) -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(list[item_type])


_ITEMS_PER_CHUNK = 2_000
_encoder = msgspec.msgpack.Encoder()


class Packer(Generic[T]):
    """Collects items of `item_type` into `Packed`, never holding more than a chunk of
    them unpacked."""

    def __init__(self, item_type: Any) -> None:
        self._item_type = item_type
        self._length = 0
        self._chunks: list[bytes] = []
        self._pending: list[T] = []

    def add(self, item: T) -> None:
        self._length += 1
        self._pending.append(item)
        if len(self._pending) >= _ITEMS_PER_CHUNK:
            self._pack()

    def packed(self) -> Packed[T]:
        self._pack()
        return Packed(self._chunks, self._length, self._item_type)

    def _pack(self) -> None:
        if self._pending:
            self._chunks.append(_encoder.encode(self._pending))
            self._pending = []


def packed(items: Iterable[T], item_type: Any) -> Packed[T]:
    packer: Packer[T] = Packer(item_type)
    for item in items:
        packer.add(item)
    return packer.packed()
