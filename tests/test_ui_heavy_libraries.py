"""The window's process never loads torch, sentence-transformers or ChromaDB: the index process
embeds and stores, and the window reaches it over the index's private channel.

Their first import holds Python's GIL for 350-650 ms, which freezes the window even when done on a
worker thread (see ``bench/ui_stall.py``). The real app runs in a child process (this test process
has loaded torch for other tests): it starts, opens the demo KB, warms up, and answers a question
typed and clicked into the real widgets; the answer needs embeddings (offline routing and semantic
search), so the embedding model did run, in the index process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import json, os, sys
from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

app = QApplication(sys.argv)
state = {"asked": False, "answer": None}

HEAVY = ("torch", "sentence_transformers", "transformers", "chromadb")

def window():
    wins = [w for w in app.topLevelWidgets() if w.objectName() == "mainWindow"]
    return wins[0] if wins else None

def finished(result):
    state["answer"] = result

def check():
    win = window()
    if win is None or win.kb is None or win.jobs.is_busy("warmup"):
        QTimer.singleShot(100, check)
        return
    if not state["asked"]:
        state["asked"] = True
        win.ask.answer_finished.connect(finished)
        QTest.keyClicks(win.ask.question, "Which models were compared?")
        QTest.mouseClick(win.ask.ask_button, Qt.MouseButton.LeftButton)
    if state["answer"] is None or win.jobs.running():
        QTimer.singleShot(100, check)
        return
    result = state["answer"]
    index = win.index_holder["index"]
    print("RESULT " + json.dumps({
        "modules": sorted(m for m in HEAVY if m in sys.modules),
        "backend": result.backend,
        "records": len(result.results),
        "pid": os.getpid(),
        "embedded_in": getattr(index, "own_process", False),
        "index_pid": json.loads((index.persist_dir / "kmds-index-process.json").read_text())["pid"],
    }), flush=True)
    win.close()

QTimer.singleShot(100, check)
from kmds_desktop.ui.shell.app import run_app
print("EXIT", run_app(), flush=True)
"""


def test_the_window_process_answers_without_loading_torch(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "settings.json").write_text(json.dumps({"llm": {"backend": "offline"}}), encoding="utf-8")
    env = dict(os.environ, KMDS_DESKTOP_HOME=str(home), QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=280, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no answer: {proc.stdout[-2000:]} {proc.stderr[-3000:]}"
    seen = json.loads(lines[0][len("RESULT ") :])
    assert seen["backend"] == "offline" and seen["records"] > 0, seen
    assert seen["embedded_in"] is True
    assert seen["index_pid"] != seen["pid"]
    assert seen["modules"] == [], f"the window's process imported {seen['modules']}"
    assert "EXIT 0" in proc.stdout
