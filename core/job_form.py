"""The job form (`/sky submit` with no path): what it offers a user, and checking what they sent.

Pure: the choices come from one snapshot (the lab's partitions and caps, the GPU types its
nodes have, the partitions' live MaxTime from the limits poll, the images `/sky images`
lists), never from a site's guide; the checks answer per field, as Slack shows a modal's
errors under the field they are about. Laying it out in Block Kit is core/job_modal.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from core.cluster_config import LabConfig
from core.job_template import (
    GpuAsk,
    JobAsk,
    JobStep,
    TemplateError,
    TemplateSettings,
    batch_script,
    check_image,
    gpu_types,
    is_plain_path,
)
from core.notice_text import plural
from core.slack_text import literal
from core.slurm_limits_text import duration_minutes
from core.view import ClusterView

# Where a choice goes (the partition select's values): a lab's partition, or overcap.
OVERCAP = "overcap"
LAB_PREFIX = "lab:"
ANY_GPU = "any"
MAX_COMMAND_CHARS = 1000
MAX_WORKDIR_CHARS = 400
# Block ids of the form's fields: Slack's `errors` are keyed by them.
PLACE, GPU_TYPE, GPU_COUNT, TIME, IMAGE, WORKDIR, COMMAND = (
    "place",
    "gpu_type",
    "gpu_count",
    "time",
    "image",
    "workdir",
    "command",
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# What the form offers and writes into #SBATCH lines as it is: plain Slurm and image names only
# (a name from Slurm or a directory listing that is not one is left out, never quoted).
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,199}")


# What a user sent, by field (block id) -> its text (None: left empty).
FormInput = Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class Place:
    """A partition the form offers: a lab's own, or overcap (lab None)."""

    value: str
    partition: str
    account: str
    lab: LabConfig | None
    # The most GPUs a job there may hold: the lab's cap (None: no cap known).
    cap: int | None
    # The partition's MaxTime as the last limits poll read it (None: no limit).
    max_minutes: int | None


@dataclass(frozen=True, slots=True)
class FormChoices:
    """What the form offers one user on one cluster."""

    user: str
    places: tuple[Place, ...]
    # GPU type -> the most of that type on one node.
    gpus: dict[str, int]
    images: tuple[str, ...]
    # Where a job may run from: the cluster's lab storage roots (and the home, as ~).
    roots: tuple[str, ...]

    def place(self, value: str | None) -> Place | None:
        return next((p for p in self.places if p.value == value), None)

    def default_workdir(self) -> str:
        lab = next((p.lab for p in self.places if p.lab and p.lab.storage_roots), None)
        return f"{lab.storage_roots[0].rstrip('/')}/{self.user}" if lab else "~"


def form_choices(view: ClusterView, user: str) -> FormChoices:
    """The user's labs' partitions (with their caps and live MaxTime) and overcap; the GPU
    types the nodes have; the images in the snapshot."""
    limits = view.snapshot.limits

    def max_minutes(partition: str) -> int | None:
        found = limits.partition(partition)
        return found.max_time_minutes if found else None

    labs = view.labs_of_user(user)
    places = [
        Place(
            f"{LAB_PREFIX}{lab.name}",
            lab.partition,
            lab.account,
            lab,
            view.snapshot.cap_for(lab.account),
            max_minutes(lab.partition),
        )
        for lab in labs
        if _PLAIN.fullmatch(lab.partition) and _PLAIN.fullmatch(lab.account)
    ]
    if places:
        overcap = view.overcap_partition
        places.append(
            Place(OVERCAP, overcap, view.overcap_account, None, None, max_minutes(overcap))
        )
    roots = tuple(root for lab in view.labs for root in lab.storage_roots)
    images = tuple(sorted(i.name for i in view.snapshot.images if _PLAIN.fullmatch(i.name)))
    gpus = {t: n for t, n in gpu_types(view.snapshot.nodes).items() if _PLAIN.fullmatch(t)}
    return FormChoices(user, tuple(places), gpus, images, roots)


@dataclass(frozen=True, slots=True)
class ComposedJob:
    """A checked form: the template's ask and what the form adds to it."""

    ask: JobAsk
    step: JobStep
    partition: str

    def script(self, settings: TemplateSettings, view: ClusterView) -> str:
        return batch_script(self.ask, settings, view.snapshot.nodes, self.step)


