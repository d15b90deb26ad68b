"""core.packages and core.images: .packages parsing, PEP 440 queries, releases, GPU minimums."""

from __future__ import annotations

import pytest

from core.images import (
    GUIDE_MIN_RELEASE,
    Release,
    find_gpu_rule,
    gpu_key,
    image_release,
    parse_release,
)
from core.packages import (
    QueryError,
    build_index,
    find_images,
    parse_packages,
    parse_query,
    versions_of,
)
from core.records import ContainerImage

# -------------------------------------------------------------------- .packages files


def test_parse_packages_reads_pins_and_counts_junk() -> None:
    data = (
        b"torch==1.7.0a0+7036e91\n"
        b"Transformers == 4.30.2\r\n"
        b"\n"
        b"# pip freeze of nvcr.io/nvidia/pytorch:20.10-py3\n"
        b"apex @ file:///opt/pytorch/apex\n"
        b"Package    Version\n"  # `pip list` header: junk
        b"numpy>=1.0\n"  # a requirement, not a pin: junk
        b"bad\xffbytes==1.0\n"  # not UTF-8: junk, without spoiling the rest
        + b"x" * 2000
        + b"==1\n"  # absurdly long: junk
        + b"zipp===3.17.0\n"
    )
    parsed = parse_packages(data)
    assert parsed.packages == (
        ("torch", "1.7.0a0+7036e91"),
        ("Transformers", "4.30.2"),
        ("apex", ""),
        ("zipp", "3.17.0"),
    )
    assert parsed.unreadable_lines == 4


def test_parse_packages_of_an_empty_file() -> None:
    parsed = parse_packages(b"")
    assert parsed.packages == () and parsed.unreadable_lines == 0


# -------------------------------------------------------------------- queries


def image(name: str, *packages: tuple[str, str]) -> ContainerImage:
    return ContainerImage(name, packages_file=f"{name}.packages", packages=packages)


IMAGES = (
    image("a_pytorch_20.10-py3.sqsh", ("torch", "1.7.0a0+7036e91"), ("numpy", "1.19.2")),
    image("b_pytorch_23.12-py3.sqsh", ("torch", "2.1.2"), ("transformers", "4.36.2")),
    image("c_exact.sqsh", ("Torch", "2.1"), ("transformers", "4.29.0")),
    image("d_hf.sqsh", ("torch", "2.1.0+cu118"), ("transformers", "4.30.0")),
    image("e_dev.sqsh", ("torch", "2.10.0"), ("torch_vision", "0.16.0")),
    image("f_odd.sqsh", ("torch", "not-a-version"), ("apex", "")),
)
INDEX = build_index(IMAGES)


def found(text: str) -> list[tuple[str, str, bool]]:
    return [(m.image.name, m.version, m.exact) for m in find_images(parse_query(text), INDEX)]


def test_exact_version_matches_before_patch_releases() -> None:
    # PEP 440: ==2.1 is 2.1 / 2.1.0 (a local +cu118 too, which sorts above plain 2.1);
    # 2.1.2 only through ==2.1.*; 2.10.0 is no 2.1, which string prefix matching would miss.
    assert found("torch==2.1") == [
        ("d_hf.sqsh", "2.1.0+cu118", True),
        ("c_exact.sqsh", "2.1", True),
        ("b_pytorch_23.12-py3.sqsh", "2.1.2", False),
    ]


def test_pin_prefix_matches_ngc_prereleases_like_grep_does() -> None:
    assert found("torch==1.7") == [("a_pytorch_20.10-py3.sqsh", "1.7.0a0+7036e91", False)]


def test_range_is_pep440_not_string_order() -> None:
    # As strings "4.4" > "4.30"; as versions it is older.
    assert found("transformers>=4.30") == [
        ("b_pytorch_23.12-py3.sqsh", "4.36.2", True),
        ("d_hf.sqsh", "4.30.0", True),
    ]
    assert [name for name, _, _ in found("torch>=2,<2.2")] == [
        "b_pytorch_23.12-py3.sqsh",
        "d_hf.sqsh",
        "c_exact.sqsh",
    ]


def test_bare_name_matches_every_version_highest_first() -> None:
    assert [version for _, version, _ in found("torch")] == [
        "2.10.0",
        "2.1.2",
        "2.1.0+cu118",
        "2.1",
        "1.7.0a0+7036e91",
        "not-a-version",  # shown for a bare name, last
    ]
    assert found("apex") == [("f_odd.sqsh", "", True)]


def test_names_are_compared_canonicalised() -> None:
    assert [name for name, _, _ in found("TORCH==2.1")][:2] == ["d_hf.sqsh", "c_exact.sqsh"]
    for spelling in ("torch-vision", "Torch.Vision", "torch_vision==0.16"):
        assert found(spelling) == [("e_dev.sqsh", "0.16.0", True)]


