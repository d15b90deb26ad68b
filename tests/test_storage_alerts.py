"""Hoarding pings and full-filesystem warnings (core/storage_alerts.py): pure decisions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from core.config_schema import NotificationsConfig
from core.records import DirectoryUsage, FilesystemUsage
from core.snapshot import ClusterSnapshot
from core.storage_alerts import FillState, filesystem_alerts, fill_step, hoarding_alerts
from tests.support.factories import directory_usage

ROOT = "/srv/hoffman-lab/flash9"
LABS = {ROOT: "hoffman-lab"}
TIB_KIB = 1024**3  # KiB in a TiB
WEEK1 = datetime(2024, 5, 6, 3, 0)
WEEK2 = datetime(2024, 5, 13, 3, 0)
POLICY = NotificationsConfig(filesystem_thresholds=(90.0, 95.0, 98.0), rearm_margin=3.0)


def report(
    directories: Sequence[DirectoryUsage] = (),
    filesystems: Sequence[FilesystemUsage] = (),
    previous_kib: Mapping[str, int] | None = None,
) -> ClusterSnapshot:
    """A storage scan as the snapshot holds it."""
    return ClusterSnapshot(
        directories=tuple(directories),
        filesystems=tuple(filesystems),
        previous_kib=dict(previous_kib or {}),
    )


def fs_at(percent: float, mount: str = ROOT) -> FilesystemUsage:
    size = 1000 * 1024**3
    used = int(size * percent / 100)
    return FilesystemUsage(mount, size, used, size - used)


# ------------------------------------------------------------------------------ hysteresis


def walk(percents: list[float]) -> list[float | None]:
    """The warning (threshold) each successive reading produces."""
    state = FillState()
    warned = []
    for percent in percents:
        state, crossed = fill_step(state, percent, POLICY)
        warned.append(crossed)
    return warned


def test_each_level_warns_once_on_the_way_up() -> None:
    assert walk([50, 89.9, 90, 91, 94.9, 95, 96, 97.9, 98, 99, 100]) == [
        None,
        None,
        90,
        None,
        None,
        95,
        None,
        None,
        98,
        None,
        None,
    ]


def test_a_jump_warns_once_for_the_highest_level_crossed() -> None:
    assert walk([80, 99, 97, 99]) == [None, 98, None, None]


def test_hovering_around_a_level_does_not_flap() -> None:
    assert walk([90.5, 89.5, 90.5, 87.1, 90.2]) == [90, None, None, None, None]


def test_rearmed_only_after_falling_the_margin_below() -> None:
    # 95 latched; 92.5 is within 3 points of 95 (still latched); 91.9 re-arms 95 but keeps 90.
    assert walk([96, 92.5, 95.5, 91.9, 95.0]) == [95, None, None, None, 95]
    # Emptied to 50 % re-arms everything: refilling warns at 90 again, then 95.
    assert walk([96, 50, 90, 95]) == [95, None, 90, 95]


def test_filesystem_alerts_carry_state_per_mount_and_unique_keys() -> None:
    other = "/srv/kira-lab/share4"
    state, alerts = filesystem_alerts(
        {}, report([], [fs_at(96), fs_at(40, other)], {}), POLICY, LABS
    )
    assert state == {ROOT: FillState(95.0, 1), other: FillState(0.0, 0)}
    assert [a.key for a in alerts] == [f"fs:{ROOT}:95:1"]
    state, alerts = filesystem_alerts(
        state, report([], [fs_at(97), fs_at(40, other)], {}), POLICY, LABS
    )
    assert alerts == []
    state, _ = filesystem_alerts(state, report([], [fs_at(10), fs_at(40, other)], {}), POLICY, LABS)
    state, alerts = filesystem_alerts(
        state, report([], [fs_at(96), fs_at(40, other)], {}), POLICY, LABS
    )
    assert [a.key for a in alerts] == [f"fs:{ROOT}:95:2"]


def test_filesystem_warning_names_free_space_largest_and_fastest_growing() -> None:
    dirs = [
        directory_usage("alice", 300 * 1024**2, root=ROOT),
        directory_usage("bob", 200 * 1024**2, root=ROOT),
        directory_usage("carol", 100 * 1024**2, root=ROOT),
        directory_usage("dave", 50 * 1024**2, root=ROOT),
        directory_usage("erin", 999 * 1024**2, root="/srv/elsewhere"),
    ]
    before = {f"{ROOT}/alice": 290 * 1024**2, f"{ROOT}/dave": 10 * 1024**2}
    _, alerts = filesystem_alerts({}, report(dirs, [fs_at(98.5)], before), POLICY, LABS)
    assert len(alerts) == 1
    assert alerts[0].text.splitlines() == [
        f"🔴 `{ROOT}` (`hoffman-lab`) is 98% full (past 98%): 15.0G free of 1000G.",
        f"Largest directories: `{ROOT}/alice` 300G, `{ROOT}/bob` 200G, `{ROOT}/carol` 100G.",
        f"Fastest growing since the previous report: `{ROOT}/dave` +40.0G, `{ROOT}/alice` +10.0G.",
        "Please free space before writing more; a full filesystem fails everyone's jobs.",
    ]


# ------------------------------------------------------------------------------ hoarding


HOARD = NotificationsConfig(
    hoard_threshold_bytes=10 * 1024**4, hoard_top_n=0, hoard_regrow_fraction=0.25
)


def test_hoarder_is_pinged_once_per_report_and_again_after_a_newer_report_still_over() -> None:
    big = directory_usage("alice", 12 * TIB_KIB, root=ROOT, updated=WEEK1)
    small = directory_usage("bob", 1 * TIB_KIB, root=ROOT, updated=WEEK1)
    fs = [fs_at(91)]
    state, alerts = hoarding_alerts(
        {}, report([big, small], fs, {}), HOARD, LABS, {"alice": ["U1"]}
    )
    assert [a.key for a in alerts] == [f"hoard:{ROOT}/alice:2024-05-06T03:00:00"]
    assert alerts[0].text.splitlines()[0] == (
        f"📦 <@U1>: `{ROOT}/alice` holds 12.0T (first report), over the 10.0T mark."
    )
    assert alerts[0].text.splitlines()[1] == f"`{ROOT}` is 91% full with 90.0G free."
    # The same report, polled again and again: nothing more.
    for _ in range(3):
        state, alerts = hoarding_alerts(state, report([big, small], fs, {}), HOARD, LABS)
        assert alerts == []
    # Next week's report, still over (even though it shrank a bit): pinged again.
    later = directory_usage("alice", 11 * TIB_KIB, root=ROOT, updated=WEEK2)
    previous = {later.path: 12 * TIB_KIB}
    state, alerts = hoarding_alerts(state, report([later], fs, previous), HOARD, LABS)
    assert [a.key for a in alerts] == [f"hoard:{ROOT}/alice:2024-05-13T03:00:00"]
    assert alerts[0].text.splitlines()[0] == (
        f"📦 `alice`: `{ROOT}/alice` holds 11.0T (-1.0T since the previous report), "
        "over the 10.0T mark."
    )
    assert state[later.path].updated == WEEK2


def test_a_newer_report_under_the_mark_is_quiet() -> None:
    week1 = directory_usage("alice", 12 * TIB_KIB, root=ROOT, updated=WEEK1)
    state, _ = hoarding_alerts({}, report([week1], [], {}), HOARD)
    cleaned = directory_usage("alice", 2 * TIB_KIB, root=ROOT, updated=WEEK2)
    assert hoarding_alerts(state, report([cleaned], [], {}), HOARD)[1] == []


def test_top_n_per_lab_repings_only_after_regrowth() -> None:
    policy = NotificationsConfig(hoard_threshold_bytes=0, hoard_top_n=1, hoard_regrow_fraction=0.25)
    kira = "/srv/kira-lab/share4"
    labs = {ROOT: "hoffman-lab", kira: "kira-lab"}
    week1 = [
        directory_usage("alice", 4 * TIB_KIB, root=ROOT, updated=WEEK1),
        directory_usage("bob", 3 * TIB_KIB, root=ROOT, updated=WEEK1),
        directory_usage("carol", 1 * TIB_KIB, root=kira, updated=WEEK1),
    ]
    state, alerts = hoarding_alerts({}, report(week1, [], {}), policy, labs)
    assert sorted(a.key.split(":")[1] for a in alerts) == [f"{ROOT}/alice", f"{kira}/carol"]
    assert alerts[0].text.splitlines()[0] == (
        f"📦 `alice`: `{ROOT}/alice` holds 4.0T (first report), the largest in `hoffman-lab`."
    )
    # A week later alice grew 10 % (< 25 %): quiet. carol grew 50 %: pinged again.
    week2 = [
        directory_usage("alice", int(4.4 * TIB_KIB), root=ROOT, updated=WEEK2),
        directory_usage("bob", 3 * TIB_KIB, root=ROOT, updated=WEEK2),
        directory_usage("carol", int(1.5 * TIB_KIB), root=kira, updated=WEEK2),
    ]
    state, alerts = hoarding_alerts(state, report(week2, [], {}), policy, labs)
    assert [a.key.split(":")[1] for a in alerts] == [f"{kira}/carol"]


def test_hoarding_disabled_when_no_threshold_and_no_top_n() -> None:
    big = directory_usage("alice", 500 * TIB_KIB, root=ROOT)
    assert hoarding_alerts(
        {}, report([big], [], {}), NotificationsConfig(hoard_threshold_bytes=0, hoard_top_n=0)
    ) == ({}, [])


def test_owner_names_are_inert_when_not_linked() -> None:
    odd = directory_usage("<!here>", 12 * TIB_KIB, root=ROOT)
    _, alerts = hoarding_alerts({}, report([odd], [], {}), HOARD)
    assert "<!here>" not in alerts[0].text and "&lt;!here&gt;" in alerts[0].text
