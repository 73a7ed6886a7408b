"""Test set-up shared by every test: an isolated data folder, offscreen Qt, no network for models.

Area-specific fixtures live in ``tests/support/`` and are imported below so every test sees them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Set before anything imports Qt, ChromaDB or Hugging Face libraries.
_SESSION_HOME = Path(tempfile.mkdtemp(prefix="kmds-desktop-test-home-"))
# Removed when the test process ends (after session fixtures have stopped their servers).
atexit.register(shutil.rmtree, _SESSION_HOME, ignore_errors=True)
os.environ["KMDS_DESKTOP_HOME"] = str(_SESSION_HOME)
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ.pop("GOOGLE_API_KEY", None)

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = (REPO_ROOT.parent / "shared").resolve()
KMDS_DATA = SHARED / "data" / "kmds"
LITERATURE_DATA = SHARED / "data" / "literature"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` — fails loudly when missing (CI always has it)."""
    assert SHARED.is_dir(), f"shared data folder missing: {SHARED}"
    return SHARED


@pytest.fixture(scope="session")
def kmds_data(shared_dir: Path) -> Path:
    return shared_dir / "data" / "kmds"


@pytest.fixture(scope="session")
def literature_data(shared_dir: Path) -> Path:
    return shared_dir / "data" / "literature"


@pytest.fixture()
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, private data folder for one test."""
    from kmds_desktop import paths

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("KMDS_DESKTOP_HOME", str(home))
    paths.set_data_dir(None)
    return home


@pytest.fixture()
def fake_ollama():
    """A running :class:`~support.fake_ollama.FakeOllama` with no models; tests add scripts to ``.models``."""
    from support.fake_ollama import FakeOllama

    with FakeOllama() as server:
        yield server


from support.fulltext import pdf_import, pdf_store  # noqa: E402,F401 - the 40 shared PDFs, imported once
from support.memory_keyring import memory_keyring  # noqa: E402,F401 - in-memory OS keyring
from support.pg import *  # noqa: E402, F403 - PostgreSQL fixtures (pg_database, pg_dsn, ...)
from support.qt import _qt_thread_guard, jobs, make_window, qt_loop, ui_index  # noqa: E402,F401 - Qt fixtures
