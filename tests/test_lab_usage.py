from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from core.lab_usage import (
    LabUsage,
    holds_gpus,
    idle_by_type,
    idle_gpus,
    is_held_by_cap,
    lab_usage,
    usage_of_labs,
)
from core.records import Job
from tests.support.factories import LABS, job, make_snapshot, make_view, node


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


def _usage_by_definition(
    lab: str, account: str, cap: int | None, jobs: list[Job], members: set[str]
) -> LabUsage:
    """One lab's usage as the module doc defines it, one plain pass at a time."""
    members = members | {j.user for j in jobs if j.account == account}
    own = [j for j in jobs if j.account == account]
    by_user: Counter[str] = Counter()
    by_type: Counter[str] = Counter()
    for j in own:
        if holds_gpus(j):
            by_user[j.user] += j.gpus
            by_type.update(j.gpus_by_type)
    overcap: Counter[str] = Counter()
    for j in jobs:
        if j.account == "overcap" and j.user in members and holds_gpus(j):
            overcap[j.user] += j.gpus

    def nonzero(counts: Counter[str]) -> dict[str, int]:
        return dict(
            sorted(((k, v) for k, v in counts.items() if v), key=lambda kv: (-kv[1], kv[0]))
        )

    return LabUsage(
        lab=lab,
        account=account,
        cap=cap,
        gpus_used=sum(by_user.values()),
        by_user=nonzero(by_user),
        by_type=nonzero(by_type),
        overcap_by_user=nonzero(overcap),
        pending_at_cap=tuple(sorted((j for j in own if is_held_by_cap(j)), key=lambda j: j.job_id)),
        pending=sum(j.state == "PENDING" for j in own),
    )


_jobs = st.lists(
    st.builds(
        lambda i, user, account, state, reason, gpus: job(
            i, user=user, account=account, state=state, reason=reason, gpus_by_type=gpus
        ),
        st.integers(1, 10_000),
        st.sampled_from(["alice", "bob", "carol", "dave"]),
        st.sampled_from(["hoffman-lab", "kira-lab", "overcap", "elsewhere"]),
        st.sampled_from(["RUNNING", "PENDING", "COMPLETING", "COMPLETED", "SUSPENDED"]),
        st.sampled_from(["", "AssocGrpGRES", "Priority", "QOSMaxGRESPerUser"]),
        st.dictionaries(st.sampled_from(["a40", "rtx_6000", ""]), st.integers(0, 8), max_size=2),
    ),
    max_size=40,
)


@given(jobs=_jobs, members=st.sets(st.sampled_from(["alice", "bob", "carol", "dave"])))
def test_one_pass_for_all_labs_counts_what_each_labs_definition_counts(
    jobs: list[Job], members: set[str]
) -> None:
    caps = {"hoffman-lab": 4}
    usages = usage_of_labs(LABS, jobs, caps.get, {"kira-lab": members}, "overcap")
    assert usages == [
        _usage_by_definition("hoffman-lab", "hoffman-lab", 4, jobs, set()),
        _usage_by_definition("kira-lab", "kira-lab", None, jobs, members),
    ]


def test_a_view_answers_from_the_usage_its_poll_counted_for_the_same_accounts() -> None:
    lab = LABS[0]
    jobs = (job(1, account=lab.account, gpus_by_type={"a40": 2}),)
    polled = LabUsage(lab.name, lab.account, None, gpus_used=7)
    counted = lab_usage(lab.name, lab.account, None, jobs)
    assert counted.gpus_used == 2
    for key, expected in [
        ((lab.name, lab.account, "overcap"), polled),
        # Counted for another account or overcap account (the configuration changed since
        # that poll): counted again from the jobs.
        ((lab.name, "other-account", "overcap"), counted),
        ((lab.name, lab.account, "other-overcap"), counted),
    ]:
        view = make_view(make_snapshot(jobs=jobs, lab_usages={key: polled}))
        assert view.usage(lab) == expected
