"""The job form in Block Kit: the form, its review (the script `/sky template` would write, with
the form's command, time and directory) and the "queued" answer; and reading a submitted form.

Each view carries its cluster in `private_metadata` (JSON), as button values carry theirs, so a
submission is checked and queued on the cluster the form was opened for. The review carries the
form's fields too: Slack sends private_metadata back as it was set, and the script is written
again from them (and checked again) when the user submits, never taken from the payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.blocks import Block, code_sections, context, section
from core.job_form import (
    ANY_GPU,
    COMMAND,
    GPU_COUNT,
    GPU_TYPE,
    IMAGE,
    PLACE,
    TIME,
    WORKDIR,
    FormChoices,
    FormInput,
    Place,
    slurm_time,
)
from core.notice_text import plural
from core.slack_text import literal

FORM_CALLBACK = "skybot_job_form"
REVIEW_CALLBACK = "skybot_job_review"
DONE_CALLBACK = "skybot_job_done"
FIELDS = (PLACE, GPU_TYPE, GPU_COUNT, TIME, IMAGE, WORKDIR, COMMAND)
# Slack's limits: 100 options in a select, 75 characters in an option's text.
MAX_OPTIONS = 100
DEFAULT_TIME = "1:00:00"
DEFAULT_COMMAND = "python -u train.py"
View = dict[str, Any]


def _plain(text: str, limit: int = 75) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:limit] or " "}


def _option(text: str, value: str) -> dict[str, Any]:
    return {"text": _plain(text), "value": value}


def _input(block_id: str, label: str, element: dict[str, Any], **extra: Any) -> Block:
    block: Block = {
        "type": "input",
        "block_id": block_id,
        "label": _plain(label),
        # No action_id: Slack makes one, and an input sends nothing until the view is
        # submitted (only buttons carry ids skybot acts on: core/buttons).
        "element": element,
    }
    return block | extra


def _select(options: list[dict[str, Any]], initial: str | None) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "static_select", "options": options[:MAX_OPTIONS]}
    chosen = next((o for o in options if o["value"] == initial), None)
    if chosen is not None:
        element["initial_option"] = chosen
    return element


def _text_input(initial: str | None, placeholder: str) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "plain_text_input", "placeholder": _plain(placeholder)}
    if initial:
        element["initial_value"] = initial
    return element


def _place_text(place: Place) -> str:
    cap = f", cap {plural(place.cap, 'GPU')}" if place.cap is not None else ""
    if place.lab is None:
        return f"{place.partition} (preemptible: idle GPUs of any lab)"
    return f"{place.partition} ({place.lab.name}'s{cap})"


def _limits_hint(choices: FormChoices) -> str:
    each = [
        f"{p.partition} {slurm_time(p.max_minutes) if p.max_minutes else 'no limit'}"
        for p in choices.places
    ]
    return "Longest allowed now: " + "; ".join(each) + "."


def form_view(cluster: str, choices: FormChoices, sent: FormInput | None = None) -> View:
    """The form, filled in with `sent` (what the user had) or the defaults."""
    sent = sent or {}
    places = [_option(_place_text(p), p.value) for p in choices.places]
    types = [_option(f"{t} (up to {n} per node)", t) for t, n in choices.gpus.items()]
    types.append(_option("any type", ANY_GPU))
    images = [_option(name, name) for name in choices.images]
    first_type = next(iter(choices.gpus), ANY_GPU)
    blocks = [
        _input(PLACE, "Partition", _select(places, sent.get(PLACE) or places[0]["value"])),
        _input(GPU_TYPE, "GPU type", _select(types, sent.get(GPU_TYPE) or first_type)),
        _input(
            GPU_COUNT,
            "GPUs",
            {"type": "number_input", "is_decimal_allowed": False, "min_value": "1"}
            | {"initial_value": sent.get(GPU_COUNT) or "1"},
            hint=_plain("On one node, within your lab's cap.", 150),
        ),
        _input(
            TIME,
            "Time limit",
            _text_input(sent.get(TIME) or DEFAULT_TIME, "4:00:00 or 1-00:00:00"),
            hint=_plain(_limits_hint(choices), 150),
        ),
        _image_block(images, sent.get(IMAGE)),
        _input(
            WORKDIR,
            "Working directory",
            _text_input(sent.get(WORKDIR) or choices.default_workdir(), "~/project"),
            hint=_plain("The job runs here: in your home (~/…) or your lab storage.", 150),
        ),
        _input(
            COMMAND,
            "Command",
            _text_input(sent.get(COMMAND) or DEFAULT_COMMAND, DEFAULT_COMMAND),
            hint=_plain("srun runs it once per GPU.", 150),
        ),
    ]
    return _view(FORM_CALLBACK, cluster, blocks, submit="Review", metadata={})


def _image_block(images: list[dict[str, Any]], initial: str | None) -> Block:
    if not images:
        return context("No container images are listed (`/sky images`): the job runs without one.")
    element = _select(images, initial) | {"placeholder": _plain("none: no container")}
    return _input(IMAGE, "Container image", element, optional=True)


def review_view(cluster: str, sent: FormInput, summary: str, script: str) -> View:
    """The script the form makes, to look at before submitting it."""
    blocks = [
        section(summary),
        *code_sections(script),
        context(
            "Submit sends it to sbatch as you, through skybot's runner, on sbatch's standard "
            "input: nothing is written to your home. `/sky template` gives the same script to "
            "keep."
        ),
    ]
    return _view(REVIEW_CALLBACK, cluster, blocks, submit="Submit", metadata={"form": dict(sent)})


def done_view(cluster: str, markdown: str) -> View:
    """An answer in place of the form (queued, or why it cannot be)."""
    return _view(DONE_CALLBACK, cluster, [section(markdown)], submit=None, metadata={})


def _view(
    callback: str, cluster: str, blocks: list[Block], submit: str | None, metadata: dict[str, Any]
) -> View:
    view: View = {
        "type": "modal",
        "callback_id": callback,
        "title": _plain("Write a job", 24),
        "close": _plain("Close" if submit is None else "Cancel", 24),
        "private_metadata": json.dumps({"cluster": cluster, **metadata}, ensure_ascii=False),
        "blocks": blocks,
    }
    if submit is not None:
        view["submit"] = _plain(submit, 24)
    return view


def read_values(values: Mapping[str, Any]) -> dict[str, str | None]:
    """A submitted view's `state.values` as the form's fields (block id -> text or None)."""
    form: dict[str, str | None] = {}
    for field in FIELDS:
        block = values.get(field)
        element = next(iter(block.values()), None) if isinstance(block, dict) else None
        element = element if isinstance(element, dict) else {}
        chosen = element.get("selected_option") or {}
        value = element.get("value") if "value" in element else chosen.get("value")
        form[field] = value if isinstance(value, str) else None
    return form


def read_metadata(text: object) -> tuple[str, dict[str, str | None]]:
    """(cluster, the form's fields a review carries) from a view's private_metadata."""
    try:
        found = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        found = {}
    if not isinstance(found, dict):
        found = {}
    cluster = found.get("cluster")
    form = found.get("form")
    fields: dict[str, str | None] = {}
    if isinstance(form, dict):
        fields = {k: v for k, v in form.items() if k in FIELDS and isinstance(v, str)}
    return (cluster if isinstance(cluster, str) else ""), fields


def summary(user: str, cluster: str, place: str, workdir: str) -> str:
    """The review's first line."""
    where = f" on {literal(cluster)}" if cluster else ""
    return (
        f"The job as {literal(user)}{where}, partition {literal(place)}, run from "
        f"{literal(workdir)}. *Submit* queues it; *Cancel* drops it."
    )
