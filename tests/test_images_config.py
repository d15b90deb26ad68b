"""The [images] config section: defaults from the container guide, strict validation."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import ConfigError, load_config, parse_config
from core.images import GUIDE_MIN_RELEASE


def test_defaults_are_the_guides() -> None:
    images = load_config(None).images
    assert images.dir == "/enroot"
    assert images.min_release == GUIDE_MIN_RELEASE


def test_a_table_replaces_the_default_minimums() -> None:
    config = parse_config({"images": {"min_release": {"A40": "20.10"}}})
    assert config.images.min_release == {"A40": "20.10"}


@pytest.mark.parametrize(
    ("images", "message"),
    [
        ({"dir": "enroot"}, "images.dir: 'enroot' is not an absolute path"),
        ({"max_packages_file_bytes": 0}, "images.max_packages_file_bytes must be at least 1"),
        ({"min_release": {"a100": "2020.06"}}, "images.min_release.a100: '2020.06' is not"),
        ({"min_release": {"a100": 20.06}}, "images.min_release must be a table of strings"),
        ({"min_release": {"A100": "20.06", "a100": "20.06"}}, "name the same GPU type"),
        ({"min_release": {"--": "20.06"}}, "is not a GPU type name"),
        ({"path": "/enroot"}, "unknown config key: images.path"),
    ],
)
def test_bad_values_name_the_key(images: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config({"images": images})
    assert message in str(error.value)