def test_unparseable_versions_never_satisfy_a_specifier() -> None:
    assert "f_odd.sqsh" not in [name for name, _, _ in found("torch!=9")]


def test_no_match_and_versions_for_the_hint() -> None:
    assert found("torch==9.9") == []
    assert found("tensorflow") == []
    assert versions_of(parse_query("torch==9.9"), INDEX)[:3] == ["2.10.0", "2.1.2", "2.1.0+cu118"]


@pytest.mark.parametrize(
    "text", ["", "==2.1", "torch transformers", "torch==", "torch=>2", "torch[cuda]", "x" * 300]
)
def test_bad_queries_are_refused(text: str) -> None:
    with pytest.raises(QueryError):
        parse_query(text)


def test_wildcard_and_local_pins_are_not_widened() -> None:
    assert parse_query("torch==2.1.*").widened is None
    assert parse_query("torch==2.1.0+cu118").widened is None
    assert str(parse_query("torch==2.1,<3").widened) in ("<3,==2.1.*", "==2.1.*,<3")


# -------------------------------------------------------------------- releases


@pytest.mark.parametrize(
    ("name", "release"),
    [
        ("nvcr.io_nvidia_pytorch_23.12-py3.sqsh", Release(23, 12)),
        ("nvcr.io_nvidia_pytorch_20.10-py3.sqsh", Release(20, 10)),
        ("dlcc_pytorch_20.10.sqsh", Release(20, 10)),
        ("pytorch_20.03-py3.sqsh", Release(20, 3)),
        ("nvidia-pytorch-21.05-py3.sqsh", Release(21, 5)),
        ("nvcr.io_nvidia_tensorflow_21.05-tf2-py3.sqsh", Release(21, 5)),
        ("nvcr.io_nvidia_pytorch_24.01-py3-igpu.sqsh", Release(24, 1)),
        ("huggingface+transformers-pytorch-gpu+latest.sqsh", None),
        ("nvcr.io_nvidia_cuda_11.8.0-devel-ubuntu22.04.sqsh", None),
        ("ubuntu_20.04.sqsh", None),
        ("model_12.05.sqsh", None),  # before NGC existed: a version, not a release
        ("thing_20.13-py3.sqsh", None),  # no month 13
        ("torch_20.10.1.sqsh", None),
    ],
)
def test_image_release(name: str, release: Release | None) -> None:
    assert image_release(name) == release


def test_releases_compare_in_time_order_and_print_as_tags() -> None:
    assert Release(20, 3) < Release(20, 6) < Release(21, 1)
    assert str(Release(20, 6)) == "20.06"
    assert parse_release("20.06") == Release(20, 6)
    assert parse_release("2020.06") is None and parse_release("20.6") is None


# -------------------------------------------------------------------- GPU minimums


@pytest.mark.parametrize(
    ("word", "gpu_type"),
    [
        ("a100", "a100"),
        ("A100", "a100"),
        ("a100_80gb", "a100"),
        ("nvidia_a100-sxm4-80gb", "a100"),
        ("rtx_3090", "rtx_3090"),
        ("rtx 3090", "rtx_3090"),
        ("RTX3090", "rtx_3090"),
        ("GeForce RTX 3090", "rtx_3090"),
        ("a6000", "rtx_a6000"),
        ("RTX A6000", "rtx_a6000"),
        ("a10", "a10"),
    ],
)
def test_gpu_names_match_tolerantly(word: str, gpu_type: str) -> None:
    rule = find_gpu_rule(GUIDE_MIN_RELEASE, word)
    assert rule is not None and rule.gpu_type == gpu_type


@pytest.mark.parametrize("word", ["a40", "rtx_6000", "6000", "a10g", "v100", "", "---"])
def test_other_gpu_types_have_no_rule(word: str) -> None:
    assert find_gpu_rule(GUIDE_MIN_RELEASE, word) is None


def test_guide_minimums_flag_old_images() -> None:
    a100 = find_gpu_rule(GUIDE_MIN_RELEASE, "a100")
    a10 = find_gpu_rule(GUIDE_MIN_RELEASE, "a10")
    assert a100 is not None and a10 is not None
    old = image_release("nvcr.io_nvidia_pytorch_20.03-py3.sqsh")
    new = image_release("nvcr.io_nvidia_pytorch_20.10-py3.sqsh")
    assert old is not None and new is not None
    assert old < a100.min_release <= new
    assert new < a10.min_release


def test_gpu_key() -> None:
    assert gpu_key("RTX A6000") == gpu_key("rtx_a6000") == "a6000"
    assert gpu_key("rtx_6000") != gpu_key("rtx_a6000")
