"""``kmds-desktop doctor`` and Help > Diagnose data folder: the report on a healthy folder and on a
broken one (a server left shutting down, a hot SQLite journal), diagnosis alone and with repair.

The faults are real (see :mod:`support.pg_faults`); the CLI runs as a separate process, as a user
runs it; the window is the real one, its menu clicked.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.menus import click_menu
from support.pg_faults import (
    kill_processes,
    leave_hot_journal,
    leave_server_shutting_down,
    run_cli,
    server_processes,
    sqlite_rows,
)

from kmds_desktop.literature.store.server import EmbeddedServer


@pytest.fixture()
def app_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A data folder outside pytest's base folder (see ``test_server_recovery.scratch``); every server
    started in it is stopped however stuck, and its files deleted."""
    from kmds_desktop import paths

    scratch = Path(tempfile.mkdtemp(prefix="kmds-doctor-"))
    home = scratch / "home"
    home.mkdir()
    monkeypatch.setenv("KMDS_DESKTOP_HOME", str(home))
    paths.set_data_dir(None)
    yield home
    kill_processes(server_processes(home / "postgres" / "pgdata"))
    EmbeddedServer(home / "postgres").destroy()
    shutil.rmtree(scratch, ignore_errors=True)


def _finding(report: dict, name: str) -> dict:
    found = [f for f in report["findings"] if f["name"] == name]
    assert len(found) == 1, report["findings"]
    return found[0]


def test_doctor_on_a_healthy_folder(app_home):
    """A folder whose server was used and stopped cleanly: healthy, exit 0, the logs named; --json
    says the same in fields."""
    used = run_cli(app_home, "literature", "status")
    assert used.returncode == 0, used.stderr
    assert "note:" not in used.stderr  # nothing was wrong, nothing to say

    done = run_cli(app_home, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Data folder: {app_home}" in done.stdout
    assert "Diagnosis: healthy" in done.stdout
    server_line = next(line for line in done.stdout.splitlines() if "embedded PostgreSQL" in line)
    assert server_line.startswith("OK") and "stopped" in server_line, server_line
    assert "PROBLEM" not in done.stdout
    assert f"embedded PostgreSQL: {app_home / 'postgres' / 'pgdata' / 'server.log'}" in done.stdout

    done = run_cli(app_home, "doctor", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["healthy"] is True and report["data_folder"] == str(app_home)
    assert {f["area"] for f in report["findings"]} == {"server", "indexes", "journals", "space"}
    assert _finding(report, "embedded PostgreSQL")["status"] == "ok"
    assert _finding(report, "interrupted writes")["status"] == "ok"
    assert _finding(report, "free space")["status"] in ("ok", "warning")
    assert Path(report["logs"]["embedded PostgreSQL"]).is_file()


def test_doctor_on_a_broken_folder_diagnoses_then_repairs(app_home):
    """A server left shutting down by a dead app process and a hot journal beside a SQLite file:
    ``--no-repair`` reports both and changes nothing (exit 1); ``doctor`` brings the server back,
    lets SQLite roll the journal back (the committed rows are all there), and exits 0."""
    stuck = leave_server_shutting_down(app_home)
    screening = app_home / "screening"
    screening.mkdir()
    leave_hot_journal(screening / "screening.sqlite3", rows=10)

    done = run_cli(app_home, "doctor", "--no-repair", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["healthy"] is False and report["repair"] is False
    server = _finding(report, "embedded PostgreSQL")
    assert server["status"] == "problem" and f"stuck shutting down (pid {stuck})" in server["detail"], server
    journal = _finding(report, "journal of screening.sqlite3")
    assert journal["status"] == "warning" and "screening.sqlite3-journal" in journal["detail"], journal
    assert EmbeddedServer(app_home / "postgres").diagnose().pid == stuck  # left as it was
    assert (screening / "screening.sqlite3-journal").exists()

    done = run_cli(app_home, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    server_line = next(line for line in lines if "embedded PostgreSQL " in line)
    assert server_line.startswith("REPAIRED"), server_line
    assert f"was stuck shutting down (pid {stuck})" in server_line and "started it again" in server_line
    assert "stopped again as no KMDS Desktop uses it" in server_line
    journal_line = next(line for line in lines if "journal of screening.sqlite3" in line)
    assert journal_line.startswith("REPAIRED"), journal_line
    assert "Diagnosis: healthy" in done.stdout
    assert sqlite_rows(screening / "screening.sqlite3") == 10  # the dead write rolled back, nothing lost
    assert EmbeddedServer(app_home / "postgres").diagnose().state == "stopped"

    done = run_cli(app_home, "doctor", "--json")  # nothing left to repair
    report = json.loads(done.stdout)
    assert done.returncode == 0 and not [f for f in report["findings"] if f["status"] == "repaired"]


def test_help_menu_diagnoses_the_data_folder_in_a_dialog(qtbot, make_window, data_home):
    """Help > Diagnose data folder… runs the doctor on a worker and shows its report in a dialog:
    here the data folder's hot journal, repaired, and where the logs are."""
    from PySide6.QtWidgets import QDialog, QPlainTextEdit

    screening = data_home / "screening"
    screening.mkdir()
    leave_hot_journal(screening / "screening.sqlite3", rows=3)
    window = make_window()

    click_menu(qtbot, window, "&Help", "&Diagnose data folder…")

    def dialog_shown() -> bool:
        dialog = window.active_dialog
        return isinstance(dialog, QDialog) and dialog.objectName() == "diagnosisDialog" and dialog.isVisible()

    qtbot.waitUntil(dialog_shown, timeout=60_000)
    dialog = window.active_dialog
    text = dialog.findChild(QPlainTextEdit, "diagnosisReport").toPlainText()
    assert f"Data folder: {data_home}" in text
    assert "Diagnosis: healthy" in text and "healthy" in dialog.windowTitle()
    repaired = [line for line in text.splitlines() if line.startswith("REPAIRED")]
    assert len(repaired) == 1 and "screening.sqlite3" in repaired[0], text
    assert "Logs:" in text
    assert sqlite_rows(screening / "screening.sqlite3") == 3
    dialog.close()
