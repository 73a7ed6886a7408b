"""The embedded server can always be brought back, and a full disk is said up front or plainly.

Real faults only: a tmpfs of a few dozen MB that the import fills for real, a server left "shutting
down" by a backend that never ends, a postmaster killed with SIGKILL (stale ``postmaster.pid``), a
postmaster that answers nothing (SIGSTOP); the earlier app process that left each behind is a real
process that died without releasing the server. The next open is the app's own code, in this process
or as the CLI a user runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from support.pg_faults import (
    dead_instance_left_server,
    fill_disk,
    kill_processes,
    leave_server_shutting_down,
    leave_stale_pid_file,
    run_cli,
    server_processes,
    small_disk,
)

from kmds_desktop.literature.errors import DiskFull, ServerStartError
from kmds_desktop.literature.store.database import open_embedded
from kmds_desktop.literature.store.server import EmbeddedServer, default_server, import_space_needed

SCIFACT = "scifact/corpus.jsonl"
SCIFACT_RECORDS = 5183


@pytest.fixture()
def scratch() -> Iterator[Path]:
    """A folder of this test's own under the system's temporary folder, not pytest's: a pytest run
    that starts meanwhile sets its own base folder back to 0700, which locks out the server's
    unprivileged user (the app gives the folders above a data folder only the traverse bit)."""
    folder = Path(tempfile.mkdtemp(prefix="kmds-recovery-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture()
def app_home(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A data folder for the app (``KMDS_DESKTOP_HOME``); every server started in it is stopped,
    however stuck a test left it, and its files deleted."""
    home = _use_home(scratch / "home", monkeypatch)
    yield home
    _stop_everything(home)


def _use_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from kmds_desktop import paths

    home.mkdir()
    monkeypatch.setenv("KMDS_DESKTOP_HOME", str(home))
    paths.set_data_dir(None)
    return home


def _stop_everything(home: Path) -> None:
    pgdata = home / "postgres" / "pgdata"
    kill_processes(server_processes(pgdata))
    server = EmbeddedServer(home / "postgres")
    server.destroy()


def _one_sentence(note: str) -> None:
    """A note the user reads at a glance: one sentence, saying what was found and what was done."""
    assert note.endswith("."), note
    assert ". " not in note.rstrip("."), f"more than one sentence: {note}"


# --- a full disk ------------------------------------------------------------------------------------------
def test_import_that_fills_the_disk_says_what_is_missing_and_resumes_once_space_is_back(
        scratch, monkeypatch, literature_data):
    """The disk fills during the import for real: the error says how much is missing and where (never
    "fix or remove the file"); a start while the disk is still full says so; once the filler file is
    deleted the next open starts the server (crash recovery) and the same import completes."""
    # 224 MB: the server's files (~43 MB) and the estimate for SciFact (~125 MB) fit with room to
    # spare, so the import is allowed to begin; a filler file then takes the rest while it copies rows.
    with small_disk(scratch / "disk", "224m") as disk:
        home = _use_home(disk / "home", monkeypatch)
        try:
            db = open_embedded(home / "postgres")
            server = db.server
            filler: list[Path] = []

            def fill_on_first_progress(_done: int, _total: int | None, _message: str) -> None:
                if not filler:
                    filler.append(fill_disk(disk / "filler"))

            with pytest.raises(DiskFull) as failed:
                db.import_files([literature_data / SCIFACT], progress=fill_on_first_progress)
            message = str(failed.value)
            assert filler, "the import finished before the disk could be filled"
            assert str(server.pgdata) in message and "more" in message and "MB" in message, message
            assert "free space there or choose another data folder" in message, message
            assert "fix or remove" not in message and "\n" not in message, message
            db.close()

            # The app quits with the disk still full (its shutdown checkpoint cannot be written),
            # and the next start, disk still full, says so instead of quoting the log.
            server.stop()
            with pytest.raises(ServerStartError) as refused:
                open_embedded(home / "postgres")
            assert "is full" in str(refused.value) and str(server.pgdata) in str(refused.value)
            assert "free space there" in str(refused.value)

            filler[0].unlink()  # the user frees space
            db = open_embedded(home / "postgres")
            report = db.import_files([literature_data / SCIFACT])
            assert report.records == SCIFACT_RECORDS
            assert db.status()["documents"] == SCIFACT_RECORDS  # all there, none twice
            db.close()
        finally:
            _stop_everything(home)


def test_import_the_disk_cannot_hold_is_refused_up_front_in_the_cli(scratch, monkeypatch, literature_data):
    """64 MB: room for the server (~43 MB) but not for SciFact's estimate: refused before anything is
    written, with the need, the free space and the folder, in the library and in the CLI."""
    with small_disk(scratch / "disk", "64m") as disk:
        home = _use_home(disk / "home", monkeypatch)
        try:
            db = open_embedded(home / "postgres")
            corpus = literature_data / SCIFACT
            with pytest.raises(DiskFull) as refused:
                db.import_files([corpus])
            message = str(refused.value)
            needed = import_space_needed([corpus.stat().st_size])
            assert message.startswith("not imported: the file (8.7 MB) needs about"), message
            assert f"{needed / 1e6:,.0f} MB" in message, message
            assert f"free on {db.server.pgdata}; free space or choose another data folder" in message
            assert db.status()["documents"] == 0  # nothing was written

            done = run_cli(home, "literature", "import", str(corpus))
            assert done.returncode == 1, done.stdout + done.stderr
            errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
            assert len(errors) == 1, done.stderr
            assert "free space or choose another data folder" in errors[0], errors[0]
            assert "fix or remove" not in done.stderr
            assert db.status()["documents"] == 0
            db.close()
        finally:
            _stop_everything(home)


