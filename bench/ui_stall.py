"""GUI responsiveness while the app's own workers build the index, stream a slow answer and fetch documents.

A 10 ms heartbeat timer runs on the GUI thread of a real (offscreen) main window while, at the same
time and through the window's own ``JobRunner``:
  * the semantic index of a 400-observation synthetic KB is built from scratch,
  * a question is answered by a slow model (the fake Ollama server of the tests, in its own
    process: 0.5 s before each reply, the answer streamed in 4-character chunks),
  * 6,000 literature records are fetched from the embedded PostgreSQL database (imported once into
    ``bench/.data/``).
The index is the app's default: a folder in the data directory, served by the app's index process
(ChromaDB's calls hold the GIL, so the app keeps them out of its own process), which also computes
the embeddings: torch, sentence-transformers and ChromaDB never load in the window's process (the
first import of torch or sentence-transformers holds the GIL for 350-650 ms). Before the work,
start-up is measured from the window's first frame (the heartbeat starts once the first paint is
done; how long after ``show()`` that was is printed too), as ``run_app`` does it
(``MainWindow.start_up``): the KB opens and the warm-up job starts the index process and loads the
embedding model there. An idle control (same
heartbeat, no window, no job) gives the noise of this machine, and a plain Python process ticking
beside the app all along gives the machine's share of each phase's longest gap (other programs delay
every process). Every gap between heartbeats is recorded. For contrast, the same slow generation is
then run once directly on the GUI thread (what the workers exist to avoid).
Printed: whether torch, sentence-transformers or ChromaDB were imported in the window's process; heartbeats,
longest gap (when, and how much of it the GUI thread spent running rather than waiting) and 99th
percentile for start-up and for the work, each against the 50 ms target and with the plain
process's longest gap beside it, and for the GUI-thread contrast; the last line is
the longest gap from the first frame (start-up and work) over the 50 ms target (<= 1.0 passes).
Usage: ``.venv/bin/python bench/ui_stall.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / ".data" / "ui_stall"
DATA.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["KMDS_DESKTOP_HOME"] = str(DATA / "home")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(ROOT))

TARGET_MS = 50.0
N_OBSERVATIONS = 400
FETCH_IDS = 6000
LITERATURE = ROOT.parent / "shared" / "data" / "literature"


class Heartbeat:
    """Timestamps of a 10 ms GUI-thread timer; gaps show how long the GUI thread was blocked.

    Each tick also reads the GUI thread's CPU time, so the longest gap says how much of it the GUI
    thread spent running (its own work: slots, layout, paint) rather than waiting (for the GIL, or
    for the machine to run it at all).
    """

    def __init__(self) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.ticks: list[float] = []
        self.cpu: list[float] = []
        self.longest_at_s = 0.0  # start of the longest gap, seconds after start()
        self.longest_cpu_ms = 0.0  # GUI-thread CPU time within the longest gap
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        self.ticks.append(time.monotonic())
        self.cpu.append(time.thread_time())

    def start(self) -> None:
        self.ticks, self.cpu = [time.monotonic()], [time.thread_time()]
        self.window = (self.ticks[0], self.ticks[0])
        self.timer.start()

    def stop(self) -> tuple[int, float, float]:
        self.timer.stop()
        self._tick()
        self.window = (self.ticks[0], self.ticks[-1])
        gaps = [(b - a) * 1000 for a, b in zip(self.ticks, self.ticks[1:], strict=False)]
        if gaps:
            i = max(range(len(gaps)), key=gaps.__getitem__)
            self.longest_at_s = self.ticks[i] - self.ticks[0]
            self.longest_cpu_ms = (self.cpu[i + 1] - self.cpu[i]) * 1000
        gaps.sort()
        p99 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))] if gaps else 0.0
        return len(gaps), (gaps[-1] if gaps else 0.0), p99

    def longest(self) -> str:
        """Where the last phase's longest gap was and how much of it the GUI thread ran."""
        return f"at {self.longest_at_s:.2f} s, GUI thread running {self.longest_cpu_ms:.1f} ms of it"


