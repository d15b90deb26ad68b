"""The job form on a bot of two clusters (issue 43): the form names the cluster `--cluster`
chose in its private_metadata, offers that cluster's partitions and GPU types, and its
submission is queued on, and sent by the runner client to, that cluster only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.job_form import GPU_COUNT, GPU_TYPE, PLACE
from core.job_modal import DONE_CALLBACK, REVIEW_CALLBACK
from handlers.job_form import answer_submission
from store.submissions import get
from tests.support.slack_standin.views import state_values
from tests.support.two_cluster_bot import ALICE, TEAM, two_cluster_bot


def _submitted(view: dict[str, Any], answers: dict[str, str | None]) -> dict[str, Any]:
    """Slack's view_submission body, as far as skybot reads it."""
    values = state_values(view, answers)
    return {
        "type": "view_submission",
        "team": {"id": TEAM},
        "user": {"id": ALICE},
        "view": {**view, "state": {"values": values}},
    }


def _options(view: dict[str, Any], block_id: str) -> list[str]:
    [block] = [b for b in view["blocks"] if b.get("block_id") == block_id]
    return [o["value"] for o in block["element"]["options"]]


async def test_the_form_is_of_the_cluster_it_was_opened_for(tmp_path: Path) -> None:
    async with two_cluster_bot(tmp_path) as bot:
        default = await bot.ask("submit")
        assert default.modal is not None
        assert json.loads(default.modal["private_metadata"]) == {"cluster": "skynet"}
        assert _options(default.modal, GPU_TYPE) == ["skycard", "any"]

        reply = await bot.ask("submit --cluster nova")
        form = reply.modal
        assert form is not None and json.loads(form["private_metadata"]) == {"cluster": "nova"}
        assert _options(form, PLACE) == ["lab:kira-lab", "overcap"]
        assert _options(form, GPU_TYPE) == ["novacard", "any"]

        answer = await answer_submission(
            _submitted(form, {GPU_TYPE: "novacard", GPU_COUNT: "2"}), bot.desks, bot.shared,
            submit=False,
        )  # fmt: skip
        review = answer["view"]
        assert review["callback_id"] == REVIEW_CALLBACK
        assert json.loads(review["private_metadata"])["cluster"] == "nova"
        shown = "\n".join(b["text"]["text"] for b in review["blocks"] if b["type"] == "section")
        assert "on `nova`" in shown and "--gpus-per-node=novacard:2" in shown

        answer = await answer_submission(_submitted(review, {}), bot.desks, bot.shared, submit=True)
        assert answer["view"]["callback_id"] == DONE_CALLBACK
        queued = await bot.writer.run(get, 1)
        assert queued is not None and queued.cluster == "nova" and queued.script == "~"
        assert queued.script_text is not None and "novacard:2" in queued.script_text

        # Only nova's worker has it, and its runner request names nova.
        skynet, nova = bot.wing("skynet").submissions, bot.wing("nova").submissions
        assert skynet is not None and nova is not None
        assert not await skynet.perform_next()
        assert await nova.perform_next()
        [call] = [c for c in bot.runner_calls() if c["request"]["action"] == "submit"]
        request = call["request"]
        assert call["user"] == "alice" and request["cluster"] == "nova"
        assert request["workdir"] == "~" and "script" not in request
        assert request["script_text"] == queued.script_text
        assert request["options"] == {"partition": "kira-lab"}
