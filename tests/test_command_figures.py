"""skybot's per-ack command figures read exactly as the prometheus_client Counter and
Histogram they replace (bot/metrics.py CommandFigures), creation times aside."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from bot.metrics import _FAST, CommandFigures

OBSERVED = [
    ("gpus", 0.0004),
    ("gpus", 0.0005),  # on a bound: counted in its bucket (le)
    ("help", 0.0049),
    ("unknown", 0.3),
    ("gpus", 7.0),  # past every bound: +Inf only
    ("jobs", 0.0),
]


def exposition(registry: CollectorRegistry) -> list[str]:
    text = generate_latest(registry).decode()
    # When each series was made differs between the two; its presence must not.
    return [re.sub(r"(_created(\{[^}]*\})?) \S+$", r"\1 T", line) for line in text.splitlines()]


def test_command_figures_read_as_a_counter_and_a_histogram() -> None:
    reference = CollectorRegistry()
    counter = Counter(*CommandFigures.COUNTER, ["command"], registry=reference)
    histogram = Histogram(*CommandFigures.HISTOGRAM, buckets=_FAST, registry=reference)
    ours = CollectorRegistry()
    figures = CommandFigures()
    ours.register(figures)
    assert exposition(ours) == exposition(reference)  # nothing observed yet
    for command, seconds in OBSERVED:
        counter.labels(command).inc()
        histogram.observe(seconds)
        figures.observe(command, seconds)
    assert exposition(ours) == exposition(reference)
    assert 'skybot_commands_total{command="gpus"} 3.0' in exposition(ours)