class MachineNoise:
    """A plain Python process (no Qt, no jobs) ticking every 10 ms beside the app, from start to end.

    On a shared machine other programs delay any process's wake-ups; the longest gap this process
    sees during a phase of the app is the machine's share of the app's gap in that phase.
    """

    CODE = (
        "import json, sys, threading, time\n"
        "ticks, stop = [time.monotonic()], threading.Event()\n"
        "windows = []\n"
        "def read():\n"
        "    try:\n"  # an empty line: the bench ended without asking (it failed); stop all the same
        "        windows.extend(json.loads(sys.stdin.readline() or '[]'))\n"
        "    finally:\n"
        "        stop.set()\n"
        "threading.Thread(target=read, daemon=True).start()\n"
        "while not stop.is_set():\n"
        "    time.sleep(0.01)\n"
        "    ticks.append(time.monotonic())\n"
        "out = []\n"
        "for a, b in windows:\n"
        "    t = [x for x in ticks if a <= x <= b]\n"
        "    out.append(max((y - x for x, y in zip(t, t[1:])), default=0.0) * 1000)\n"
        "print(json.dumps(out), flush=True)\n"
    )

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.CODE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def longest_gaps(self, windows: list[tuple[float, float]]) -> list[float]:
        """The control process's longest gap (ms) within each ``(start, end)`` of ``time.monotonic``."""
        out, _ = self.proc.communicate(json.dumps(windows) + "\n", timeout=60)
        return [float(x) for x in json.loads(out)]


