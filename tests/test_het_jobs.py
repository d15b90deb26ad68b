"""Heterogeneous jobs are one job (issue 26 item 3), from what the real clusters printed.

The fixtures are one het job recorded on each test cluster (22.05: job 26, 24.11: job 3): two
components on different nodes (1 and 2 GPUs), whose script exits 3, written to
`/tmp/hetfail-%j-%N.out`. Slurm wrote `/tmp/hetfail-26-vm.out` and
`/tmp/hetfail-3-slurm2411.out`: the leader's id and the batch host's host name.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.config import load_config
from core.buttons.cancel import cancel_buttons
from core.config_schema import Config
from core.het_jobs import fold_het_jobs
from core.job_notices import Seen, decide_job_notice
from core.records import Job
from core.slurm_decode import decode_slurm_json
from core.slurm_json import parse_sacct, parse_sinfo, parse_squeue
from core.transitions import merge_observations
from core.view import ClusterView
from handlers.buttons.cancel import jobs_named
from handlers.commands import command_table
from scheduler.slurm.digester import PollDigester
from scheduler.slurm.wire import ChangedJobsRequest, DigestRequest, LabLimits
from scheduler.watchers.job_dms import process_transitions
from store.db import open_db
from store.outbox import outbox_rows
from store.slurm_writes import save_slurm_changes
from store.snapshots import load_snapshot
from store.writer import StoreWriter
from tests.support.asking import answer_from_view
from tests.support.factories import CLUSTER, LABS
from tests.support.slurm_polls import save_slurm_poll

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
LIMITS = LabLimits((("hoffman-lab", "hoffman-lab"),), {"hoffman-lab": 8}, {}, "overcap")
# version: (het job id, its second component's job id, nodes document, the real output file)
CASES = {
    "v0.0.38": (26, 27, "sinfo.json", "/tmp/hetfail-26-vm.out"),
    "v0.0.42": (3, 4, "nodes.json", "/tmp/hetfail-3-slurm2411.out"),
}
VERSIONS = sorted(CASES)


def _load(version: str, name: str) -> Any:
    return json.loads((FIXTURES / version / name).read_text())


def _request(folder: Path, version: str, squeue: str | None, sacct: str | None) -> DigestRequest:
    folder.mkdir(parents=True, exist_ok=True)
    listed = _load(version, squeue) if squeue is not None else {"jobs": []}
    (folder / "squeue.json").write_text(json.dumps(listed))
    (folder / "nodes.json").write_text(json.dumps(_load(version, CASES[version][2])))
    if sacct is not None:
        (folder / "sacct.json").write_text(json.dumps(_load(version, sacct)))
    else:  # the job has not ended: sacct has nothing new
        (folder / "sacct.json").write_text(json.dumps({"jobs": []}))
    return DigestRequest(
        squeue=(folder / "squeue.json",),
        nodes=folder / "nodes.json",
        sacct=folder / "sacct.json",
        limits=LIMITS,
        base=None,
    )


def _ended_squeue(version: str) -> str | None:
    # 24.11's default squeue no longer lists the ended job; 22.05's keeps it (MinJobAge).
    return "het_ended_squeue.json" if version == "v0.0.38" else None


@pytest.mark.parametrize("version", VERSIONS)
def test_a_running_het_job_is_one_row_with_all_its_gpus(tmp_path: Path, version: str) -> None:
    het_id, other_id, _, _ = CASES[version]
    digest = PollDigester().digest(_request(tmp_path, version, "het_running_squeue.json", None))
    rows = {row[0]: row for row in digest.changes.job_rows}
    assert set(rows) == {het_id}  # not 26 and 27
    db = open_db(tmp_path / "skybot.db")
    save_slurm_changes(db, CLUSTER, digest.changes, 1000.0)
    (job,) = load_snapshot(db, CLUSTER).jobs
    assert job.job_id == het_id and job.state == "RUNNING" and job.gpus == 3
    assert [(c.job_id, c.offset) for c in job.het_components] == [(het_id, 0), (other_id, 1)]
    # The lab's usage counts both components, each under its own account.
    (usage,) = digest.usages
    assert usage.gpus_used == 3


@pytest.mark.parametrize("version", VERSIONS)
def test_a_het_jobs_end_is_one_dm_with_each_components_outcome(
    tmp_path: Path, version: str
) -> None:
    het_id, other_id, _, real_output = CASES[version]
    digester = PollDigester()
    db = open_db(tmp_path / "skybot.db")
    running = digester.digest(_request(tmp_path / "a", version, "het_running_squeue.json", None))
    save_slurm_changes(db, CLUSTER, running.changes, 1000.0)
    ended = _request(tmp_path / "b", version, _ended_squeue(version), "het_ended_sacct.json")
    ended = replace(ended, base=running.generation)
    digest = digester.digest(ended)
    transitions = save_slurm_changes(db, CLUSTER, digest.changes, 1015.0)
    assert [(t.job.job_id, t.to_state) for t in transitions] == [(het_id, "FAILED")]
    notice = decide_job_notice(
        transitions[0], "all", Seen(1015.0), Config(), Config().default_cluster
    )
    assert notice is not None
    assert f"`{het_id}+0 failed (exit 3)`" in notice.text
    assert f"`{het_id}+1 failed (exit 3)`" in notice.text
    assert f"Output: `{real_output}`" in notice.text
    assert f"slurm-{other_id}" not in notice.text and f"-{other_id}-" not in notice.text


def test_24_11s_states_listing_names_components_by_their_own_ids(tmp_path: Path) -> None:
    """`squeue --only-job-state` lists the het job 3 as "3+0" and "4+1" (seen on 24.11)."""
    digester = PollDigester()
    states = tmp_path / "states.json"
    states.write_text(json.dumps(_load("v0.0.42", "het_running_states.json")))
    assert digester.changed_jobs(ChangedJobsRequest(states, None)) == ["3", "4"]
    first = _request(tmp_path / "a", "v0.0.42", "het_running_squeue.json", None)
    first = replace(first, states=states)
    digest = digester.digest(first)
    assert [row[0] for row in digest.changes.job_rows] == [3]
    # The next poll, nothing changed: nothing is fetched again, nothing is written.
    assert digester.changed_jobs(ChangedJobsRequest(states, digest.generation)) == []
    again = tmp_path / "c"
    again.mkdir()
    (again / "squeue.json").write_text(json.dumps({"jobs": []}))
    quiet = replace(first, squeue=(again / "squeue.json",), base=digest.generation)
    steady = digester.digest(quiet)
    assert not steady.changes.job_rows and not steady.changes.gone_job_ids


def _view(version: str) -> ClusterView:
    db = open_db(":memory:")
    nodes = parse_sinfo(decode_slurm_json(json.dumps(_load(version, CASES[version][2]))))
    live = parse_squeue(_load(version, "het_running_squeue.json")).records
    save_slurm_poll(db, live, [], nodes.records, 1000.0)
    return ClusterView(load_snapshot(db, CLUSTER), LABS)


def _ask(view: ClusterView, text: str) -> str:
    reply = answer_from_view(
        command_table(), view, text, team_id="T1", user_id="U1", cluster_user="alice", now=1010.0
    )
    return reply.text


@pytest.mark.parametrize("version", VERSIONS)
def test_sky_jobs_shows_one_row_and_one_cancel_for_the_whole_job(version: str) -> None:
    het_id, other_id, _, _ = CASES[version]
    view = _view(version)
    text = _ask(view, "jobs")
    assert "1 running (3 GPUs)" in text
    assert f"`{het_id}` (2 components)" in text and f"`{other_id}`" not in text
    (job,) = view.snapshot.jobs
    (button,) = cancel_buttons(view, [job])["elements"]
    # scancel of the het job's id cancels every component (tests/test_het_jobs_cluster.py).
    assert button["value"] == str(het_id)
    assert jobs_named(view, str(het_id)) == [job]


@pytest.mark.parametrize("version", VERSIONS)
def test_sky_why_answers_for_a_component(version: str) -> None:
    het_id, other_id, _, _ = CASES[version]
    view = _view(version)
    for asked in (f"{het_id}+1", f"{het_id}+0", str(other_id)):
        text = _ask(view, f"why {asked}")
        assert f"Job `{het_id}` (`het-fail.sh`" in text, asked
        assert f"`{het_id}+1 running`" in text, asked


def test_components_are_told_apart_when_only_one_fails() -> None:
    leader = Job(1, "x", "alice", "a", "p", "COMPLETED", het_job_id=1, het_offset=0, exit_code=0)
    other = Job(2, "x", "alice", "a", "p", "FAILED", het_job_id=1, het_offset=1, exit_code=2)
    loner = Job(3, "y", "bob", "a", "p", "RUNNING")
    folded = fold_het_jobs([other, loner, leader])
    assert [job.job_id for job in folded] == [1, 3]
    assert (folded[0].state, folded[0].exit_code) == ("FAILED", 2)
    # Folding a folded job changes nothing (the store's path and the poll's both fold).
    assert fold_het_jobs(folded) == folded


def test_sacct_reads_the_het_fields_of_both_generations() -> None:
    for version, (het_id, other_id, _, _) in CASES.items():
        jobs = parse_sacct(_load(version, "het_ended_sacct.json")).records
        assert sorted((j.job_id, j.het_job_id, j.het_offset) for j in jobs) == [
            (het_id, het_id, 0),
            (other_id, het_id, 1),
        ]


def test_an_exit_code_seen_while_a_component_completes_is_kept() -> None:
    """Seen on 22.05: the script's component ended (FAILED, exit 3 in squeue) while the other
    still completed; sacct then said FAILED with SUCCESS/0 for both (no exit code)."""
    leader = Job(1, "x", "alice", "a", "p", "FAILED", het_job_id=1, het_offset=0, exit_code=3)
    other = Job(2, "x", "alice", "a", "p", "COMPLETING", het_job_id=1, het_offset=1)
    (listed,) = fold_het_jobs([leader, other])
    assert listed.state == "COMPLETING"
    ended = [
        Job(1, "x", "alice", "a", "p", "FAILED", het_job_id=1, het_offset=0),
        Job(2, "x", "alice", "a", "p", "FAILED", het_job_id=1, het_offset=1),
    ]
    merged = merge_observations([listed], fold_het_jobs(ended))[1]
    assert (merged.state, merged.exit_code) == ("FAILED", 3)
    assert [c.exit_code for c in merged.het_components] == [3, None]


def _component(job_id: int, offset: int, state: str, **fields: Any) -> Job:
    return Job(job_id, "het", "alice", "hoffman-lab", "debug", state, het_job_id=job_id - offset,
               het_offset=offset, gpus_by_type={"a40": offset + 1}, **fields)  # fmt: skip


class _Links:
    def slack_users_of(self, user: str) -> list[tuple[str, str]]:
        return [("T1", "U1")]


async def _told(writer: StoreWriter) -> list[str]:
    """Every DM text the outbox holds after the notifier ran."""
    config = load_config(None)
    await process_transitions(writer, _Links(), config, config.default_cluster)
    return [str(row["text"]) for row in await writer.run(outbox_rows)]


async def test_a_het_end_waits_while_squeue_still_runs_a_component(writer: StoreWriter) -> None:
    """Issue 40 (CI: test_a_het_job_is_one_job): sacct had the cancelled leader's end while
    the other component still completed, and the DM named only `+0` and its GPU."""
    running = [_component(40, 0, "RUNNING"), _component(41, 1, "RUNNING")]
    await writer.run(save_slurm_poll, running, [], [], 1000.0)
    completing = [_component(40, 0, "CANCELLED", end_time=1005), _component(41, 1, "COMPLETING")]
    sacct = [_component(40, 0, "CANCELLED", end_time=1005)]
    await writer.run(save_slurm_poll, completing, sacct, [], 1010.0)
    assert await _told(writer) == []
    ended = [_component(40, 0, "CANCELLED", end_time=1005),
             _component(41, 1, "CANCELLED", end_time=1012)]  # fmt: skip
    await writer.run(save_slurm_poll, ended, ended, [], 1020.0)
    (dm,) = await _told(writer)
    assert "`40+0 cancelled`" in dm and "`40+1 cancelled`" in dm and "`a40:3`" in dm, dm


async def test_a_het_end_waits_for_sacct_to_list_every_component(writer: StoreWriter) -> None:
    """squeue no longer lists the job; slurmdbd has one component's end but not yet the
    other's: the end waits, then is told whole; past the wait, with every component."""
    running = [_component(40, 0, "RUNNING"), _component(41, 1, "RUNNING")]
    await writer.run(save_slurm_poll, running, [], [], 1000.0)
    partial = [_component(40, 0, "CANCELLED", end_time=1005)]
    await writer.run(save_slurm_poll, [], partial, [], 1010.0)
    assert await _told(writer) == []
    ended = [*partial, _component(41, 1, "CANCELLED", end_time=1006)]
    await writer.run(save_slurm_poll, [], ended, [], 1020.0)
    (dm,) = await _told(writer)
    assert "`40+0 cancelled`" in dm and "`40+1 cancelled`" in dm, dm

    running = [_component(50, 0, "RUNNING"), _component(51, 1, "RUNNING")]
    await writer.run(save_slurm_poll, running, [], [], 2000.0)
    lone = [_component(50, 0, "FAILED", end_time=2005, exit_code=3)]
    await writer.run(save_slurm_poll, [], lone, [], 2010.0)
    assert len(await _told(writer)) == 1
    await writer.run(save_slurm_poll, [], lone, [], 2005.0 + 121)
    dms = await _told(writer)
    assert len(dms) == 2 and "`50+0 failed (exit 3)`" in dms[1] and "`50+1 running`" in dms[1]
