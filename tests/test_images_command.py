"""`/sky images`: answered from the snapshot's image list, with a clear answer for each gap."""

from __future__ import annotations

import builtins
import os
from dataclasses import replace
from typing import Any

import pytest

from core.records import ContainerImage, ImageDirectory
from core.snapshot import SourceStatus
from core.view import ClusterView
from tests.support.asking import ask, block_text, one_liner
from tests.support.factories import LABS, make_snapshot
from tests.support.sample_cluster import TAKEN_AT, cluster

PT_2312 = "nvcr.io_nvidia_pytorch_23.12-py3.sqsh"
PT_2010 = "nvcr.io_nvidia_pytorch_20.10-py3.sqsh"
PT_2003 = "nvcr.io_nvidia_pytorch_20.03-py3.sqsh"
HF = "huggingface+transformers-pytorch-gpu+latest.sqsh"
CUDA = "nvcr.io_nvidia_cuda_11.8.0-devel-ubuntu22.04.sqsh"


def listed(name: str, *packages: str, junk: int = 0) -> ContainerImage:
    pairs = tuple(tuple(p.split("==")) for p in packages)
    return ContainerImage(
        name,
        0,
        f"{name}.packages",
        pairs,
        unreadable_lines=junk,  # type: ignore[arg-type]
    )


IMAGES = (
    listed(PT_2003, "torch==1.5.0a0+8f84ded", "numpy==1.18.1"),
    listed(PT_2010, "torch==1.7.0a0+7036e91", "numpy==1.19.2"),
    listed(PT_2312, "torch==2.2.0a0+81ea7a4", "numpy==1.24.4"),
    listed(HF, "torch==1.7.1", "transformers==4.1.1", junk=3),
    ContainerImage(CUDA),
)


ENROOT = ImageDirectory("/enroot")


def images_view(
    images: tuple[ContainerImage, ...] = IMAGES,
    image_dir: ImageDirectory | None = ENROOT,
    **view_fields: Any,
) -> ClusterView:
    view = cluster(images=images, image_dir=image_dir)
    return ClusterView(view.snapshot, view.labs, **view_fields)


# ------------------------------------------------------------------- listing


def test_lists_images_newest_release_first_with_their_lists() -> None:
    reply = ask("images", images_view())
    lines = reply.text.splitlines()
    assert lines[0].startswith("*5 container images* in `/enroot`")
    order = [
        next(n for n in (PT_2312, PT_2010, PT_2003, HF, CUDA) if n in line) for line in lines[1:6]
    ]
    # Release unknown last, by name.
    assert order == [PT_2312, PT_2010, PT_2003, HF, CUDA]
    text = reply.text
    assert f"`{PT_2312}` — release 23.12 · 2 packages" in text
    assert f"`{CUDA}` — release unknown · no .packages list" in text
    assert f"3 unreadable lines in `{HF}.packages` (skipped)" in text
    assert "as of 12 s ago" in text and "as of 12 s ago" in block_text(reply)


def test_gpu_flags_images_too_old_for_it() -> None:
    text = ask("images --gpu a100", images_view()).text
    assert "⛔ marks those too old for `a100` (it needs release 20.06 or newer)" in text
    flagged = [line for line in text.splitlines() if "⛔ too old" in line]
    assert len(flagged) == 1 and PT_2003 in flagged[0]
    # Release unknown is said, not flagged.
    assert any(HF in line and "release unknown" in line for line in text.splitlines())


@pytest.mark.parametrize("spelling", ["A10", "--gpu=a10", "nvidia_a10"])
def test_gpu_names_are_tolerant(spelling: str) -> None:
    args = spelling if spelling.startswith("--") else f"--gpu {spelling}"
    text = ask(f"images {args}", images_view()).text
    # A10 needs 21.05: both 20.xx images are too old for it.
    assert sum("⛔ too old for `a10`" in line for line in text.splitlines()) == 2


def test_rtx_3090_with_a_space_quoted() -> None:
    text = ask('images torch --gpu "RTX 3090"', images_view()).text
    flagged = [line for line in text.splitlines() if "⛔ too old for `rtx_3090`" in line]
    assert len(flagged) == 1 and PT_2003 in flagged[0]
    assert "⛔ 1 of them is too old for `rtx_3090`" in text


def test_many_images_are_cut_short() -> None:
    many = tuple(listed(f"img_{i:03d}_21.{1 + i % 12:02d}.sqsh", "numpy==1.0") for i in range(80))
    text = ask("images", images_view(many)).text
    assert "… and 55 more" in text


# ------------------------------------------------------------------- search