def run_until(predicate, timeout_s: float) -> None:
    """Run the Qt event loop (not a polling loop) until ``predicate()`` or the timeout."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    check = QTimer()
    check.setInterval(20)
    deadline = time.monotonic() + timeout_s
    check.timeout.connect(lambda: loop.quit() if predicate() or time.monotonic() > deadline else None)
    check.start()
    loop.exec()
    check.stop()


def _verdict(gap_ms: float) -> str:
    ratio = gap_ms / TARGET_MS
    return f"{ratio:.2f} x the {TARGET_MS:.0f} ms target ({'ok' if ratio <= 1.0 else 'OVER'})"


def literature_database():
    """The embedded database in bench/.data with the SciFact + PubMed sample corpora imported (once)."""
    from kmds_desktop.config import LiteratureSettings
    from kmds_desktop.literature import open_database

    db = open_database(settings=LiteratureSettings())
    if int(db.status().get("documents") or 0) < FETCH_IDS:
        print("importing the literature corpora into bench/.data (first run only)…", flush=True)
        db.import_files(
            [LITERATURE / "scifact" / "corpus.jsonl", LITERATURE / "pubmed_sample" / "corpus.jsonl"]
        )
    return db


class SlowModelServer:
    """The fake Ollama server in its own process, as a real Ollama is (in-process, its HTTP threads
    would compete with the app for the GIL and blur the measurement)."""

    def __init__(self, replies: list[str], delay: float) -> None:
        code = (
            "import json, sys, time\n"
            f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
            "from support.fake_ollama import FakeOllama, ModelScript\n"
            f"script = ModelScript(replies={replies!r}, delay={delay}, chunk_size=4)\n"
            "with FakeOllama({'slow-llm': script}) as fake:\n"
            "    print(fake.url, flush=True)\n"
            "    sys.stdin.read()\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.url = self.proc.stdout.readline().strip()

    def __enter__(self) -> SlowModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def main() -> int:
    import qasync
    from PySide6.QtWidgets import QApplication

    from kmds_desktop.config import Settings
    from kmds_desktop.kb.synthetic import write_synthetic_kb
    from kmds_desktop.llm import OllamaBackend
    from kmds_desktop.ui.shell.main_window import MainWindow
    from kmds_desktop.ui.shell.startup import settle_before_first_frame

    app = QApplication.instance() or QApplication(sys.argv)
    loop = qasync.QEventLoop(app)
    import asyncio

    asyncio.set_event_loop(loop)

    shutil.rmtree(DATA / "home" / "index", ignore_errors=True)  # index from scratch every run
    kb_path = DATA / f"synthetic_{N_OBSERVATIONS}.xml"
    if not kb_path.exists():
        write_synthetic_kb(kb_path, N_OBSERVATIONS)
    db = literature_database()

    route = {"intent_class": "semantic_search", "filters": {}, "explanation": "Open question."}
    answer = " ".join(f"Finding {i} shows a **pattern** in the data [{i % 5 + 1}]." for i in range(60))
    with SlowModelServer([json.dumps(route), answer], delay=0.5) as fake:
        settings = Settings()
        settings.llm.backend = "ollama"
        settings.llm.ollama_host = fake.url
        settings.llm.ollama_model = "slow-llm"
        noise = MachineNoise()
        beat = Heartbeat()
        beat.start()  # control: the same heartbeat with no window and no job (this machine's noise)
        run_until(lambda: False, 3.0)
        n_idle, worst_idle, p99_idle = beat.stop()

        settle_before_first_frame()  # as run_app does, before the window is shown
        window = MainWindow(
            settings,
            settings_path=DATA / "home" / "settings.json",
            literature_kwargs={"database": db, "open_on_start": False},
            auto_index=False,
            probe_llm=False,
        )  # the app's own index: the data folder's, served by its index process
        # Start-up as run_app does it, measured from the first frame (the heartbeat starts when the
        # window's first paint is done): then the KB opens and the warm-up job (index process,
        # embedding model) runs, both on workers.
        first_frame: list[float] = []
        window.first_frame_shown.connect(lambda: (first_frame.append(time.monotonic()), beat.start()))
        with_kb = []
        window.kb_loaded.connect(with_kb.append)
        shown_at = time.monotonic()
        window.show()
        window.start_up(kb_path)
        run_until(
            lambda: bool(with_kb) and len(window.startup_jobs) == 2
            and all(j.done for j in window.startup_jobs),
            300,
        )
        n_warm, worst_warm, p99_warm = beat.stop()
        startup_window, startup_where = beat.window, beat.longest()
        assert first_frame, "the window was never painted"
        to_first_frame = (first_frame[0] - shown_at) * 1000
        assert with_kb, "the KB did not load"
        states = {j.kind: j.state for j in window.startup_jobs}
        assert all(s == "done" for s in states.values()), states

        beat.start()
        started = time.perf_counter()
        only = os.environ.get("UI_STALL_ONLY", "index,ask,fetch").split(",")
        index_job = window.update_index() if "index" in only else None
        ask_job = window.ask.ask("Which patterns were found in the data?") if "ask" in only else None
        fetched: list[int] = [0]
        fetch_job = (
            window.jobs.submit(
                "literature.fetch",
                db.fetch_documents_by_ids,
                list(range(1, FETCH_IDS + 1)),
                label="Fetching documents",
                on_result=lambda docs: fetched.append(len(docs)),
            )
            if "fetch" in only
            else None
        )
        jobs = [j for j in (index_job, ask_job, fetch_job) if j is not None]
        assert len(jobs) == len(only), "a job was refused"
        run_until(lambda: all(j.done for j in jobs), 600)
        elapsed = time.perf_counter() - started
        n, worst, p99 = beat.stop()
        work_window, work_where = beat.window, beat.longest()
        states = {j.kind: j.state for j in jobs}
        assert all(s == "done" for s in states.values()), states
        result = ask_job.value if ask_job is not None else None

        # The contrast: the same slow generation, called on the GUI thread.
        llm = OllamaBackend(fake.url, "slow-llm")
        beat.start()
        llm.chat("Which patterns were found in the data?")
        n_gui, worst_gui, p99_gui = beat.stop()

        window.jobs.shutdown()
        window._force_close = True
        window.close()
    db.close()

    if result is not None:
        print(f"answer by {result.backend} ({result.synthesis}): {len(result.answer)} chars streamed")
    print(
        f"jobs: {', '.join(only)}; KB of {N_OBSERVATIONS} observations indexed from scratch; "
        f"{fetched[-1]} documents fetched"
    )
    noise_startup, noise_work = noise.longest_gaps([startup_window, work_window])
    heavy = [m for m in ("torch", "sentence_transformers", "chromadb") if m in sys.modules]
    print(f"heavy libraries in the window's process: {', '.join(heavy) or 'none'}")
    print(
        f"idle control (no job, 3 s): {n_idle} heartbeats, longest gap {worst_idle:7.1f} ms, "
        f"p99 {p99_idle:6.1f} ms; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"start-up (from the first frame, {to_first_frame:.0f} ms after show(): KB load + warm-up, "
        f"{n_warm} heartbeats): "
        f"longest gap {worst_warm:7.1f} ms ({startup_where}), p99 {p99_warm:6.1f} ms; "
        f"{_verdict(worst_warm)}; "
        f"a plain process beside it: {noise_startup:.1f} ms"
    )
    print(
        f"work     ({elapsed:5.1f} s of jobs on workers, {n} heartbeats):       "
        f"longest gap {worst:7.1f} ms ({work_where}), p99 {p99:6.1f} ms; {_verdict(worst)}; "
        f"a plain process beside it: {noise_work:.1f} ms"
    )
    print(
        f"contrast: one generation on the GUI thread ({n_gui} heartbeats): "
        f"longest gap {worst_gui:7.1f} ms, p99 {p99_gui:6.1f} ms"
    )
    worst_all = max(worst_warm, worst)
    print(
        f"longest gap from the first frame (start-up and work) / {TARGET_MS:.0f} ms target: "
        f"{worst_all / TARGET_MS:.2f} ({'within target' if worst_all <= TARGET_MS else 'OVER target'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
