"""core.slurm_stream: a squeue document read a slice at a time parses as it does whole.

The poll worker reads `squeue --json` this way (600 MB at 100,000 jobs), so every shape a
Slurm version prints, every way of laying it out, and every job name a user can give must
come out the same as the whole-document parse; a layout it does not recognise must say so
(NotStreamable) rather than lose or invent records.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.slurm_decode import decode_slurm_json
from core.slurm_json import (
    ParseResult,
    parse_sacct,
    parse_sacct_pieces,
    parse_squeue,
    parse_squeue_pieces,
)
from core.slurm_stream import NotStreamable, record_slices
from scheduler.slurm.commands import SlurmCommandError
from scheduler.slurm.digester import _squeue_jobs

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
VERSIONS = ["v0.0.38", "v0.0.40", "v0.0.42"]


def fixture(version: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / version / "squeue.json").read_text())
    return document


# The same document as Slurm pretty-prints it, compact, and with odd whitespace.
LAYOUTS: dict[str, dict[str, Any]] = {
    "pretty": {"indent": 2},
    "compact": {"separators": (",", ":")},
    "spaced": {"indent": "\t", "separators": (" , ", " : ")},
}


def laid_out(document: dict[str, Any], layout: str) -> bytes:
    # One layout at a time: an indented dump runs json's pure-Python encoder.
    return json.dumps(document, **LAYOUTS[layout]).encode()


def layouts(document: dict[str, Any]) -> dict[str, bytes]:
    return {layout: laid_out(document, layout) for layout in LAYOUTS}


def streamed(raw: bytes, slice_bytes: int) -> ParseResult[Any]:
    return parse_squeue_pieces(record_slices(io.BytesIO(raw).read, slice_bytes=slice_bytes))


def whole(raw: bytes) -> ParseResult[Any]:
    return parse_squeue(decode_slurm_json(raw))


def assert_same(raw: bytes, slice_bytes: int) -> None:
    by_slices, at_once = streamed(raw, slice_bytes), whole(raw)
    assert by_slices.records == at_once.records
    # The rest of the document (Slurm's own messages) comes last when streamed.
    assert sorted(by_slices.warnings) == sorted(at_once.warnings)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("layout", ["pretty", "compact", "spaced"])
@pytest.mark.parametrize("slice_bytes", [64, 1000, 4096, 1 << 20])
def test_every_version_and_layout_parses_as_the_whole_document(
    version: str, layout: str, slice_bytes: int
) -> None:
    assert_same(laid_out(fixture(version), layout), slice_bytes)


@pytest.mark.parametrize(
    ("version", "name"),
    [(version, "sacct.json") for version in VERSIONS] + [("v0.0.42", "sacct_duplicates.json")],
)
@pytest.mark.parametrize("slice_bytes", [200, 5000])
def test_sacct_in_slices_parses_as_the_whole_document(
    version: str, name: str, slice_bytes: int
) -> None:
    """sacct's records (steps nested in each) and its runs of a requeued job, which are
    folded into one job only once every piece is read."""
    raw = (FIXTURES / version / name).read_bytes()
    pieces = list(record_slices(io.BytesIO(raw).read, slice_bytes=slice_bytes))
    assert len(pieces) > 2
    by_slices = parse_sacct_pieces(pieces)
    at_once = parse_sacct(decode_slurm_json(raw))
    assert by_slices.records == at_once.records
    assert sorted(by_slices.warnings) == sorted(at_once.warnings)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_records_really_come_in_slices(version: str) -> None:
    """Not one piece holding everything (which a silent fall-back would also parse right)."""
    raw = laid_out(fixture(version), "pretty")
    pieces = list(record_slices(io.BytesIO(raw).read, slice_bytes=4096))
    records = [len(piece["jobs"]) for piece in pieces]
    assert len(pieces) > 2
    assert max(records) < len(fixture(version)["jobs"])
    assert sum(records) == len(fixture(version)["jobs"])
    assert records[-1] == 0  # the rest of the document: errors, warnings
    assert pieces[-1]["errors"] == []


def with_names(names: list[str]) -> dict[str, Any]:
    document = fixture("v0.0.42")
    template = document["jobs"][0]
    document["jobs"] = []
    for number, name in enumerate(names):
        job = copy.deepcopy(template)
        job["job_id"] = 1000 + number
        job["name"] = name
        document["jobs"].append(job)
    return document


# What a user may name a job to fake a record boundary, plus anything else.
_TRICKS = st.sampled_from(
    ['},{"account":"x"', '}, {"account": ', '"}]}', "\\", '\\"}', "{[", "\n    },\n    {"]
)
_NAMES = st.lists(st.one_of(_TRICKS, st.text(max_size=30)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=_NAMES,
    layout=st.sampled_from(["pretty", "compact", "spaced"]),
    slice_bytes=st.integers(64, 20_000),
)
def test_no_job_name_moves_a_record_boundary(
    names: list[str], layout: str, slice_bytes: int
) -> None:
    assert_same(laid_out(with_names(names), layout), slice_bytes)


def test_a_list_of_objects_inside_a_record_that_looks_like_records_is_not_split(
    tmp_path: Path,
) -> None:
    """Objects nested in a record, opening with the records' own first key: a guessed
    boundary there does not decode. Pretty-printed, as Slurm prints, the records' own
    boundaries are the least indented and are found; compact, the guesses may run out,
    and the worker then reads the document whole. Either way, nothing is lost."""
    document = with_names([f"job-{n}" for n in range(40)])
    for job in document["jobs"]:
        job["zz_nested"] = [{"account": n, "more": {"account": [n]}} for n in range(30)]
    for layout, raw in layouts(document).items():
        for slice_bytes in (500, 3000, 20_000):
            if layout != "compact":
                assert_same(raw, slice_bytes)
        path = tmp_path / f"{layout}.json"
        path.write_bytes(raw)
        assert _squeue_jobs(path).records == whole(raw).records


def test_bytes_that_are_not_utf8_are_replaced_and_reported_per_job() -> None:
    raw = laid_out(with_names(["ok", "PLACEHOLDER", "fine"]), "compact")
    raw = raw.replace(b"PLACEHOLDER", b"bad\xff\xfename")
    by_slices = streamed(raw, 2000)
    assert [job.name for job in by_slices.records] == ["ok", "bad\ufffd\ufffdname", "fine"]
    assert "job 1001: bytes that are not UTF-8 replaced in name" in by_slices.warnings
    assert by_slices.records == whole(raw).records


def test_an_empty_queue_and_a_controller_outage_are_read_as_documents() -> None:
    document = fixture("v0.0.38")
    document["jobs"] = []
    document["errors"] = [{"description": "Unable to contact slurm controller", "error_number": 1}]
    for raw in layouts(document).values():
        pieces = list(record_slices(io.BytesIO(raw).read, slice_bytes=64))
        assert len(pieces) == 1
        assert pieces[0]["jobs"] == []
        assert pieces[0]["errors"][0]["description"] == "Unable to contact slurm controller"


@pytest.mark.parametrize(
    "raw",
    [
        b"squeue: error: Invalid user for SlurmUser slurm, ignored",
        b"",
        b'[{"jobs": []}]',
        b'{"meta": {}, "errors": []}',
        # A key named "jobs" inside meta, before the document's own list.
        b'{"meta": {"jobs": [{"a": 1}, {"a": 2}]}, "jobs": [{"a": 3}], "errors": []}',
        # Cut off after two records (squeue killed mid-output).
        laid_out(fixture("v0.0.42"), "pretty")[:5000],
        laid_out(fixture("v0.0.42"), "compact")[:-10],
        # A record list that holds something other than objects.
        b'{"jobs": [1, 2, 3], "errors": []}',
    ],
    ids=["not-json", "empty", "a-list", "no-jobs", "jobs-in-meta", "cut", "cut-tail", "numbers"],
)
def test_a_layout_it_does_not_recognise_is_handed_back(raw: bytes) -> None:
    with pytest.raises(NotStreamable):
        list(record_slices(io.BytesIO(raw).read, slice_bytes=256))


def test_the_poll_worker_reads_what_it_cannot_stream_whole(tmp_path: Path) -> None:
    """Through the worker's reader: a list of non-objects is judged by the parser as
    before (a warning per record), a cut-off document is a failed poll, and an outage
    reported in the document's errors is one too."""
    odd = tmp_path / "odd.json"
    odd.write_bytes(b'{"jobs": [1, {"job_id": 5}], "errors": []}')
    parsed = _squeue_jobs(odd)
    assert any("not an object" in warning for warning in parsed.warnings)

    cut = tmp_path / "cut.json"
    cut.write_bytes(laid_out(fixture("v0.0.42"), "pretty")[:5000])
    with pytest.raises(SlurmCommandError, match="not JSON"):
        _squeue_jobs(cut)

    down = tmp_path / "down.json"
    document = fixture("v0.0.42")
    document["errors"] = [{"description": "Unable to contact slurm controller"}]
    down.write_bytes(laid_out(document, "pretty"))
    with pytest.raises(SlurmCommandError, match="Unable to contact slurm controller"):
        _squeue_jobs(down)
