"""The cluster's own limits and reservations (issue 43): read from every Slurm spelling, and
quoted by `/sky why` as the cluster states them, never as one site's guide does."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from core.reservations import blocking, minutes_before
from core.slurm_limits import (
    PartitionLimits,
    QosLimits,
    Reservation,
    SlurmLimits,
    parse_partitions_json,
    parse_qos_json,
    parse_reservations_json,
)
from core.slurm_limits_text import (
    duration_minutes,
    parse_partitions_text,
    parse_qos_text,
    parse_reservations_text,
)
from handlers.commands.why_explain import explain
from tests.support.factories import job, make_snapshot, make_view, node

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
LIMITS = FIXTURES / "limits"
NOW = 1_800_000_000.0


def _json(path: Path) -> dict[str, object]:
    document = json.loads(path.read_text())
    assert isinstance(document, dict)
    return document


@pytest.mark.parametrize(
    "document",
    [
        LIMITS / "scontrol_partitions_24.11.json",
        FIXTURES / "restd" / "v0.0.42" / "partitions.json",
        FIXTURES / "restd" / "v0.0.38" / "partitions.json",
    ],
)
def test_partition_limits_from_json_of_every_version(document: Path) -> None:
    partitions = {p.name: p for p in parse_partitions_json(_json(document))}
    assert partitions["debug"].max_time_minutes == 240  # MaxTime=04:00:00 on both clusters
    assert partitions["hoffman-lab"].max_time_minutes is None  # UNLIMITED
    assert partitions["hoffman-lab"].max_nodes is None


def test_partition_limits_from_2205_text() -> None:
    text = (LIMITS / "scontrol_partitions_22.05.txt").read_text()
    partitions, warnings = parse_partitions_text(text)
    by_name = {p.name: p for p in partitions}
    assert warnings == []
    assert by_name["debug"] == PartitionLimits("debug", 240, None, "")
    assert set(by_name) == {"hoffman-lab", "kira-lab", "debug", "overcap"}
    line = "PartitionName=gpu MaxNodes=2 MaxTime=2-12:00:00 QoS=gpuqos State=UP"
    assert parse_partitions_text(line)[0] == [PartitionLimits("gpu", 3600, 2, "gpuqos")]


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("UNLIMITED", None),
        ("INFINITE", None),
        ("04:00:00", 240),
        ("2-00:00:00", 2880),
        ("7-00:00:00", 10080),
        ("1-12", 2160),
        ("30:00", 30),
        ("30:01", 31),
        ("90", 90),
    ],
)
def test_slurm_durations(text: str, minutes: int | None) -> None:
    assert duration_minutes(text) == minutes


def test_reservations_from_every_spelling() -> None:
    expected = Reservation("why_shape", 0, 0, ("clippy",), ("MAINT", "SPEC_NODES"), ("root",))
    found = [
        parse_reservations_json(_json(LIMITS / "scontrol_reservations_24.11.json")),
        parse_reservations_json(_json(LIMITS / "restd_reservations_v0.0.38.json")),
        parse_reservations_text((LIMITS / "scontrol_reservations_22.05.txt").read_text())[0],
    ]
    for reservations in found:
        [reservation] = reservations
        assert replace(reservation, start=0, end=0) == expected
        assert reservation.end - reservation.start == 3600
        assert reservation.maintenance
    assert parse_reservations_text("No reservations in the system\n") == ([], [])


def test_hostlists_in_a_reservation_are_expanded() -> None:
    document = {
        "reservations": [
            {"name": "r", "start_time": 10, "end_time": 20, "node_list": "gpu[1-2,5],cpu01"}
        ]
    }
    [reservation] = parse_reservations_json(document)
    assert reservation.nodes == ("gpu1", "gpu2", "gpu5", "cpu01")


def test_qos_limits_from_json_and_text() -> None:
    [normal] = parse_qos_json(_json(LIMITS / "sacctmgr_qos_24.11.json"))
    assert normal == QosLimits("normal")
    document = {
        "QOS": [  # 22.05's slurmdb v0.0.38
            {
                "name": "debug",
                "limits": {
                    "max": {
                        "tres": {"per": {"user": [{"type": "gres", "name": "gpu", "count": 5}]}},
                        "wall_clock": {"per": {"job": 240}},
                        "jobs": {"active_jobs": {"per": {"user": None}}},
                    }
                },
            }
        ]
    }
    assert parse_qos_json(document) == [QosLimits("debug", 5, 240, None)]
    text = "normal||||\ngpuqos|cpu=8,gres/gpu=3|2-00:00:00|4\n"
    assert parse_qos_text(text) == (
        [QosLimits("normal"), QosLimits("gpuqos", 3, 2880, 4)],
        [],
    )


def _why(limits: SlurmLimits, **fields: object) -> str:
    pending = job(77, state="PENDING", gpus_by_type={"a40": 1}, **fields)
    others = [
        job(70, qos="gpuqos", gpus_by_type={"a40": 2}, partition="hoffman-lab"),
    ]
    nodes = (node("clippy", "a40"), node("baymax", "a40"))
    snapshot = make_snapshot(jobs=(pending, *others), nodes=nodes, limits=limits)
    return "\n".join(explain(make_view(snapshot), pending, NOW))


def test_why_quotes_the_partitions_live_max_time_and_a_command_that_fits_it() -> None:
    asked = {"reason": "PartitionTimeLimit", "partition": "gpu", "time_limit_minutes": 10080}
    text = _why(SlurmLimits((PartitionLimits("gpu", 2880),)), **asked)
    assert "`gpu` allows: 2 d at most" in text
    assert "`scontrol update JobId=77 TimeLimit=2-00:00:00`" in text
    # The admin changes MaxTime: the answer follows.
    text = _why(SlurmLimits((PartitionLimits("gpu", 90),)), **asked)
    assert "1 h 30 min at most" in text and "TimeLimit=01:30:00" in text


def test_why_quotes_the_qos_per_user_gpu_limit_and_what_the_user_holds() -> None:
    limits = SlurmLimits(qos=(QosLimits("gpuqos", max_gpus_per_user=3),))
    text = _why(limits, reason="QOSMaxGRESPerUser", qos="gpuqos")
    assert "the QOS `gpuqos` allows one user: 3 GPUs at once; you use 2 now" in text
    # The partition's QOS counts as well as the job's own.
    limits = SlurmLimits((PartitionLimits("hoffman-lab", qos="gpuqos"),), limits.qos)
    assert "3 GPUs at once" in _why(limits, reason="QOSMaxGRESPerUser")


def test_without_the_limits_why_says_what_slurm_says_and_no_number() -> None:
    text = _why(SlurmLimits(), reason="PartitionTimeLimit", time_limit_minutes=99999)
    assert "longer than `hoffman-lab` allows" in text
    assert not re.search(r"\d+ (h|d)\b", text.split("\n", 1)[1])


def test_why_names_the_reservation_in_the_way_and_the_time_that_fits() -> None:
    maintenance = Reservation(
        "maint_dec", int(NOW + 3 * 3600), int(NOW + 5 * 3600), ("clippy", "baymax"), ("MAINT",)
    )
    text = _why(
        SlurmLimits(reservations=(maintenance,)),
        reason="ReqNodeNotAvail, Reserved for maintenance",
        time_limit_minutes=600,
    )
    assert "Reservation `maint_dec` (maintenance) holds `clippy`, `baymax` from" in text
    # Three hours less the margin: 2 h 55 min.
    assert "`scontrol update JobId=77 TimeLimit=02:55:00`" in text


def test_a_reservation_the_job_may_use_or_that_it_ends_before_is_not_in_its_way() -> None:
    later = Reservation("later", int(NOW + 7200), int(NOW + 9000), ("clippy",), ("MAINT",))
    mine = Reservation("mine", int(NOW), int(NOW + 9000), ("clippy",), (), ("hoffman-lab",))
    limits = SlurmLimits(reservations=(later, mine))
    nodes = (node("clippy", "a40"),)
    short = job(1, state="PENDING", time_limit_minutes=60)
    assert blocking(limits, nodes, short, NOW) == []
    assert blocking(limits, nodes, replace(short, time_limit_minutes=None), NOW) == [later]
    assert minutes_before(later, NOW) == 115
    assert minutes_before(replace(later, start=int(NOW + 400)), NOW) is None


# --- No site's limits in the answers -------------------------------------------------------

GUIDE = REPO.parent / "shared" / "reference" / "skynet-user-guide.txt"
# The guide's partitions and numbers: "debug: ... 4 hours ... 5 GPUs in use at once",
# "short ... 2 days", "long ... 7 days", "user-overcap", "overcap ... 2 days".
_SITE_PARTITIONS = ("debug", "short", "long", "user-overcap")
_SITE_TEXT = [
    # A partition with a duration: "debug 4 h", "long 7 d", "overcap 2 days".
    re.compile(r"\b(debug|short|long|overcap)\s+\d+\s*(h|d|hours?|days?)\b", re.I),
    # A per-user count: "allows 5 at once", "5 GPUs in use at once".
    re.compile(r"\ballows\s+\d+\s+at once|\b\d+\s+(GPUs?\s+)?(in use\s+)?at once", re.I),
    re.compile(r"maximum runtime", re.I),
    # A site partition named as such: `debug`, "-p short", "partition=long", "short,user-overcap".
    re.compile(
        r"[`'\"](debug|short|long|user-overcap)[`'\"]|(-p|--partition[= ]|partition=)\s*"
        r"(debug|short|long|user-overcap)\b|\buser-overcap\b",
        re.I,
    ),
]
# Configuration defaults are the site's own settings, documented as such (and overridden in
# its config), not words of an answer.
_NOT_ANSWERS = {"core/config_schema.py"}


def _answer_strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module but its docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for each in ast.walk(tree):
        body = getattr(each, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            docstrings.add(id(first.value))
    return [
        (each.lineno, each.value)
        for each in ast.walk(tree)
        if isinstance(each, ast.Constant)
        and isinstance(each.value, str)
        and id(each) not in docstrings
    ]


def site_strings(path: Path) -> list[tuple[int, str]]:
    """The module's strings that quote a site's limits or partitions."""
    return [
        (line, text)
        for line, text in _answer_strings(path)
        if any(pattern.search(text) for pattern in _SITE_TEXT)
    ]


def test_the_guide_names_what_this_test_looks_for() -> None:
    # The guide is the project's reference beside the checkout (shared/), not part of it.
    if not GUIDE.is_file():
        pytest.skip(f"no site guide at {GUIDE} to compare the patterns with")
    guide = GUIDE.read_text()
    for partition in _SITE_PARTITIONS:
        assert partition in guide
    assert "maximum runtime in debug is 4 hours" in guide
    assert "5 GPUs in use at once" in guide


def test_no_answer_quotes_a_sites_limits_or_partitions() -> None:
    sources = sorted((REPO / "handlers").rglob("*.py")) + sorted((REPO / "core").rglob("*.py"))
    found = [
        f"{path.relative_to(REPO)}:{line}: {text!r}"
        for path in sources
        if path.relative_to(REPO).as_posix() not in _NOT_ANSWERS
        for line, text in site_strings(path)
    ]
    assert found == []


def test_the_search_finds_the_old_hard_coded_limits(tmp_path: Path) -> None:
    path = tmp_path / "old.py"
    path.write_text(
        'A = ("Its time limit is longer than {partition} allows (debug 4 h, short 2 d, "\n'
        '     "long 7 d, overcap 2 d)")\n'
        'B = "as the QOS allows one user (debug allows 5 at once)"\n'
        'C = "resubmit with -p short"\n'
        'D = "For a short job, or a long one, say how long: `--time`"\n'
    )
    assert [line for line, _ in site_strings(path)] == [1, 3, 4]


def test_slurms_reservation_reason_for_a_job_not_in_it_names_the_one_in_its_way() -> None:
    maintenance = Reservation(
        "maint_dec", int(NOW + 3600), int(NOW + 7200), ("clippy",), ("MAINT",)
    )
    text = _why(
        SlurmLimits(reservations=(maintenance,)), reason="Reservation", time_limit_minutes=120
    )
    assert "A reservation on the nodes it can use keeps it waiting" in text
    assert "its advanced reservation" not in text
    assert "TimeLimit=00:55:00" in text
    # A job in a reservation of its own keeps Slurm's meaning.
    text = _why(SlurmLimits(), reason="Reservation")
    assert "It waits for its advanced reservation to become available." in text
