"""One bot, several clusters: which cluster a command, a click and a DM are about, how each
names it where there are several (and says nothing new where there is one), and the refusal
of actions on a cluster skybot only reads."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import msgspec
import pytest

from bot.cluster_readers import close_every, every_cluster
from bot.cluster_wing import runner_call
from bot.polling import poll_jobs
from core.chart_specs import LAB_GPUS, ChartSpec
from core.cluster_config import ClusterConfig
from core.config_schema import Config, parse_config
from core.job_notices import Seen, decide_job_notice
from core.runner_contract import cancel_request
from core.transitions import Transition
from handlers.buttons.registry import on_cluster
from handlers.charts import chart_caption
from handlers.clicks import Click
from handlers.clusters import ClusterDesk, ClusterDesks, single_desk
from handlers.command_words import split_words
from handlers.commands import command_table
from handlers.home import linked_blocks
from handlers.reply import Reply
from handlers.request import CommandRequest
from handlers.router import UsageError, dispatch
from handlers.services import Services
from store.writer import StoreWriter
from tests.support.factories import job, make_snapshot, make_view, node
from tests.support.two_cluster_desks import TWO_CLUSTERS, constant_view, desks_of, two_clusters

TABLE = command_table()


async def ask(desks: ClusterDesks, text: str) -> Reply:
    request = CommandRequest(team_id="T", user_id="U", text=text, now=1_000.0)
    return await dispatch(TABLE, request, desks.default.view(), desks=desks)


def test_cluster_flag_is_taken_out_anywhere_in_the_text() -> None:
    assert split_words("gpus --cluster nova --here").cluster == "nova"
    assert split_words("gpus --cluster nova --here").words == ["gpus"]
    assert split_words("--cluster=nova jobs alice").words == ["jobs", "alice"]
    assert split_words("gpus").cluster is None
    with pytest.raises(UsageError, match="--cluster NAME"):
        split_words("gpus --cluster")


async def test_a_command_answers_from_the_cluster_it_names() -> None:
    desks = desks_of(two_clusters(), {"skynet": "a40", "nova": "h100"})
    default = await ask(desks, "free")
    assert "a40" in default.text and "h100" not in default.text
    assert "On cluster `skynet`." in default.text
    flagged = await ask(desks, "free --cluster nova")
    assert "h100" in flagged.text and "a40" not in flagged.text
    assert "On cluster `nova`." in flagged.text
    # A lab belongs to one cluster: naming it is enough.
    by_lab = await ask(desks, "gpus kira-lab")
    assert "h100" in by_lab.text and "On cluster `nova`." in by_lab.text


async def test_what_is_the_same_on_every_cluster_is_not_named() -> None:
    desks = desks_of(two_clusters(), {"skynet": "a40", "nova": "h100"})
    assert "On cluster" not in (await ask(desks, "help")).text
    assert "On cluster" not in (await ask(desks, "help --cluster nova")).text


async def test_an_unknown_cluster_is_a_usage_error_naming_the_clusters() -> None:
    desks = desks_of(two_clusters(), {"skynet": "a40", "nova": "h100"})
    reply = await ask(desks, "free --cluster orion")
    assert "no cluster called `orion`" in reply.text
    assert "`skynet`" in reply.text and "`nova`" in reply.text


async def test_one_cluster_answers_read_as_they_always_have() -> None:
    config = parse_config({})
    view = make_view(make_snapshot(nodes=[node("n1", "a40")]))
    request = CommandRequest(team_id="T", user_id="U", text="free", now=1_000.0)
    before = await dispatch(TABLE, request, view)
    after = await dispatch(TABLE, request, view, desks=single_desk(config, lambda: view, None))
    assert after == before
    assert "On cluster" not in after.text


async def test_each_clusters_readers_and_polls_are_built_from_its_own_settings(
    tmp_path: Path,
) -> None:
    """nova's pollers and polls take nova's ClusterConfig (its [slurm], its labs), not the
    first cluster's through a Config rewritten to look like nova's."""
    data = msgspec.json.decode(msgspec.json.encode(TWO_CLUSTERS))
    data["database"] = {"path": str(tmp_path / "skybot.db")}
    data["clusters"][1]["slurm"] = {"poll_seconds": 7, "caps_poll_seconds": 70}
    data["clusters"][1]["labs"][0]["storage_roots"] = ["/srv/kira"]
    config = parse_config(data)
    writer = StoreWriter(config.database.path)
    readers = every_cluster(config, writer)
    try:
        nova = readers[1]
        assert (nova.poller.cluster, nova.storage.cluster) == ("nova", "nova")
        assert nova.storage.roots == ["/srv/kira"] and readers[0].storage.roots == []
        polls = poll_jobs(nova.cluster, config, nova.poller, nova.storage, _nothing, default=False)
        seconds = {poll.name: poll.seconds for poll in polls if poll.cluster == "nova"}
        assert seconds["slurm@nova"] == 7 and seconds["caps@nova"] == 70
        assert readers[0].poller.cluster == "skynet"
    finally:
        await close_every(readers)
        writer.close()


async def _nothing() -> None:
    return None


def test_a_click_naming_a_cluster_acts_on_that_cluster() -> None:
    desks = desks_of(two_clusters(), {"skynet": "a40", "nova": "h100"})
    click = Click("T", "U", "skybot_cancel_job:nova/42", "nova/42", True)
    chosen = on_cluster(click, desks)
    assert chosen is not None and chosen.name == "nova"
    # No cluster named: the default one's; a cluster this bot lacks: none (refused).
    default = on_cluster(Click("T", "U", "x", "42", True), desks)
    assert default is not None and default.name == "skynet"
    assert on_cluster(Click("T", "U", "x", "orion/42", True), desks) is None


async def test_own_jobs_on_another_cluster_carry_its_name_in_their_buttons() -> None:
    config = two_clusters()
    data = json.loads(json.dumps(TWO_CLUSTERS))
    data["clusters"][1]["actions"] = "runner"
    config = parse_config(data)
    snapshot = make_snapshot(jobs=[job(7, user="alice", state="RUNNING")])
    views = {c.name: make_view(snapshot, c.labs, c) for c in config.clusters}
    desks = ClusterDesks([ClusterDesk(c, constant_view(views[c.name])) for c in config.clusters])
    view = views["skynet"]
    request = CommandRequest(
        team_id="T", user_id="U", text="jobs --cluster nova", cluster_user="alice", now=1_000.0
    )
    services = Services(config, identity=None, runner=None)  # type: ignore[arg-type]
    reply = await dispatch(TABLE, request, view, services, desks=desks)
    values = [
        element["value"]
        for block in reply.blocks
        if block["type"] == "actions"
        for element in block["elements"]
    ]
    assert values == ["nova/7"]


def ended_transition() -> Transition:
    ended = job(7, user="alice", state="COMPLETED", start_time=100, end_time=500)
    return Transition(ended, "RUNNING", "COMPLETED", 0)


def test_job_dms_name_the_cluster_only_where_there_are_several() -> None:
    config = two_clusters()
    notice = decide_job_notice(ended_transition(), "all", _seen(), config, config.clusters[1])
    assert notice is not None and "Cluster `nova`" in notice.text
    alone = decide_job_notice(
        ended_transition(), "all", _seen(), parse_config({}), parse_config({}).default_cluster
    )
    assert alone is not None and "Cluster" not in alone.text


def _seen() -> Seen:
    return Seen(at=600.0)


@pytest.fixture
def echoing_sudo(tmp_path: Path) -> Path:
    """A stand-in for sudo that answers with the request it was sent."""
    script = tmp_path / "sudo"
    script.write_text(
        "#!/usr/bin/python3\nimport json, sys\n"
        'print(json.dumps({"ok": True, "job_id": "7", "sent": json.load(sys.stdin)}))\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


async def test_the_runner_is_told_the_clusters_name_never_a_path(echoing_sudo: Path) -> None:
    data = json.loads(json.dumps(TWO_CLUSTERS))
    data["clusters"][1]["actions"] = "runner"
    data["runner"] = {"sudo": str(echoing_sudo)}
    config = parse_config(data)
    nova = runner_call(config, config.clusters[1])
    reply = await nova("alice", cancel_request("7"))
    assert reply["sent"]["cluster"] == "nova"
    # The first cluster is runner.toml's top level: the request is today's, with no cluster.
    alone_config = parse_config({"runner": {"sudo": str(echoing_sudo)}})
    alone = runner_call(alone_config, alone_config.default_cluster)
    assert "cluster" not in (await alone("alice", cancel_request("7")))["sent"]


async def test_actions_on_a_cluster_read_through_slurmrestd_are_refused(
    echoing_sudo: Path,
) -> None:
    data = json.loads(json.dumps(TWO_CLUSTERS))
    data["runner"] = {"sudo": str(echoing_sudo)}
    config = parse_config(data)
    nova = runner_call(config, config.clusters[1])
    reply = await nova("alice", cancel_request("7"))
    assert reply == {
        "ok": False,
        "error": "skybot reads nova through slurmrestd and does not act there: "
        "use sbatch/scancel on nova's login node.",
    }


async def test_actions_on_a_read_only_cluster_are_refused_before_anything_starts() -> None:
    config = two_clusters()
    snapshot = make_snapshot(jobs=[job(7, user="alice", state="PENDING")])
    views = {c.name: make_view(snapshot, c.labs, c) for c in config.clusters}
    desks = ClusterDesks(
        [ClusterDesk(c, constant_view(views[c.name]), _services(config)) for c in config.clusters]
    )
    view = views["skynet"]
    request = CommandRequest(
        team_id="T", user_id="U", text="cancel 7 --cluster nova", cluster_user="alice"
    )
    reply = await dispatch(TABLE, request, view, _services(config), desks=desks)
    assert reply.text == (
        "skybot reads nova through slurmrestd and does not act there: "
        "use sbatch/scancel on nova's login node."
    )


def _services(config: Config) -> Services:
    # Neither is reached: the refusal comes first.
    return Services(config, identity=None, runner=None)  # type: ignore[arg-type]


def test_the_home_tab_lists_jobs_per_cluster_with_their_buttons() -> None:
    config = two_clusters()
    skynet = make_view(make_snapshot(jobs=[job(1, user="alice", state="RUNNING")]))
    nova = make_view(make_snapshot(jobs=[job(2, user="alice", state="RUNNING")]))
    # Each cluster's view knows it (a view that names none, as one cluster's here, names none).
    skynet = make_view(skynet.snapshot, cluster=config.clusters[0])
    nova = make_view(nova.snapshot, cluster=make_acting(config.clusters[1]))
    clusters = [("skynet", skynet), ("nova", nova)]
    blocks = linked_blocks(skynet, "alice", "end", True, 1_000.0, clusters=clusters)
    headers = [b["text"]["text"] for b in blocks if b["type"] == "header"]
    assert "Your jobs on skynet" in headers and "Your jobs on nova" in headers
    values = [e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert values == ["skynet/1", "nova/2"]
    # One cluster: as before.
    alone = linked_blocks(make_view(skynet.snapshot), "alice", "end", True, 1_000.0)
    assert "Your jobs" in [b["text"]["text"] for b in alone if b["type"] == "header"]
    assert [e["value"] for b in alone if b["type"] == "actions" for e in b["elements"]] == ["1"]


def make_acting(cluster: ClusterConfig) -> ClusterConfig:
    return msgspec.structs.replace(cluster, actions="runner")


def test_charts_name_the_cluster_and_find_any_clusters_lab() -> None:
    spec = ChartSpec(LAB_GPUS, "kira-lab", 0.0, 7 * 86400.0)
    assert chart_caption(spec, None, "nova").startswith("*`kira-lab`* on `nova`:")
    assert " on " not in chart_caption(spec)
    config = two_clusters()
    found = config.lab_anywhere("KIRA-lab")
    assert found is not None and found[0] == config.clusters[1] and found[1].name == "kira-lab"
    assert config.lab_anywhere("hoffman-lab") == (config.clusters[0], config.clusters[0].labs[0])
    assert config.lab_anywhere("orion-lab") is None
