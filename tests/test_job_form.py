"""The job form (issue 43): what it offers comes from the snapshot (caps, GPU types, the live
MaxTime, the images), each wrong field gets its own sentence, and the script is the template's
with the form's command, time and directory."""

from __future__ import annotations

import json

from core.cluster_config import LabConfig
from core.job_form import (
    COMMAND,
    GPU_COUNT,
    GPU_TYPE,
    IMAGE,
    PLACE,
    TIME,
    WORKDIR,
    ComposedJob,
    FormInput,
    check_form,
    form_choices,
)
from core.job_modal import (
    FORM_CALLBACK,
    REVIEW_CALLBACK,
    form_view,
    read_metadata,
    read_values,
    review_view,
)
from core.job_template import TemplateSettings
from core.records import ContainerImage, LabCap
from core.slurm_limits import PartitionLimits, SlurmLimits
from core.view import ClusterView
from tests.support.factories import make_snapshot, make_view, node

GOOD: dict[str, str | None] = {
    PLACE: "lab:hoffman-lab",
    GPU_TYPE: "a40",
    GPU_COUNT: "2",
    TIME: "3:00:00",
    IMAGE: None,
    WORKDIR: "/srv/hoffman-lab/flash9/alice/run",
    COMMAND: "python -u train.py --lr 3e-4",
}


def _view(max_time: int | None = 240, cap: int | None = 3) -> ClusterView:
    snapshot = make_snapshot(
        nodes=(node("clippy", "a40", cpus=32), node("baymax", "2080_ti", total=8, cpus=32)),
        caps=(LabCap("hoffman-lab", cap), LabCap("kira-lab", 4)),
        members={"hoffman-lab": frozenset({"alice"}), "kira-lab": frozenset({"carol"})},
        images=(ContainerImage("nvcr.io_nvidia_pytorch_23.12-py3"),),
        limits=SlurmLimits(partitions=(PartitionLimits("hoffman-lab", max_time),)),
    )
    return make_view(snapshot)


def _check(view: ClusterView, **changed: str | None) -> ComposedJob | dict[str, str]:
    form: FormInput = {**GOOD, **changed}
    return check_form(form, form_choices(view, "alice"))


def test_the_form_offers_the_users_labs_and_overcap_the_gpu_types_and_images() -> None:
    choices = form_choices(_view(), "alice")
    assert [(p.value, p.partition, p.cap, p.max_minutes) for p in choices.places] == [
        ("lab:hoffman-lab", "hoffman-lab", 3, 240),
        ("overcap", "overcap", None, None),
    ]
    assert choices.gpus == {"2080_ti": 8, "a40": 4}
    assert choices.images == ("nvcr.io_nvidia_pytorch_23.12-py3",)
    assert choices.default_workdir() == "/srv/hoffman-lab/flash9/alice"
    assert form_choices(_view(), "nobody").places == ()


def test_a_good_form_is_the_templates_script_with_its_command_time_and_directory() -> None:
    view = _view()
    job = _check(view)
    assert isinstance(job, ComposedJob)
    script = job.script(TemplateSettings(), view)
    assert script.startswith("#!/bin/bash\n# sbatch script from skybot's job form: alice in ")
    for line in (
        "#SBATCH --partition=hoffman-lab",
        "#SBATCH --account=hoffman-lab",
        "#SBATCH --gpus-per-node=a40:2",
        "#SBATCH --time=03:00:00",
        "#SBATCH --output=/srv/hoffman-lab/flash9/alice/%x-%j.out",
        "srun -u python -u train.py --lr 3e-4",
        # The runner submits with SBATCH_EXPORT=NONE, which srun inherits: its tasks would
        # start with no environment, no PATH, and fail at execve (seen on the test cluster).
        "unset SLURM_EXPORT_ENV  # srun's tasks get the environment set above",
        "# skybot submits it from /srv/hoffman-lab/flash9/alice/run, where it runs.",
    ):
        assert line in script.splitlines(), (line, script)
    assert job.partition == "hoffman-lab" and job.step.workdir.endswith("/alice/run")


