"""Start and watch DMs name their cluster where skybot serves several, and read as always
where it serves one."""

from __future__ import annotations

import tomllib

from bot.config import parse_config
from core.gpu_watch import EXPIRED, FIRED, Outcome, Spot, expired_text, fired_text
from core.notice_cluster import NoticeCluster
from core.shared_config import shown_name
from core.start_notices import start_notice
from core.transitions import Transition
from tests.support.factories import job, watch

TWO = """
[[clusters]]
name = "skynet"
[[clusters]]
name = "nova"
source = "slurmrestd"
url = "unix:/run/nova.sock"
token_file = "/etc/skybot/nova.jwt"
"""


def test_only_a_bot_of_several_clusters_shows_a_cluster_name() -> None:
    two = parse_config(tomllib.loads(TWO))
    assert [shown_name(two, c) for c in two.clusters] == ["skynet", "nova"]
    one = parse_config({})
    assert shown_name(one, one.default_cluster) == ""


def test_a_start_dm_names_its_cluster_only_where_there_are_several() -> None:
    started = Transition(
        job(5, state="RUNNING", nodes="clippy", start_time=900), "PENDING", "RUNNING", 0
    )
    alone = start_notice(started, NoticeCluster("skynet"))
    named = start_notice(started, NoticeCluster("nova", "nova"))
    assert "Cluster" not in alone.text
    assert "Cluster `nova` · Partition" in named.text
    assert alone.key != named.key  # each cluster's job 5 is its own


def test_a_watch_dm_names_its_cluster_only_where_there_are_several() -> None:
    fired = Outcome(watch(3), FIRED, Spot("clippy", 2))
    assert " on cluster " not in fired_text(fired)
    assert "on `clippy` (2 idle) on cluster `nova` (watch #3)" in fired_text(fired, "nova")
    assert " on cluster `nova` ended after " in expired_text(watch(3), "nova")
    assert " on cluster " not in expired_text(Outcome(watch(3), EXPIRED).watch)
