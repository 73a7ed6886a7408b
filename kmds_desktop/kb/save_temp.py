"""The temporary files of atomic KB saves: created locked, and left-overs of killed saves removed.

A save writes ``.NAME.XXXXXXXX.tmp`` beside the KB and renames it over the KB. A process killed in
between leaves that file behind (hidden, the size of the KB). Each save first removes its KB's
left-overs, and tells a left-over from a save still running in another process by a lock: the
saving process holds an exclusive ``flock`` on its temporary file until the rename, and the
kernel drops that lock when the process dies, however it dies. A temporary file whose lock can be
taken therefore belongs to nobody and is removed; one still locked is left alone. Only regular
files owned by this user with exactly the temporary-file name pattern are touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on Windows: left-overs are recognised by age there
    fcntl = None  # type: ignore[assignment]

#: Without ``flock`` a left-over is removed only when older than this (no save takes an hour).
_UNLOCKED_MIN_AGE_S = 3600.0
#: ``tempfile.mkstemp``'s random part: 8 characters from this alphabet.
_RANDOM = r"[a-z0-9_]{8}"


def temp_pattern(target_name: str) -> re.Pattern[str]:
    """The names :func:`create_locked_temp` gives to the temporary files of ``target_name``."""
    return re.compile(rf"\.{re.escape(target_name)}\.{_RANDOM}\.tmp")


def create_locked_temp(folder: Path, target_name: str) -> tuple[int, int, Path]:
    """A new temporary file beside the target: ``(fd to write, lock fd, path)``.

    The lock fd shares the file's open description, so the lock lasts until the lock fd is
    closed even after the write fd is; close the lock fd only after the rename (or the removal).
    """
    fd, name = tempfile.mkstemp(prefix=f".{target_name}.", suffix=".tmp", dir=folder)
    lock_fd = os.dup(fd)
    if fcntl is not None:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
    return fd, lock_fd, Path(name)


def remove_stale_temps(folder: Path, target_name: str) -> int:
    """Remove the temporary files that killed saves of ``target_name`` left in ``folder``.

    Returns how many were removed. Never raises for a file it cannot inspect or remove: a
    left-over must not stop the save that cleans up.
    """
    pattern = temp_pattern(target_name)
    removed = 0
    try:
        entries = [e for e in os.scandir(folder) if pattern.fullmatch(e.name)]
    except OSError:
        return 0
    for entry in entries:
        with contextlib.suppress(OSError):
            if _remove_if_abandoned(Path(entry.path)):
                removed += 1
    return removed


def _remove_if_abandoned(path: Path) -> bool:
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        return False  # a link, a folder, someone else's file: not ours to remove
    if fcntl is None:
        if time.time() - info.st_mtime < _UNLOCKED_MIN_AGE_S:
            return False
        path.unlink()
        return True
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a save in progress holds it
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            return False  # replaced between the look and the open
        path.unlink()
        return True
    finally:
        os.close(fd)