def test_each_wrong_field_is_said_under_that_field() -> None:
    view = _view()
    # The lab's cap (3) is below a node's 4 a40s: the cap is what is quoted.
    assert _check(view, **{GPU_COUNT: "4"}) == {
        GPU_COUNT: "hoffman-lab allows your lab 3 GPUs at most (its cap)."
    }
    assert _check(view, **{GPU_COUNT: "0"}) == {GPU_COUNT: "Ask for at least 1 GPU."}
    # The live MaxTime, whatever any guide says.
    assert _check(view, **{TIME: "5:00:00"}) == {
        TIME: "hoffman-lab allows 04:00:00 at most (its MaxTime now): ask for that or less."
    }
    assert set(_check(view, **{TIME: "soon"})) == {TIME}
    assert _check(view, **{IMAGE: "ghost-image"}) == {
        IMAGE: "There is no image `ghost-image` (see `/sky images`)."
    }
    assert set(_check(view, **{IMAGE: "../etc/passwd"})) == {IMAGE}
    for bad in ("/etc", "/srv/hoffman-lab/flash9/../../etc", "relative/dir", "/srv/x;rm"):
        assert set(_check(view, **{WORKDIR: bad})) == {WORKDIR}, bad
    assert set(_check(view, **{GPU_TYPE: "h100"})) == {GPU_TYPE}
    assert set(_check(view, **{COMMAND: "line one\nline two"})) == {COMMAND}
    assert set(_check(view, **{PLACE: "lab:kira-lab"})) == {PLACE}  # not alice's lab
    several = _check(view, **{GPU_COUNT: "9", TIME: "9-00:00:00", IMAGE: "nope"})
    assert set(several) == {GPU_COUNT, TIME, IMAGE}


def test_limits_follow_the_snapshot_and_overcap_has_only_the_nodes() -> None:
    assert isinstance(_check(_view(max_time=None), **{TIME: "9-00:00:00"}), ComposedJob)
    assert set(_check(_view(max_time=60), **{TIME: "2:00:00"})) == {TIME}
    # overcap: no lab cap, but one node holds at most 4 a40s; its script requeues.
    view = _view(cap=1)
    job = _check(view, **{PLACE: "overcap", GPU_COUNT: "4"})
    assert isinstance(job, ComposedJob)
    assert "#SBATCH --requeue" in job.script(TemplateSettings(), view)
    assert _check(view, **{PLACE: "overcap", GPU_COUNT: "5"}) == {
        GPU_COUNT: "A a40 node has 4 GPUs at most: ask for 1 to 4."
    }
    home = _check(view, **{WORKDIR: "~/project", GPU_COUNT: "1"})
    assert isinstance(home, ComposedJob) and home.step.workdir == "~/project"


def test_the_form_view_names_its_cluster_and_reads_back_what_was_sent() -> None:
    choices = form_choices(_view(), "alice")
    view = form_view("skynet", choices)
    assert view["type"] == "modal" and view["callback_id"] == FORM_CALLBACK
    assert json.loads(view["private_metadata"]) == {"cluster": "skynet"}
    inputs = {b["block_id"]: b["element"] for b in view["blocks"] if b["type"] == "input"}
    assert set(inputs) == {PLACE, GPU_TYPE, GPU_COUNT, TIME, IMAGE, WORKDIR, COMMAND}
    assert [o["value"] for o in inputs[PLACE]["options"]] == ["lab:hoffman-lab", "overcap"]
    assert [o["value"] for o in inputs[GPU_TYPE]["options"]] == ["2080_ti", "a40", "any"]
    assert inputs[WORKDIR]["initial_value"] == "/srv/hoffman-lab/flash9/alice"
    assert all("action_id" not in e for e in inputs.values())  # Slack names them
    values = {
        PLACE: {"a1": {"type": "static_select", "selected_option": {"value": "overcap"}}},
        GPU_COUNT: {"Xy=": {"type": "number_input", "value": "2"}},
        IMAGE: {"b": {"type": "static_select", "selected_option": None}},
        COMMAND: {"c": {"type": "plain_text_input", "value": None}},
    }
    read = read_values(values)
    assert read[PLACE] == "overcap" and read[GPU_COUNT] == "2"
    assert read[IMAGE] is None and read[COMMAND] is None and read[TIME] is None


def test_the_review_carries_the_form_and_shows_the_script_inertly() -> None:
    form = {**GOOD, COMMAND: "echo <!channel> ```"}
    view = review_view("nova", form, "summary", "#!/bin/bash\necho <!channel> ```\n")
    assert view["callback_id"] == REVIEW_CALLBACK
    sent = {k: v for k, v in form.items() if v is not None}  # an empty field: left out
    assert read_metadata(view["private_metadata"]) == ("nova", sent)
    code = "".join(b["text"]["text"] for b in view["blocks"] if b["type"] == "section")
    assert "<!channel>" not in code and "&lt;!channel&gt;" in code
    assert read_metadata("not json") == ("", {})
    assert read_metadata(json.dumps({"cluster": 3, "form": {"x": "y", TIME: 5}})) == ("", {})


def test_a_lab_without_storage_runs_from_home_by_default() -> None:
    bare = (LabConfig("hoffman-lab", "hoffman-lab", "hoffman-lab"),)
    view = make_view(_view().snapshot, labs=bare)
    assert form_choices(view, "alice").default_workdir() == "~"
