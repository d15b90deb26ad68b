from core.lab_usage import idle_by_type, idle_gpus, lab_usage, usage_of_labs
from tests.factories import LABS, job, node


def test_usage_counts_running_gpus_by_user_and_type_against_the_cap() -> None:
    jobs = [
        job(1, user="alice", gpus_by_type={"a40": 2}),
        job(2, user="bob", gpus_by_type={"rtx_6000": 1}),
        job(3, user="bob", partition="debug", gpus_by_type={"a40": 1}),
        job(4, user="bob", state="PENDING", reason="AssocGrpGRES", gpus_by_type={"a40": 2}),
        job(5, user="carol", account="kira-lab", gpus_by_type={"a40": 4}),
        job(6, user="alice", account="overcap", partition="overcap", gpus_by_type={"": 3}),
        job(7, user="carol", account="overcap", partition="overcap", gpus_by_type={"a40": 1}),
    ]
    usage = lab_usage("hoffman-lab", "hoffman-lab", 4, jobs)
    assert usage.gpus_used == 4
    assert usage.by_user == {"alice": 2, "bob": 2}
    assert usage.by_type == {"a40": 3, "rtx_6000": 1}
    assert usage.at_cap and usage.headroom == 0
    assert [j.job_id for j in usage.pending_at_cap] == [4]
    # carol is not a hoffman-lab member, so her overcap job is not counted here.
    assert usage.overcap_by_user == {"alice": 3}


def test_members_from_associations_count_overcap_without_lab_jobs() -> None:
    jobs = [job(6, user="dave", account="overcap", partition="overcap", gpus_by_type={"a": 2})]
    usage = lab_usage("kira-lab", "kira-lab", None, jobs, members=["dave"])
    assert usage.overcap_by_user == {"dave": 2}
    assert usage.headroom is None and not usage.at_cap


def test_usage_of_labs_is_each_labs_usage_in_config_order() -> None:
    jobs = [
        job(1, user="alice", gpus_by_type={"a40": 2}),
        job(2, user="carol", account="kira-lab", gpus_by_type={"a40": 1}),
        job(3, user="dave", account="overcap", partition="overcap", gpus_by_type={"a40": 1}),
    ]
    caps = {"hoffman-lab": 4}
    members = {"kira-lab": frozenset({"dave"})}
    usages = usage_of_labs(LABS, jobs, caps.get, members, "overcap")
    assert usages == [
        lab_usage("hoffman-lab", "hoffman-lab", 4, jobs, (), "overcap"),
        lab_usage("kira-lab", "kira-lab", None, jobs, {"dave"}, "overcap"),
    ]
    assert [(u.lab, u.cap, u.gpus_used, u.overcap_gpus) for u in usages] == [
        ("hoffman-lab", 4, 2, 0),
        ("kira-lab", None, 1, 1),
    ]


def test_idle_gpus_skip_drained_nodes() -> None:
    nodes = [
        node("clippy", "a40", used=3),
        node("xaea-12", "rtx_6000"),
        node("baymax", "2080_ti", state="DRAINED"),
    ]
    assert idle_by_type(idle_gpus(nodes)) == {"a40": 1, "rtx_6000": 4}
    assert [(i.node, i.count) for i in idle_gpus(nodes)] == [("xaea-12", 4), ("clippy", 1)]
