"""`skybot doctor` compares the installed files with the wheel's RECORD, so a file that another
distribution overwrote in skybot's top-level packages (`core/__init__.py`, say) is named."""

from __future__ import annotations

import base64
import hashlib
from importlib import metadata
from pathlib import Path

from bot.doctor.installed_files import check_installed_files


def record_line(site: Path, name: str) -> str:
    digest = hashlib.sha256((site / name).read_bytes()).digest()
    encoded = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    return f"{name},sha256={encoded},{(site / name).stat().st_size}"


def install(site: Path, dist: str, files: dict[str, str]) -> metadata.Distribution:
    """A distribution as pip leaves it: its files, and a dist-info with a RECORD of them."""
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "RECORD").write_text("".join(f"{record_line(site, n)}\n" for n in files))
    return metadata.PathDistribution(info)


SKYBOT_FILES = {"core/__init__.py": '"""core"""\n', "bot/cli.py": "print('cli')\n"}


def test_an_untouched_install_passes(tmp_path: Path) -> None:
    check = check_installed_files(install(tmp_path, "skybot", SKYBOT_FILES))
    assert check.ok and check.detail == "all 2 files match the wheel's RECORD"


def test_a_file_overwritten_by_another_distribution_is_named_with_the_fix(tmp_path: Path) -> None:
    skybot = install(tmp_path, "skybot", SKYBOT_FILES)
    install(tmp_path, "dummy-core", {"core/__init__.py": "# not skybot's\n"})
    check = check_installed_files(skybot)
    assert not check.ok
    assert check.detail == (
        "1 file(s) differ from the wheel: core/__init__.py, and other distributions install "
        "into skybot's packages: dummy-core (core/__init__.py)"
    )
    assert "venv of its own" in check.fix


def test_a_hand_edited_file_is_named(tmp_path: Path) -> None:
    skybot = install(tmp_path, "skybot", SKYBOT_FILES)
    (tmp_path / "bot/cli.py").write_text("print('patched')\n")
    check = check_installed_files(skybot)
    assert not check.ok and check.detail == "1 file(s) differ from the wheel: bot/cli.py"


def test_an_editable_install_is_not_checked(tmp_path: Path) -> None:
    skybot = install(tmp_path, "skybot", SKYBOT_FILES)
    (tmp_path / "skybot-1.0.dist-info" / "direct_url.json").write_text(
        '{"url": "file:///src", "dir_info": {"editable": true}}'
    )
    (tmp_path / "bot/cli.py").write_text("print('edited in the checkout')\n")
    check = check_installed_files(skybot)
    assert check.ok and "editable" in check.detail
