"""Where the app keeps what it writes.

Everything the app writes (settings, semantic indexes, the embedded database, logs) lives under one
data folder, so tests and scripts can point the whole app elsewhere and never touch a user's data.
Resolution order: an explicit ``set_data_dir`` call (the CLI's ``--data-dir``), then the
``KMDS_DESKTOP_HOME`` environment variable, then the platform's user data dir.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "kmds-desktop"
ENV_HOME = "KMDS_DESKTOP_HOME"

_override: Path | None = None


def set_data_dir(path: str | os.PathLike[str] | None) -> None:
    """Point every later ``data_dir()`` call at ``path`` (``None`` restores the default lookup)."""
    global _override
    _override = Path(path).expanduser().resolve() if path is not None else None


def data_dir(create: bool = True) -> Path:
    """The one folder the app writes into (created on first use)."""
    if _override is not None:
        base = _override
    elif os.environ.get(ENV_HOME):
        base = Path(os.environ[ENV_HOME]).expanduser().resolve()
    else:
        base = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    if create:
        base.mkdir(parents=True, exist_ok=True)
    return base


def sub_dir(name: str, create: bool = True) -> Path:
    """A named folder inside the data folder (``index``, ``postgres``, ``logs``...)."""
    path = data_dir(create) / name
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def settings_file() -> Path:
    return data_dir() / "settings.json"


def index_dir() -> Path:
    """Default persist_dir of the semantic index (ChromaDB)."""
    return sub_dir("index")


def postgres_dir() -> Path:
    """Data folder of the embedded PostgreSQL server."""
    return sub_dir("postgres")


def logs_dir() -> Path:
    return sub_dir("logs")


def resources_dir() -> Path:
    """The project's ``resources/`` folder (next to the package in a checkout or a bundle)."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "resources", here / "resources"):
        if candidate.is_dir():
            return candidate
    return here.parent / "resources"


def demo_kb_path() -> Path:
    """The demo knowledge base opened on first run."""
    return resources_dir() / "demo_kb.xml"
