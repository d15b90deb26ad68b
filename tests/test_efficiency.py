"""CPU, memory and time efficiency from sacct's own records, and the advice that goes with it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.config_schema import Config, NotificationsConfig
from core.efficiency import EfficiencyPolicy, efficiency_lines, suggested_mem, usage_from_sacct
from core.job_notices import Seen, decide_job_notice
from core.records import JobUsage
from core.slurm_json import parse_sacct
from core.transitions import Transition
from tests.support.factories import job

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
GIB = 1024**3
POLICY = EfficiencyPolicy(min_seconds=300)


def sacct_job(version: str, job_id: int) -> dict[str, Any]:
    document = json.loads((FIXTURES / version / "sacct.json").read_text())
    return next(j for j in document["jobs"] if j["job_id"] == job_id)


def test_usage_as_22_05_and_24_11_record_it() -> None:
    # Both: `sleep` under a 1-minute limit, 1 CPU, 1000 MB (the recorded timeout-demo job).
    assert usage_from_sacct(sacct_job("v0.0.38", 104)) == JobUsage(
        elapsed_seconds=60,
        cpus=1,
        cpu_seconds=0.002116,
        mem_requested_bytes=1000 * 1024**2,
        mem_peak_bytes=3313664,
        time_limit_minutes=1,
    )
    assert usage_from_sacct(sacct_job("v0.0.42", 2)) == JobUsage(
        elapsed_seconds=68,
        cpus=1,
        cpu_seconds=0.002071,
        mem_requested_bytes=1000 * 1024**2,
        mem_peak_bytes=3686400,
        time_limit_minutes=1,
    )


def test_parsed_end_records_carry_usage_and_live_ones_do_not() -> None:
    for version in ("v0.0.38", "v0.0.42"):
        raw = json.loads((FIXTURES / version / "sacct.json").read_text())
        jobs = {j.name: j for j in parse_sacct(raw).records}
        ended = jobs["timeout-demo"]
        assert ended.usage is not None and ended.usage.mem_peak_bytes, version
        assert jobs["train-a40"].usage is None, version  # still running


def test_a_job_that_asked_for_far_more_memory_gets_the_advice() -> None:
    recorded = usage_from_sacct(sacct_job("v0.0.38", 104))
    assert recorded is not None
    usage = replace(
        recorded,
        elapsed_seconds=3600,
        mem_requested_bytes=64 * GIB,
        mem_peak_bytes=int(3.1 * GIB),
        cpus=8,
        cpu_seconds=3600 * 1.5,
        time_limit_minutes=24 * 60,
    )
    assert efficiency_lines(usage, POLICY, timed_out=False) == [
        "CPU efficiency: 19 % of 8 CPUs: it kept about 2 busy, so `--cpus-per-task=2` would do",
        "Peak memory: 3.1 GB of 64 GB requested: asked for 64 GB, peaked at 3.1 GB: "
        "`--mem=4G` would start sooner",
        "Time: 1 h of its 1 d limit: `--time=2:00:00` would let it backfill sooner",
    ]


def test_a_well_sized_job_gets_figures_and_no_advice() -> None:
    usage = JobUsage(
        elapsed_seconds=7200,
        cpus=4,
        cpu_seconds=7200 * 3.6,
        mem_requested_bytes=16 * GIB,
        mem_peak_bytes=13 * GIB,
        time_limit_minutes=180,
    )
    assert efficiency_lines(usage, POLICY, timed_out=False) == [
        "CPU efficiency: 90 % of 4 CPUs",
        "Peak memory: 13 GB of 16 GB requested",
        "Time: 2 h of its 3 h limit",
    ]
    # A job that hit its limit is never told to ask for less time.
    short = replace(usage, time_limit_minutes=24 * 60)
    assert efficiency_lines(short, POLICY, timed_out=True)[-1] == "Time: 2 h of its 1 d limit"


def test_short_jobs_say_nothing_and_gpus_only_when_recorded() -> None:
    recorded = usage_from_sacct(sacct_job("v0.0.42", 2))
    assert recorded is not None
    assert efficiency_lines(recorded, POLICY, timed_out=True) == []  # 68 s < 5 min
    lines = efficiency_lines(recorded, EfficiencyPolicy(min_seconds=60), timed_out=True)
    assert lines[1] == "Peak memory: 4 MB of 1000 MB requested"  # small requests: no advice
    assert not any("GPU" in line for line in lines)
    # A site that records gres/gpuutil (a GPU accounting plugin) gets the average shown.
    raw = sacct_job("v0.0.42", 2)
    step = raw["steps"][-1]
    step["tres"]["requested"]["average"].append(
        {"type": "gres", "name": "gpuutil", "id": 1001, "count": 37}
    )
    with_gpu = usage_from_sacct(raw)
    assert with_gpu is not None and with_gpu.gpu_util_percent == 37.0
    assert efficiency_lines(with_gpu, EfficiencyPolicy(0), timed_out=True)[-1] == (
        "GPU utilisation: 37 % on average"
    )


def test_malformed_records_lose_a_figure_never_the_dm() -> None:
    assert usage_from_sacct({"time": {"elapsed": "soon"}}) is None
    assert usage_from_sacct("not a job") is None
    odd = usage_from_sacct(
        {"time": {"elapsed": 600, "limit": {"set": False}}, "steps": ["x", {"tres": 3}]}
    )
    assert odd == JobUsage(elapsed_seconds=600)
    assert efficiency_lines(odd, POLICY, timed_out=False) == []


def test_suggested_memory_leaves_headroom() -> None:
    assert [suggested_mem(int(g * GIB)) for g in (0.01, 3.1, 7.9, 40)] == ["1G", "4G", "10G", "50G"]


def test_end_dms_show_the_figures() -> None:
    usage = JobUsage(3600, 1, 3500.0, 64 * GIB, 2 * GIB, 120)
    ended = job(5, state="COMPLETED", start_time=1000, end_time=4600, usage=usage)
    notice = decide_job_notice(
        Transition(ended, "RUNNING", "COMPLETED", 0),
        "all",
        Seen(5000),
        Config(notifications=NotificationsConfig(efficiency_min_minutes=POLICY.min_seconds / 60)),
        Config().default_cluster,
    )
    assert notice is not None
    assert "CPU efficiency: 97 % of 1 CPU\nPeak memory: 2.0 GB of 64 GB requested: " in notice.text
    assert "`--mem=3G` would start sooner" in notice.text