def test_search_best_match_first_exact_before_patch_release() -> None:
    text = ask("images torch==1.7", images_view()).text
    lines = text.splitlines()
    assert lines[0] == "*2 images have* `torch==1.7` (exact matches first, then `==1.7.*`)"
    assert HF in lines[1] and "`torch` `1.7.1`" in lines[1]
    assert PT_2010 in lines[2] and "`torch` `1.7.0a0+7036e91` · release 20.10" in lines[2]


def test_search_range_and_canonical_names() -> None:
    text = ask("images TORCH>=1.7", images_view()).text
    assert text.splitlines()[0].startswith("*2 images have*")
    assert PT_2312 in text.splitlines()[1]  # highest version first
    assert HF in text.splitlines()[2]
    # PEP 440, not string order: 1.7.0a0+… is a pre-release, older than 1.7; 1.5 is older still.
    assert PT_2010 not in text and PT_2003 not in text


def test_search_says_which_images_could_not_be_searched() -> None:
    text = ask("images numpy", images_view()).text
    assert f"1 image has no .packages list and could not be searched: `{CUDA}`." in text
    assert f"⚠️ 3 unreadable lines in `{HF}.packages` (skipped)" in text


def test_unreadable_list_is_explained() -> None:
    broken = ContainerImage(
        "x_21.05.sqsh", 0, "x_21.05.sqsh.packages", packages_error="/enroot/x is a symlink"
    )
    text = ask("images torch", images_view((*IMAGES, broken))).text
    assert "`x_21.05.sqsh.packages` could not be read: `/enroot/x is a symlink`" in text


def test_no_image_has_that_version_lists_the_versions_there_are() -> None:
    text = ask("images torch==3", images_view()).text
    assert text.startswith(
        "No image has `torch==3`. Versions of `torch` in the images (newest first): "
        "`2.2.0a0+81ea7a4, 1.7.1, 1.7.0a0+7036e91, 1.5.0a0+8f84ded`."
    )


def test_no_image_has_that_package_suggests_a_near_name() -> None:
    text = ask("images nunpy", images_view()).text
    assert text.startswith("No image lists a package called `nunpy`. Did you mean `numpy`?")
    assert ask("images tensorflow", images_view()).text.startswith(
        "No image lists a package called `tensorflow`."
    )


# ------------------------------------------------------------------- clear answers


def test_missing_image_directory() -> None:
    view = images_view((), ImageDirectory("/enroot", "No such file or directory"))
    reply = ask("images torch", view)
    assert reply.text.startswith(
        "skybot cannot read the image directory `/enroot`: `No such file or directory`."
    )
    assert "as of 12 s ago" in reply.text


def test_empty_image_directory() -> None:
    assert ask("images", images_view(())).text.startswith(
        "There are no container images (`*.sqsh`) in `/enroot`."
    )


def test_not_listed_yet_and_turned_off() -> None:
    assert "has not listed the container images yet" in ask("images", images_view((), None)).text
    off = ask("images", images_view((), ImageDirectory(""))).text
    assert "turned off in skybot's configuration" in off


def test_storage_never_scanned() -> None:
    snapshot = make_snapshot(TAKEN_AT, images=IMAGES, image_dir=ImageDirectory("/enroot"))
    status = dict(snapshot.status)
    status["storage"] = SourceStatus("storage")
    view = ClusterView(replace(snapshot, status=status), LABS)
    assert "has not scanned storage yet" in one_liner(ask("images", view))


def test_unknown_gpu_type_lists_the_known_ones() -> None:
    line = one_liner(ask("images torch --gpu a40", images_view()))
    assert line == (
        "I don't know which images GPU type `a40` needs. GPU types with a minimum image "
        "release: `a100`, `rtx_3090`, `rtx_a6000`, `a10`."
    )


def test_gpu_minimums_come_from_the_view_config() -> None:
    view = images_view(gpu_min_release={"a40": "21.01"})
    text = ask("images --gpu A40", view).text
    assert sum("⛔ too old for `a40`" in line for line in text.splitlines()) == 2
    assert "`a40`." in one_liner(ask("images --gpu a100", view))


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("images torch transformers", "as a package query"),
        ("images ==2.1", "as a package query"),
        ("images --gpu", "`--gpu` needs a GPU type"),
        ("images --gpu a100 --gpu a10", "only once"),
        ("images --cuda 12", "I don't know the option `--cuda`"),
    ],
)
def test_bad_input_gets_one_line(command: str, expected: str) -> None:
    assert expected in one_liner(ask(command, images_view()))


def test_answers_never_touch_the_filesystem(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a command touched the filesystem")

    view = images_view()
    for name in ("scandir", "open", "stat", "listdir"):
        monkeypatch.setattr(os, name, refuse)
    monkeypatch.setattr(builtins, "open", refuse)
    for command in ("images", "images torch==1.7 --gpu a100", "images nunpy"):
        assert "internal error" not in ask(command, view).text
