"""`/sky submit`'s per-minute limit counts submissions that went into the queue, not those the
runner refused (issue 27 item 9: three mistyped paths used up the minute, and the corrected
fourth was refused). The command and the worker are the real ones; the runner is a stand-in
that refuses the path as the real one does."""

from __future__ import annotations

import time
from typing import Any

from bot.config import IdentityConfig, load_config
from handlers.commands import command_table
from handlers.identity import IdentityDirectory
from handlers.services import Services
from scheduler.submit_worker import SubmissionWorker
from store.submissions import submission_counts
from store.writer import StoreWriter
from tests.support.asking import answer_with_services
from tests.support.factories import make_snapshot, make_view


class PathCheckingRunner:
    async def __call__(self, user: str, request: dict[str, Any]) -> dict[str, Any]:
        if request["script"] != "~/train.sh":
            return {"ok": False, "error": f"I could not find {request['script']!r}."}
        return {"ok": True, "job_id": 4242, "cluster": "test"}


async def test_refused_submissions_do_not_use_up_the_minute(writer: StoreWriter) -> None:
    config = load_config(None)
    worker = SubmissionWorker(config.default_cluster, config, writer, PathCheckingRunner())
    identity = IdentityDirectory(IdentityConfig(links={"T1/UALICE": "alice"}), writer)
    services = Services(config, identity, PathCheckingRunner(), submissions=worker, writer=writer)
    view = make_view(make_snapshot())

    async def submit(path: str) -> str:
        reply = await answer_with_services(
            command_table(),
            view,
            services,
            f"submit {path}",
            team_id="T1",
            user_id="UALICE",
            cluster_user="alice",
            now=time.time(),
        )
        await worker.perform_next()
        return reply.text

    assert config.submit.max_per_minute == 3
    for typo in ("~/trian.sh", "~/train.hs", "~/tran.sh"):
        assert (await submit(typo)).startswith("Queued as #")
    assert (await submit("~/train.sh")).startswith("Queued as #")
    assert await writer.run(submission_counts) == {"failed": 3, "submitted": 1}
