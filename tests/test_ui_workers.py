"""The job runner: results, errors, cancel reaching the function, one job per kind, busy feedback."""

from __future__ import annotations

import threading
import time

import pytest

from kmds_desktop.tasks import Cancelled, CancelToken
from kmds_desktop.ui.jobs.runner import JobRunner, live_running_threads


@pytest.fixture()
def runner(qtbot):
    jobs = JobRunner()
    yield jobs
    jobs.shutdown()


def _slow_count(n: int, *, delay: float = 0.01, progress=None, cancel: CancelToken | None = None) -> int:
    for i in range(n):
        if cancel is not None and cancel.wait(delay):
            raise Cancelled("stop")
        if progress:
            progress(i + 1, n, f"step {i + 1}")
    return n


def test_result_arrives_on_gui_thread_with_progress(qtbot, runner):
    seen: dict = {"progress": []}
    gui = threading.get_ident()

    def on_result(value):
        seen["value"] = value
        seen["thread"] = threading.get_ident()

    job = runner.submit(
        "count", _slow_count, 20, on_result=on_result, on_progress=lambda *a: seen["progress"].append(a)
    )
    with qtbot.waitSignal(job.finished, timeout=10_000):
        pass
    assert seen["value"] == 20
    assert seen["thread"] == gui
    assert seen["progress"][-1] == (20, 20, "step 20")  # the final progress is never throttled away
    assert job.state == "done"
    assert not live_running_threads()


def test_error_is_delivered_not_raised(qtbot, runner):
    errors = []

    def boom(progress=None, cancel=None):
        raise ValueError("bad file /tmp/x.xml")

    job = runner.submit("boom", boom, on_error=errors.append)
    with qtbot.waitSignal(job.finished, timeout=10_000):
        pass
    assert job.state == "failed"
    assert isinstance(errors[0], ValueError) and "bad file" in str(errors[0])


def test_cancel_reaches_the_function_through_its_hook(qtbot, runner):
    hook_ran = threading.Event()
    entered = threading.Event()
    cancelled = []
    released_by_hook: list[bool] = []

    def blocking(progress=None, cancel=None):
        released = threading.Event()
        cancel.add_hook(lambda: (hook_ran.set(), released.set()))
        entered.set()
        # stands in for a blocked socket read that the hook aborts; True only when the hook released it
        released_by_hook.append(released.wait(120))
        raise ConnectionError("socket closed")

    job = runner.submit("block", blocking, on_cancelled=lambda: cancelled.append(True))
    qtbot.waitUntil(entered.is_set, timeout=10_000)
    with qtbot.waitSignal(job.finished, timeout=60_000):
        job.cancel()
    assert released_by_hook == [True], "the cancel hook ended the blocked call"
    assert hook_ran.is_set()
    assert job.state == "cancelled" and cancelled == [True]  # the abort error is not reported


def test_one_job_per_kind_refuse_and_latest(qtbot, runner):
    refused = []
    runner.refused.connect(lambda kind, msg: refused.append((kind, msg)))
    first = runner.submit("ask", _slow_count, 30, label="Answering")
    assert runner.submit("ask", _slow_count, 1) is None
    assert refused and refused[0][0] == "ask" and "Answering" in refused[0][1]

    results = []
    a = runner.submit("index.build", _slow_count, 10, on_result=results.append)
    b = runner.submit("index.build", _slow_count, 2, on_result=results.append)
    c = runner.submit("index.build", _slow_count, 3, on_result=results.append)
    assert a.running and b.state == "cancelled" and c.state == "queued"
    assert runner.wait_all(15_000)
    assert results == [10, 3]  # the superseded request never ran
    assert first.state == "done"


def test_busy_cursor_and_progress_strip_only_for_slow_jobs(qtbot, runner):
    shown, busy = [], []
    runner.job_shown.connect(shown.append)
    runner.busy_changed.connect(busy.append)
    quick = runner.submit("quick", _slow_count, 1, delay=0.001)
    with qtbot.waitSignal(quick.finished, timeout=5_000):
        pass
    qtbot.wait(700)
    assert shown == [] and busy == []
    slow = runner.submit("slow", _slow_count, 100, delay=0.01)
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=5_000)
    assert busy == [True] and shown[0] is slow
    with qtbot.waitSignal(slow.finished, timeout=10_000):
        pass
    assert busy == [True, False]


def test_shutdown_cancels_and_joins(qtbot):
    jobs = JobRunner()
    job = jobs.submit("long", _slow_count, 10_000, delay=0.01)
    qtbot.wait(30)
    jobs.shutdown()
    assert not live_running_threads()
    assert job.state == "cancelled"
    assert jobs.submit("long", _slow_count, 1) is None  # closed for business


def test_streamed_chunks_arrive_in_order(qtbot, runner):
    pieces = []

    def stream(progress=None, cancel=None, chunk=None):
        for i in range(200):
            chunk(f"{i},")
        return "done"

    job = runner.submit("stream", stream, on_chunk=pieces.append)
    with qtbot.waitSignal(job.finished, timeout=5_000):
        pass
    assert "".join(pieces) == "".join(f"{i}," for i in range(200))
    assert len(pieces) < 200  # batched, so the GUI thread is not flooded
    assert job.value == "done"


