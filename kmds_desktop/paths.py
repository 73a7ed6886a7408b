"""Where the app keeps what it writes.

Everything the app writes (settings, semantic indexes, the embedded database, logs) lives under one
data folder, so tests and scripts can point the whole app elsewhere and never touch a user's data.
Resolution order: an explicit ``set_data_dir`` call (the CLI's ``--data-dir``), then the
``KMDS_DESKTOP_HOME`` environment variable, then the platform's user data dir.

A workstation is shared, so the data folder and every folder the app makes in it are the user's
alone (0700), and the app's processes create files 0600 (``restrict_umask`` in the entry point): KB
recovery copies, logs, settings, the index and the database hold the user's work. A data folder that
already exists with group or other access is tightened when it belongs to the user (as root only the
"traverse" bit for others stays: the embedded PostgreSQL's unprivileged user must reach its files).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "kmds-desktop"
ENV_HOME = "KMDS_DESKTOP_HOME"

_override: Path | None = None


PRIVATE_UMASK = 0o077


def restrict_umask() -> None:
    """Make everything the app's processes create from now on private (folders 0700, files 0600).

    Called once by the entry point (not on import), so importing the package changes nothing."""
    if os.name != "nt":
        os.umask(PRIVATE_UMASK)


def current_umask() -> int:
    """The process umask (read without changing it where the OS allows)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # briefly set, then restored (only where /proc is missing)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode a newly created document gets under the current umask (0644 normally, 0600 in
    the app's own processes, which restrict the umask)."""
    return 0o666 & ~current_umask()


def make_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with the last folder 0700, or tighten the existing one.

    Only a folder that belongs to the current user is tightened; it loses group and other access
    (read, write and, unless we are root, traverse). Root keeps others' traverse bit (0701): the
    embedded PostgreSQL refuses to run as root and runs as an unprivileged user, which must pass
    through root's data folder to reach its cluster (docs/guide/cli.md says so).
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if os.name == "nt":
        return path
    try:
        st = path.stat()
        keep = 0o001 if os.geteuid() == 0 else 0
        if st.st_uid == os.geteuid() and st.st_mode & 0o077 & ~keep:
            path.chmod(st.st_mode & 0o7700 | (st.st_mode & keep))
    except OSError:
        pass
    return path


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
        make_private_dir(base)
    return base


def sub_dir(name: str, create: bool = True) -> Path:
    """A named folder inside the data folder (``index``, ``postgres``, ``logs``...)."""
    path = data_dir(create) / name
    if create:
        make_private_dir(path)
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
