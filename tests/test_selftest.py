"""``kmds-desktop --self-test`` from the virtual environment, and the Linux desktop entry.

The self-test is what a researcher runs on a bundled app; here it runs from the source tree, so a
broken step is caught by ``make test`` long before a (slow) bundle build. It uses the real parts:
offscreen Qt, the bundled embedding model, ChromaDB on disk, the embedded PostgreSQL.
"""

from __future__ import annotations

import configparser
import io
import os
import subprocess
import sys
from pathlib import Path

import psutil

from kmds_desktop import paths, selftest

REPO = Path(__file__).resolve().parent.parent
EXPECTED_FACTS = (
    "offscreen", "demo KB", "index", "offline answer", "PostgreSQL: 3 imported, 2 ids, 2 fetched",
)


def _postgres_running_in(folder: Path) -> list[int]:
    """Pids of PostgreSQL servers whose data folder is inside ``folder``."""
    found = []
    for proc in psutil.process_iter(attrs=("name", "cmdline")):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if (proc.info.get("name") or "").startswith("postgres") and str(folder) in cmdline:
            found.append(proc.pid)
    return found


def test_self_test_passes_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """Exit 0 with one summary line; the user's data folder gets nothing (no index, database, settings, log);
    the temporary folder is removed and no server is left running."""
    user_home = tmp_path / "user-data"
    user_home.mkdir()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, KMDS_DESKTOP_HOME=str(user_home), TMPDIR=str(tmp), QT_QPA_PLATFORM="xcb")
    out = subprocess.run(
        [sys.executable, "-m", "kmds_desktop", "--self-test"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout
    summary = lines[0]
    assert summary.startswith("kmds-desktop self-test OK"), summary
    for fact in EXPECTED_FACTS:
        assert fact in summary, summary
    # The check ran offscreen even though the environment asked for xcb (no display here).
    written = {p.name for p in user_home.iterdir()}
    assert written == set(), written  # not even a log file
    assert list(tmp.iterdir()) == [], list(tmp.iterdir())
    assert _postgres_running_in(tmp) == []


def test_failed_step_exits_non_zero_with_reason_and_stops_server(monkeypatch) -> None:
    """A failing step after the database started: exit 1, one line naming the step and the reason,
    the data kept for reading, the server stopped; the caller's data folder setting is restored."""

    def broken(ctx: selftest._Context) -> None:
        raise selftest.SelfTestError("sample reason the user can read")

    monkeypatch.setattr(selftest, "STEPS", (
        ("literature database", selftest._step_literature),
        ("broken step", broken),
    ))
    before = paths.data_dir()
    out, err = io.StringIO(), io.StringIO()
    code = selftest.run_self_test(out=out, err=err)
    assert code == 1
    assert out.getvalue() == ""
    message = err.getvalue().strip()
    assert len(message.splitlines()) == 1, message
    assert "FAILED at broken step: sample reason the user can read" in message
    kept = Path(message.rsplit("kept in ", 1)[1].rstrip(")"))
    try:
        assert kept.is_dir() and kept != before
        assert (kept / "self-test.log").is_file()
        assert _postgres_running_in(kept) == []
        assert not (kept / "postgres" / "pgdata" / "postmaster.pid").exists()
        assert paths.data_dir() == before
    finally:
        import shutil

        shutil.rmtree(kept, ignore_errors=True)


def test_desktop_entry_is_valid() -> None:
    """The .desktop file has the keys a Linux menu needs and names the app's command and icon."""
    path = REPO / "resources" / "kmds-desktop.desktop"
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read(path, encoding="utf-8")
    entry = parser["Desktop Entry"]
    assert entry["Type"] == "Application"
    assert entry["Name"] == "KMDS Desktop"
    assert entry["Exec"].split()[0] == "kmds-desktop"
    assert entry["Icon"] == "kmds-desktop"
    assert entry["Categories"].endswith(";")
    icons = [p for p in (REPO / "resources").rglob("kmds-desktop.*") if p.suffix in (".png", ".svg")]
    assert icons, "no kmds-desktop icon under resources/"