def test_text_around_other_pieces_is_still_batched(qtbot, runner):
    """A marker among the pieces (an answer's records, its rendered HTML) keeps its place in the
    order, and the text on each side of it still comes as one piece, not hundreds."""
    pieces = []

    def stream(progress=None, cancel=None, chunk=None):
        chunk(("records", 1))
        for i in range(300):
            chunk(f"{i},")
        chunk(("rendered", 2))
        return "done"

    job = runner.submit("stream", stream, on_chunk=pieces.append)
    with qtbot.waitSignal(job.finished, timeout=5_000):
        pass
    markers = [p for p in pieces if isinstance(p, tuple)]
    assert markers == [("records", 1), ("rendered", 2)]
    assert pieces[0] == ("records", 1) and pieces[-1] == ("rendered", 2)
    text = [p for p in pieces if isinstance(p, str)]
    assert "".join(text) == "".join(f"{i}," for i in range(300))
    assert len(text) < 30


LEAKY_TEST = '''
import time
from kmds_desktop.ui.jobs.runner import JobRunner


def _sleep(*, progress=None, cancel=None):
    cancel.wait(30)


def test_leaks_a_thread(qtbot):
    jobs = JobRunner()
    jobs.submit("leak", _sleep, label="A job nobody waits for")
    time.sleep(0.2)
'''


def test_the_thread_guard_fails_a_test_that_leaks_a_running_qthread(tmp_path):
    """The autouse guard in tests/support/qt.py applies to every test: a leaking test fails."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests_dir = Path(__file__).resolve().parent
    (tmp_path / "conftest.py").write_text(
        "from support.qt import _qt_thread_guard, qt_loop  # noqa: F401\n", encoding="utf-8"
    )
    (tmp_path / "test_leaky.py").write_text(LEAKY_TEST, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tests_dir), str(tests_dir.parent)]),
               QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_leaky.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "test left running QThread" in out, out


def test_busy_cursor_after_300_ms_then_progress_with_cancel_after_600_ms(qtbot, runner):
    """The window's feedback timeline for one slow job, as the user sees it."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from kmds_desktop.ui.jobs.progress_strip import ProgressStrip

    strip = ProgressStrip(runner)
    qtbot.addWidget(strip)
    seen: dict[str, float] = {}
    runner.busy_changed.connect(lambda on: seen.setdefault("busy" if on else "idle", time.monotonic()))
    runner.job_shown.connect(lambda _job: seen.setdefault("shown", time.monotonic()))
    started = time.monotonic()
    job = runner.submit("slow", _slow_count, 500, delay=0.01)
    qtbot.waitUntil(lambda: "busy" in seen, timeout=5_000)
    assert QApplication.overrideCursor() is not None
    assert QApplication.overrideCursor().shape() == Qt.CursorShape.BusyCursor
    assert "shown" not in seen and strip.isHidden()
    qtbot.waitUntil(lambda: "shown" in seen, timeout=5_000)
    # Qt's default (coarse) timers may fire up to 5 % early.
    assert seen["busy"] - started >= 0.28 and seen["shown"] - started >= 0.56, seen
    assert seen["shown"] - seen["busy"] >= 0.2, seen
    row = strip.row_for("slow")
    assert not strip.isHidden() and row is not None and not row.cancel_button.isHidden()
    with qtbot.waitSignal(job.finished, timeout=5_000):
        row.cancel_button.click()
    assert job.state == "cancelled" and strip.row_for("slow") is None
    assert QApplication.overrideCursor() is None


def test_a_finished_worker_is_destroyed_on_the_gui_thread(qtbot, runner):
    """Destroyed on its own thread, a worker took the GIL inside Qt's connection lock and could
    deadlock with the GUI thread; it moves back when its run ends and is destroyed there."""
    from PySide6.QtCore import Qt

    go = threading.Event()
    destroyed_on: list[int] = []

    def wait_then_stream(progress=None, cancel=None, chunk=None):
        go.wait(10)
        for i in range(50):
            chunk(f"{i},")
        return "done"

    job = runner.submit("stream", wait_then_stream, on_chunk=lambda _p: None)
    worker = job._worker
    worker.destroyed.connect(lambda *_: destroyed_on.append(threading.get_ident()),
                             Qt.ConnectionType.DirectConnection)
    del worker
    go.set()
    qtbot.waitUntil(lambda: job.done, timeout=5_000)
    qtbot.waitUntil(lambda: bool(destroyed_on), timeout=5_000)
    assert job.value == "done"
    assert destroyed_on == [threading.main_thread().ident]