# --- a server left in a state no command gets past -------------------------------------------------------
def test_server_left_shutting_down_is_stopped_and_started_again_with_one_sentence(app_home):
    """An earlier app process asked the server to stop and died; a backend that never ends keeps it
    "shutting down" for good. The next command (the CLI, as a user runs it) stops it in immediate
    mode, starts it again and says so in one sentence."""
    stuck = leave_server_shutting_down(app_home)
    before = EmbeddedServer(app_home / "postgres").diagnose()
    assert before.state == "stopping" and before.pid == stuck and before.clients == []

    done = run_cli(app_home, "literature", "status")
    assert done.returncode == 0, done.stderr
    notes = [line.removeprefix("note: ") for line in done.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, done.stderr
    assert "was stuck shutting down (pid " + str(stuck) in notes[0], notes[0]
    assert "stopped it at once (immediate mode" in notes[0] and "started it again" in notes[0], notes[0]
    _one_sentence(notes[0])
    assert "documents" in done.stdout.lower()
    assert not psutil.pid_exists(stuck) or psutil.Process(stuck).status() == psutil.STATUS_ZOMBIE

    after = EmbeddedServer(app_home / "postgres").diagnose()
    assert after.state in ("ready", "stopped"), after  # stopped again by the CLI when it exited


def test_stale_pid_file_is_cleared_on_the_next_open_with_one_sentence(app_home):
    """The server was killed (SIGKILL, postmaster and children); its postmaster.pid names a dead
    process. The next open removes it, starts the server, and the note says what happened."""
    dead = leave_stale_pid_file(app_home)
    server = EmbeddedServer(app_home / "postgres")
    assert server.diagnose().state == "stale"

    server.start()
    notes = server.take_notes()
    assert len(notes) == 1 and f"names process {dead}" in notes[0], notes
    assert "removed the stale postmaster.pid and started it again" in notes[0], notes[0]
    _one_sentence(notes[0])
    assert server.diagnose().state == "ready"
    assert server.take_notes() == []  # said once
    server.release()


def test_server_that_answers_nothing_is_stopped_even_when_immediate_mode_hangs(app_home):
    """A postmaster that is stopped (SIGSTOP) takes connections into its backlog and answers none,
    and ignores pg_ctl's immediate stop: the next open escalates to signals, within seconds, and the
    window's path (a database opened on the default server) carries the note."""
    postmaster = dead_instance_left_server(app_home)
    processes = server_processes(app_home / "postgres" / "pgdata")
    os.kill(postmaster, signal.SIGSTOP)
    try:
        diag = EmbeddedServer(app_home / "postgres").diagnose()
        assert diag.state == "not answering" and diag.pid == postmaster, diag

        db = open_embedded(app_home / "postgres")
        from kmds_desktop.app.doctor import server_notes

        notes = server_notes(db)
        assert len(notes) == 1 and "was running but not answering" in notes[0], notes
        _one_sentence(notes[0])
        assert db.status()["documents"] == 0
        assert db.server.pid() != postmaster
        db.close()
        assert server_notes(db) == []
    finally:
        kill_processes(processes)


def test_wedged_server_used_by_a_live_app_process_is_left_alone(app_home):
    """A live app process is registered as the server's user: it may be mid-work, so the next start
    refuses with one line naming it, instead of stopping the server under it."""
    stuck = leave_server_shutting_down(app_home)
    server = EmbeddedServer(app_home / "postgres")
    live = psutil.Popen(["sleep", "60"])
    try:
        (app_home / "postgres" / "clients.json").write_text(f"[{live.pid}]")
        with pytest.raises(ServerStartError) as refused:
            server.start()
        assert f"process {live.pid} still uses it" in str(refused.value), refused.value
        assert server.diagnose().pid == stuck  # untouched
    finally:
        live.kill()
        live.wait()


def test_the_default_server_of_a_process_recovers_on_its_next_open(app_home):
    """The same process opens its database again after its own server got stuck (a window open for
    days): its own registration as the server's user does not count as another app using it."""
    import time

    import psycopg

    from kmds_desktop.app.doctor import server_notes

    root = app_home / "postgres"
    server = default_server(root)
    postmaster = server.pid()
    conn = psycopg.connect(**server.conninfo("postgres"), autocommit=True)
    try:
        os.kill(conn.execute("SELECT pg_backend_pid()").fetchone()[0], signal.SIGSTOP)
        os.kill(postmaster, signal.SIGINT)  # a fast stop that this backend holds up for good
        deadline = time.monotonic() + 30
        while server.diagnose().state != "stopping" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.diagnose().state == "stopping"

        db = open_embedded(root)
        notes = server_notes(db)
        assert len(notes) == 1 and f"was stuck shutting down (pid {postmaster})" in notes[0], notes
        assert db.status()["documents"] == 0 and db.server is server and server.pid() != postmaster
        db.close()
    finally:
        conn.close()


def test_window_says_in_its_message_bar_that_the_server_was_brought_back(qtbot, make_window, app_home):
    """The window opens the literature database on a worker; the server's note (here: a stale
    postmaster.pid removed) reaches the message bar, the one place the window shows messages."""
    dead = leave_stale_pid_file(app_home)
    window = make_window(literature_kwargs={"open_on_start": True})

    def noted() -> bool:
        return any("removed the stale postmaster.pid" in m.text for m in window.messages.history)

    qtbot.waitUntil(noted, timeout=120_000)
    note = next(m for m in window.messages.history if "removed the stale postmaster.pid" in m.text)
    assert note.level == "warning" and f"names process {dead}" in note.text
    _one_sentence(note.text)
    qtbot.waitUntil(lambda: window.literature.database is not None, timeout=60_000)
