"""Charts: the pictures say what they should (labels, a cap line where the cap is), and the
history behind them and the digest is queried and accounted correctly."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.image import imread

from core.chart_specs import LAB_DISK, LAB_GPUS, ChartSpec, SizeSample, UsageSample
from core.charts import CAP_COLOUR, directory_growth_figure, lab_gpu_figure, png_bytes
from core.gpu_hours import credit_poll
from core.lab_usage import LabUsage
from store.db import open_db
from store.history import (
    directory_growth,
    directory_size_series,
    gpu_hours_by_user,
    lab_usage_samples,
    requeues_by_user,
    save_lab_usage,
)
from tests.support.factories import CLUSTER

DAY = 86400.0
NOW = datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp()
SINCE = NOW - 7 * DAY


def week_of_samples(cap: int = 4) -> list[UsageSample]:
    """A sample every 15 minutes: 2 GPUs by day, the whole cap by night, overcap on top."""
    samples = []
    at = SINCE
    while at < NOW:
        hour = datetime.fromtimestamp(at, UTC).hour
        used = cap if hour < 8 else 2
        samples.append(UsageSample(at, used, cap, 3 if hour < 8 else 0))
        at += 900
    return samples


def pixels(figure: Figure) -> np.ndarray:
    return imread(io.BytesIO(png_bytes(figure)))[:, :, :3]


def rows_in_colour(image: np.ndarray, colour: str, tolerance: float = 0.08) -> dict[int, int]:
    """Row -> how many pixels of that row are `colour`."""
    close = np.all(np.abs(image - np.array(to_rgb(colour))) < tolerance, axis=2)
    counts = close.sum(axis=1)
    return {int(row): int(n) for row, n in enumerate(counts) if n}


def test_gpu_chart_has_labels_title_and_legend() -> None:
    figure = lab_gpu_figure("hoffman-lab", week_of_samples(), SINCE, NOW, UTC, gap_seconds=3600)
    (ax,) = figure.axes
    assert ax.get_ylabel() == "GPUs"
    assert ax.get_xlabel() == "time (UTC)"
    assert "hoffman-lab" in ax.get_title() and "cap" in ax.get_title()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["GPUs in hoffman-lab", "with overcap (preemptible)", "cap (4 GPUs)"]


@pytest.mark.parametrize("cap", [4, 9])
def test_cap_line_is_drawn_across_the_picture_at_the_cap(cap: int) -> None:
    figure = lab_gpu_figure("hoffman-lab", week_of_samples(cap), SINCE, NOW, UTC, 3600)
    image = pixels(figure)
    height, width = image.shape[:2]
    (ax,) = figure.axes
    # Where y = cap lands in the PNG (matplotlib's display origin is the bottom left).
    _, y = ax.transData.transform((ax.get_xlim()[0], cap))
    expected_row = height - y
    red_rows = {r: n for r, n in rows_in_colour(image, CAP_COLOUR).items() if n > width * 0.5}
    assert red_rows, "no red cap line across the chart"
    assert all(abs(row - expected_row) <= 3 for row in red_rows), (red_rows, expected_row)


def test_a_gap_in_the_samples_breaks_the_line() -> None:
    samples = [s for s in week_of_samples() if not SINCE + 3 * DAY < s.at < SINCE + 4 * DAY]
    figure = lab_gpu_figure("hoffman-lab", samples, SINCE, NOW, UTC, gap_seconds=3600)
    image = pixels(figure)
    (ax,) = figure.axes
    # A column in the middle of the gap has no cap pixels; one outside it has.
    height = image.shape[0]
    red = np.all(np.abs(image - np.array(to_rgb(CAP_COLOUR))) < 0.08, axis=2)

    def column(at: float) -> int:
        x, _ = ax.transData.transform((ax.convert_xunits(datetime.fromtimestamp(at, UTC)), 0))
        return round(x)

    assert not red[:, column(SINCE + 3.5 * DAY)].any()
    assert red[:, column(SINCE + 1.5 * DAY)].any()
    assert height == 450


def test_no_samples_still_makes_a_readable_picture() -> None:
    figure = lab_gpu_figure("kira-lab", [], SINCE, NOW, UTC, 3600)
    (ax,) = figure.axes
    assert any("No GPU use recorded" in t.get_text() for t in ax.texts)
    assert png_bytes(figure).startswith(b"\x89PNG")


def test_disk_chart_picks_a_unit_and_names_each_directory() -> None:
    series = {
        "alice": [SizeSample(NOW - 14 * DAY, 2 * 1024**3), SizeSample(NOW, 3 * 1024**3)],
        "bob": [SizeSample(NOW, 512 * 1024**2)],
    }
    figure = directory_growth_figure("kira-lab", series, NOW - 84 * DAY, NOW, UTC)
    (ax,) = figure.axes
    assert ax.get_ylabel() == "size (TiB)"
    assert ax.get_xlabel() == "weekly disk-usage.txt reports"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["alice", "bob"]
    assert list(ax.lines[0].get_ydata()) == [2.0, 3.0]


def test_chart_spec_survives_the_outbox_as_json() -> None:
    spec = ChartSpec(LAB_DISK, "kira-lab", SINCE, NOW)
    assert ChartSpec.from_json(spec.to_json()) == spec
    assert spec.filename == "kira-lab-disk.png"
    assert ChartSpec(LAB_GPUS, "x", 0, 1).filename == "x-gpus.png"


def usage(lab: str, by_user: dict[str, int], overcap: dict[str, int] | None = None) -> LabUsage:
    return LabUsage(
        lab, lab, 4, sum(by_user.values()), by_user=by_user, overcap_by_user=overcap or {}
    )


def test_gpu_seconds_credit_the_interval_since_the_last_poll_capped_by_outages() -> None:
    usages = [usage("hoffman-lab", {"alice": 2}, {"bob": 1})]
    assert credit_poll(usages, 100.0, None, 45.0) == []
    credits = {(c.user, c.overcap): c.seconds for c in credit_poll(usages, 115.0, 100.0, 45.0)}
    assert credits == {("alice", False): 30.0, ("bob", True): 15.0}
    # skybot was down for an hour: only max_interval is credited.
    after_outage = credit_poll(usages, 3715.0, 115.0, 45.0)
    assert {c.seconds for c in after_outage} == {90.0, 45.0}


def test_history_sums_gpu_hours_per_user_and_answers_the_chart_queries() -> None:
    db = open_db(":memory:")
    for i in range(241):  # one hour of 15 s polls
        save_lab_usage(
            db, CLUSTER, [usage("hoffman-lab", {"alice": 2}, {"bob": 1})], 15.0 * i, 90, 45.0
        )
    hours = gpu_hours_by_user(db, CLUSTER, "hoffman-lab", 0, 7200)
    assert hours == {("alice", False): pytest.approx(2.0), ("bob", True): pytest.approx(1.0)}
    assert gpu_hours_by_user(db, CLUSTER, "kira-lab", 0, 7200) == {}
    samples = lab_usage_samples(db, CLUSTER, "hoffman-lab", 1800, 3600)
    assert len(samples) == 121 and samples[0] == UsageSample(1800, 2, 4, 1)


def test_directory_queries_follow_the_weekly_reports() -> None:
    db = open_db(":memory:")
    rows = [
        ("/srv/kira-lab/share4/carol", "2026-11-09T04:00:00", 100),
        ("/srv/kira-lab/share4/carol", "2026-11-16T04:00:00", 150),
        ("/srv/kira-lab/share4/carol", "2026-11-23T04:00:00", 400),
        ("/srv/kira-lab/share4/dave", "2026-11-23T04:00:00", 300),
        ("/srv/hoffman-lab/flash9/alice", "2026-11-23T04:00:00", 999),
    ]
    db["directory_history"].insert_all(
        {"cluster": CLUSTER, "path": p, "updated": u, "kib": k} for p, u, k in rows
    )
    since = datetime(2026, 11, 17).timestamp()
    until = datetime(2026, 11, 24).timestamp()
    assert directory_growth(db, "nova", ["/srv/kira-lab/share4"], since, until) == {}
    assert directory_growth(db, CLUSTER, ["/srv/kira-lab/share4"], since, until) == {
        "/srv/kira-lab/share4/carol": (150, 400),
        "/srv/kira-lab/share4/dave": (300, 300),
    }
    series = directory_size_series(db, CLUSTER, ["/srv/kira-lab/share4"], 0, until, limit=1)
    assert list(series) == ["carol"]
    assert [s.kib for s in series["carol"]] == [100, 150, 400]


def test_requeues_are_counted_for_the_labs_members_only() -> None:
    db = open_db(":memory:")
    for user, state, at in [
        ("alice", "REQUEUED", 10),
        ("alice", "REQUEUED", 20),
        ("alice", "COMPLETED", 30),
        ("carol", "REQUEUED", 10),
        ("bob", "REQUEUED", 99999),
    ]:
        db["job_transitions"].insert(
            {
                "cluster": CLUSTER,
                "job_id": 1,
                "user": user,
                "from_state": "RUNNING",
                "to_state": state,
                "restarts": 1,
                "at": at,
                "record": "{}",
            }
        )
    assert requeues_by_user(db, CLUSTER, ["alice", "bob"], 0, 100) == {"alice": 2}
    assert requeues_by_user(db, CLUSTER, [], 0, 100) == {}
