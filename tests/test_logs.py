import json
import logging
import sys

from bot.logs import JsonLines


def test_json_lines_carry_fields_and_the_exception() -> None:
    try:
        raise ValueError("bad poll")
    except ValueError:
        exc_info = sys.exc_info()
    record = logging.getLogger("scheduler.slurm_poller").makeRecord(
        "scheduler.slurm_poller",
        logging.WARNING,
        __file__,
        1,
        "slurm poll failed (next try in %d s)",
        (30,),
        exc_info,
    )
    entry = json.loads(JsonLines().format(record))
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "scheduler.slurm_poller"
    assert entry["message"] == "slurm poll failed (next try in 30 s)"
    assert "ValueError: bad poll" in entry["exception"]
    assert entry["time"].endswith("+00:00")
