"""Every log line about a cluster names it: "cluster nova: slurm poll failed (…)".

A poll loop (scheduler/interval.py) and a cluster's submission worker run in tasks of their
own; each says which cluster it works for in `WORKING_FOR`, a context variable that the tasks
they start inherit. The log record factory installed by `name_clusters_in_logs` prefixes each
record made in such a task with its cluster, and gives it a `cluster` attribute (the JSON
lines carry it), so the sources, the poll worker and the watchers need not pass a name down
to say it.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

WORKING_FOR: contextvars.ContextVar[str] = contextvars.ContextVar("skybot_cluster", default="")

_installed = False


def name_clusters_in_logs() -> None:
    """Install the record factory (once per process, over whatever factory was there)."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        cluster = WORKING_FOR.get()
        record.cluster = cluster
        if cluster and isinstance(record.msg, str):
            record.msg = f"cluster {cluster}: {record.msg}"
        return record

    logging.setLogRecordFactory(factory)
