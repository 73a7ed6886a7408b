"""The one data folder: --data-dir beats KMDS_DESKTOP_HOME beats the platform's user data dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kmds_desktop import paths


@pytest.fixture()
def restore_override():
    yield
    paths.set_data_dir(None)


def test_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restore_override) -> None:
    # The platform default, pointed into tmp_path so no real user folder is touched.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(paths.ENV_HOME, raising=False)
    paths.set_data_dir(None)
    default = paths.data_dir()
    assert default.name == paths.APP_NAME and default.is_dir()
    assert default.is_relative_to(tmp_path)

    monkeypatch.setenv(paths.ENV_HOME, str(tmp_path / "env-home"))
    assert paths.data_dir() == (tmp_path / "env-home").resolve()

    paths.set_data_dir(tmp_path / "explicit")
    assert paths.data_dir() == (tmp_path / "explicit").resolve()
    for sub in (paths.index_dir(), paths.postgres_dir(), paths.logs_dir(), paths.settings_file().parent):
        assert sub.is_relative_to(tmp_path / "explicit")
    assert paths.index_dir().is_dir() and paths.logs_dir().is_dir()

    paths.set_data_dir(None)
    assert paths.data_dir() == (tmp_path / "env-home").resolve()


def test_demo_kb_ships_with_the_project() -> None:
    assert paths.demo_kb_path().is_file()
    assert paths.demo_kb_path().parent == paths.resources_dir()


def test_cli_writes_nothing_outside_the_data_folder(tmp_path: Path, kmds_data: Path) -> None:
    """A CLI run with --data-dir leaves HOME and the platform folders untouched."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != paths.ENV_HOME and not k.startswith("XDG_")}
    env["HOME"] = str(home)
    data = tmp_path / "data"
    kb = kmds_data / "generated_by_kmds" / "cli_kb.xml"
    out = subprocess.run(
        [sys.executable, "-m", "kmds_desktop", "--data-dir", str(data), "kb", "show", str(kb), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert list(home.iterdir()) == []
    assert (data / "logs" / "kmds-desktop.log").is_file()