def check_form(form: FormInput, choices: FormChoices) -> ComposedJob | dict[str, str]:
    """The job the form describes, or an error per field (block id -> sentence)."""
    errors: dict[str, str] = {}
    place = choices.place(form.get(PLACE))
    if place is None:
        errors[PLACE] = "Choose one of your lab's partitions, or overcap."
    gpus = _gpus(form, choices, place, errors)
    time = _time(form.get(TIME), place, errors)
    image = _image(form.get(IMAGE), choices, errors)
    workdir = _workdir(form.get(WORKDIR), choices, errors)
    command = _command(form.get(COMMAND), errors)
    if errors or place is None or gpus is None or time is None:
        return errors or {PLACE: "Choose where the job runs."}
    lab = place.lab or next(p.lab for p in choices.places if p.lab is not None)
    overcap = None if place.lab else (place.partition, place.account)
    ask = JobAsk(choices.user, lab, gpus, image, overcap)
    return ComposedJob(ask, JobStep(command or "", time, workdir or ""), place.partition)


def _gpus(
    form: FormInput, choices: FormChoices, place: Place | None, errors: dict[str, str]
) -> GpuAsk | None:
    typed = form.get(GPU_TYPE)
    gpu_type = None if typed in (None, "", ANY_GPU) else typed
    if gpu_type is not None and gpu_type not in choices.gpus:
        known = ", ".join(choices.gpus) or "none"
        errors[GPU_TYPE] = f"There is no GPU type {literal(gpu_type, 40)} here. Known: {known}."
        return None
    text = (form.get(GPU_COUNT) or "").strip()
    if not text.isdigit() or len(text) > 6:
        errors[GPU_COUNT] = f"{literal(text, 20)} is not a number of GPUs: give e.g. 1."
        return None
    count = int(text)
    per_node = choices.gpus.get(gpu_type, 0) if gpu_type else max(choices.gpus.values(), default=0)
    most = min(per_node, place.cap) if place and place.cap is not None else per_node
    if not 1 <= count <= most:
        errors[GPU_COUNT] = _count_error(count, gpu_type, per_node, place)
        return None
    return GpuAsk(gpu_type, count)


def _count_error(count: int, gpu_type: str | None, per_node: int, place: Place | None) -> str:
    kind = f"{gpu_type} " if gpu_type else ""
    if count < 1:
        return "Ask for at least 1 GPU."
    if place is not None and place.cap is not None and place.cap < per_node:
        return f"{place.partition} allows your lab {plural(place.cap, 'GPU')} at most (its cap)."
    return f"A {kind}node has {plural(per_node, 'GPU')} at most: ask for 1 to {per_node}."


def _time(text: str | None, place: Place | None, errors: dict[str, str]) -> str | None:
    typed = (text or "").strip()
    try:
        minutes = duration_minutes(typed) if typed else None
    except ValueError:
        minutes = None
    if minutes is None or minutes < 1:
        errors[TIME] = f"{literal(typed, 30)} is not a time limit: give e.g. 4:00:00 or 1-00:00:00."
        return None
    limit = place.max_minutes if place else None
    if limit is not None and minutes > limit:
        errors[TIME] = (
            f"{place.partition if place else ''} allows {slurm_time(limit)} at most "
            "(its MaxTime now): ask for that or less."
        )
        return None
    return slurm_time(minutes)


def slurm_time(minutes: int) -> str:
    """Minutes as `--time` takes them: "4:00:00", "2-00:00:00"."""
    days, rest = divmod(minutes, 1440)
    clock = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{clock}" if days else clock


def _image(name: str | None, choices: FormChoices, errors: dict[str, str]) -> str | None:
    if not name:
        return None
    try:
        bare = check_image(name)
    except TemplateError as error:
        errors[IMAGE] = str(error)
        return None
    if bare not in choices.images:
        errors[IMAGE] = f"There is no image {literal(name, 60)} (see `/sky images`)."
        return None
    return bare


def _workdir(text: str | None, choices: FormChoices, errors: dict[str, str]) -> str | None:
    raw = (text or "").strip()
    path = raw.rstrip("/") or raw
    home = path == "~" or (path.startswith("~/") and is_plain_path(path[1:]))
    inside = is_plain_path(path) and any(
        path == root.rstrip("/") or path.startswith(root.rstrip("/") + "/")
        for root in choices.roots
    )
    if len(path) > MAX_WORKDIR_CHARS or ".." in path.split("/") or not (home or inside):
        where = ", ".join(literal(root) for root in choices.roots) or "none configured"
        errors[WORKDIR] = (
            f"{literal(path, 60)} is not a directory skybot submits from: give one in your "
            f"home (~/…) or under the lab storage ({where}), without `..`."
        )
        return None
    return path


def _command(text: str | None, errors: dict[str, str]) -> str | None:
    command = (text or "").strip()
    if not command or len(command) > MAX_COMMAND_CHARS or _CONTROL.search(command):
        errors[COMMAND] = (
            f"Give the command to run, on one line of at most {MAX_COMMAND_CHARS} characters "
            "(e.g. python -u train.py)."
        )
        return None
    return command