def test_concurrent_jobs_share_one_progress_line_and_one_cancel(qtbot, runner):
    """Two slow jobs: one line naming both, one bar, one Cancel whose menu stops either or both."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QProgressBar, QToolButton

    from kmds_desktop.ui.jobs.progress_strip import ProgressStrip

    strip = ProgressStrip(runner)
    qtbot.addWidget(strip)
    strip.show()
    first = runner.submit("first", _slow_count, 3000, delay=0.01, label="Building the index")
    second = runner.submit("second", _slow_count, 3000, delay=0.01, label="Generating queries")
    qtbot.waitUntil(lambda: len(strip.rows()) == 2, timeout=10_000)
    assert len(strip.findChildren(QProgressBar)) == 1 and len(strip.findChildren(QToolButton)) == 1
    assert strip.label.text().startswith("2 tasks: Generating queries")
    assert "Building the index" in strip.label.toolTip() and "Generating queries" in strip.label.toolTip()
    actions = [a.text() for a in strip.cancel_button.menu().actions() if a.text()]
    assert actions == ["Stop: Building the index", "Stop: Generating queries", "Stop all"]
    with qtbot.waitSignal(second.finished, timeout=10_000):
        strip.cancel_button.menu().actions()[1].trigger()
    assert second.state == "cancelled" and first.running
    qtbot.waitUntil(lambda: len(strip.rows()) == 1, timeout=10_000)
    assert strip.cancel_button.menu() is None and strip.label.text().startswith("Building the index")
    with qtbot.waitSignal(first.finished, timeout=10_000):
        qtbot.mouseClick(strip.cancel_button, Qt.MouseButton.LeftButton)
    assert first.state == "cancelled" and strip.isHidden()


def _repeating_warm_up(*, progress=None, cancel: CancelToken | None = None) -> str:
    """The first start's warm-up: its progress message says the job's name again."""
    if progress:
        progress(1, 2, "loading the embedding model")
    while cancel is not None and not cancel.wait(0.01):
        pass
    raise Cancelled("stop")


def test_first_start_status_line_says_each_job_once_and_fits(qtbot, runner):
    """The warm-up and the first index build at once: the status line names both jobs, each once,
    whole (no "…"); alone, the warm-up reads "Loading the embedding model", not its name twice."""
    from PySide6.QtCore import Qt

    from kmds_desktop.ui.jobs.progress_strip import ProgressStrip

    strip = ProgressStrip(runner)
    qtbot.addWidget(strip)
    strip.show()
    warm = runner.submit("warmup", _repeating_warm_up, label="Loading the embedding model")
    index = runner.submit("index", _slow_count, 3000, delay=0.01, label="Indexing the knowledge base")
    qtbot.waitUntil(lambda: len(strip.rows()) == 2 and strip.rows()[0].message != "", timeout=10_000)
    assert strip.label.text() == "2 tasks: Indexing the knowledge base · Loading the embedding model"
    assert "Loading the embedding model: loading" not in strip.label.toolTip()
    assert "Indexing the knowledge base: step" in strip.label.toolTip()
    with qtbot.waitSignal(index.finished, timeout=10_000):
        strip.cancel_button.menu().actions()[1].trigger()
    qtbot.waitUntil(lambda: len(strip.rows()) == 1, timeout=10_000)
    assert strip.label.text() == "Loading the embedding model"
    with qtbot.waitSignal(warm.finished, timeout=10_000):
        qtbot.mouseClick(strip.cancel_button, Qt.MouseButton.LeftButton)
    assert strip.isHidden()


def test_a_report_held_back_is_sent_when_the_job_then_stalls(qtbot, runner):
    """Two reports within the throttle's interval, then a long step: the second is the one shown
    through the stall (before, it was dropped, and the first showed until the step ended)."""
    stalled, go_on = threading.Event(), threading.Event()
    seen: list[tuple] = []

    def two_reports_then_a_stall(*, progress=None, cancel=None) -> str:
        progress(0, 10, "starting")
        progress(1, 10, "one of ten done")  # within the interval: held back
        stalled.set()
        go_on.wait(30)
        return "done"

    job = runner.submit("stall", two_reports_then_a_stall, on_progress=lambda *a: seen.append(a))
    assert stalled.wait(10)
    qtbot.waitUntil(lambda: any(m == "one of ten done" for _, _, m in seen), timeout=5_000)
    assert job.running  # sent during the stall, not at the end
    go_on.set()
    qtbot.waitUntil(lambda: job.done, timeout=10_000)
    assert [m for _, _, m in seen] == ["starting", "one of ten done"]  # once each, in order


def test_the_last_report_arrives_before_the_outcome_and_none_after(qtbot, runner):
    """A report held back when the job ends goes out before its result, and nothing after it."""
    seen: list[str] = []

    def ends_right_after_two_reports(*, progress=None, cancel=None) -> int:
        progress(0, 10, "starting")
        progress(1, 10, "held")
        return 1

    runner.submit("end", ends_right_after_two_reports, on_progress=lambda *a: seen.append(a[2]),
                  on_result=lambda _: seen.append("result"))
    qtbot.waitUntil(lambda: "result" in seen, timeout=10_000)
    qtbot.wait(200)  # past the throttle's interval: a timer left running would send "held" again now
    assert seen == ["starting", "held", "result"]
