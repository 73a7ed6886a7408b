"""Reading a file the user named: only a regular file, and only up to a stated number of bytes; and
writing one whole (:func:`write_user_text`).

Why one module: a path from the user (``check --known``, ``screen add --file``, ``screen
import-decisions``, the window's file pickers, an import's ``.gz``) can name anything: a symlink to
``/dev/zero`` or ``/dev/urandom`` that never ends, a FIFO that blocks until someone writes to it, a
folder, or a file larger than the job it is for. Read naively, the first fills memory (2–4 GB before
the kernel stops it) and the second hangs the job. Every such read goes through :func:`open_user_file`
(which opens without blocking and refuses what is not a regular file, checked on the open file, so a
path swapped after a check cannot slip through) and, for files read whole, :func:`read_user_bytes` /
:func:`read_user_text` (which refuse a file over its limit before holding it).

Every refusal is a :class:`UserFileError` (a ``ValueError``: the CLI prints it as one line, the window
shows it in the job's error) whose message names the file, says what is wrong and what to do. Each
limit's message gives the number and where to raise it: the environment variable
:data:`ENV_MAX_FILE_MB` (for files read whole) and :data:`ENV_MAX_GZIP_RATIO` (for the decompressed
size of a ``.gz`` import), read when the limit is applied, so the window and the CLI obey the same one.

Plain Python at the bottom of the import layers (see ``pyproject.toml``): the literature readers, the
application layer and the commands all use it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

#: Raises the size limit of every file read whole (known papers, screening records, decisions), in MB.
ENV_MAX_FILE_MB = "KMDS_DESKTOP_MAX_FILE_MB"
#: Raises how many times its size on disk a ``.gz`` import may decompress to.
ENV_MAX_GZIP_RATIO = "KMDS_DESKTOP_MAX_GZIP_RATIO"

_CHUNK = 1 << 20  # bytes read at a time: a limit is never reserved up front


class UserFileError(ValueError):
    """A file the user named cannot be read for this job; the message says why and what to do."""


def env_limit(name: str, default: int, *, scale: int = 1) -> int:
    """``default``, or the positive whole number in the environment variable ``name`` times ``scale``.

    A value that is not a positive whole number is an error naming the variable, not a silent
    fallback: the user set it to get a larger limit and must learn that it did not take."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise UserFileError(f"the environment variable {name}={raw[:40]!r} is not a positive whole number; "
                            "set it to one (or unset it for the default)")
    return int(raw) * scale


def file_limit(default: int) -> int:
    """The most bytes of a file read whole: ``default``, or :data:`ENV_MAX_FILE_MB` megabytes."""
    return env_limit(ENV_MAX_FILE_MB, default, scale=1 << 20)


def size_text(n: int) -> str:
    """A size for a message: ``20 MB`` for whole MiB, else ``1.4 MB``, ``305 KB`` or ``12 bytes``."""
    if n >= 1 << 20:
        mb = n / (1 << 20)
        return f"{mb:,.0f} MB" if mb == int(mb) or mb >= 100 else f"{mb:,.1f} MB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):,.0f} KB"
    return f"{n:,} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode):
        return "a character device (like /dev/zero)"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_user_file(path: str | Path, what: str = "file") -> BinaryIO:
    """``path`` opened for binary reading, if it is a regular file (after symlinks); else an error.

    Opened with ``O_NONBLOCK`` so a FIFO does not hang the open, then checked with ``fstat`` on the
    open descriptor (no window between a check and the open). ``what`` names the file's job in the
    messages ("known-papers file")."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)  # Windows: no newline translation
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UserFileError(f"cannot read {path}: no such file; check the path of the {what}") from None
    except IsADirectoryError:
        raise UserFileError(f"{path} is a folder, not a file: choose the {what} itself") from None
    except OSError as err:
        raise UserFileError(f"cannot open the {what} {path}: {err.strerror or err}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UserFileError(f"{path} is {_kind(mode)}, not a file: choose a {what} saved on disk")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: reads as usual from here
        return os.fdopen(fd, "rb")
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def too_large(path: str | Path, size: str, limit: int, what: str) -> UserFileError:
    """The error for a file over its limit: the number, and where to raise it."""
    return UserFileError(
        f"{path} is {size}, larger than {size_text(limit)}, the limit for a {what}; split it, or raise the "
        f"limit with the environment variable {ENV_MAX_FILE_MB} (in MB)")


def read_user_bytes(path: str | Path, limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file ``path``, refused when over ``limit`` bytes.

    The size on disk is checked before anything is read, and the read stops one byte past the limit
    (a file that grows meanwhile, or a ``/proc`` file that says size 0, is still bounded), reading in
    pieces so the limit is never allocated for a small file."""
    with open_user_file(path, what) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise too_large(path, size_text(size), limit, what)
        data = bytearray()
        try:
            while chunk := fh.read(min(_CHUNK, limit + 1 - len(data))):
                data += chunk
                if len(data) > limit:
                    raise too_large(path, "still growing", limit, what)
        except OSError as err:
            raise UserFileError(f"cannot read the {what} {path}: {err.strerror or err}") from None
        return bytes(data)


def read_user_text(path: str | Path, limit: int, what: str = "file", *, errors: str = "strict") -> str:
    """:func:`read_user_bytes` decoded as UTF-8 (a byte-order mark dropped); bytes that are not UTF-8
    are an error saying where (``errors="replace"`` keeps them as U+FFFD instead)."""
    data = read_user_bytes(path, limit, what)
    try:
        return data.decode("utf-8-sig", errors=errors)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise UserFileError(f"{path}: line {line} is not UTF-8 text ({err.reason} at byte {err.start:,}); "
                            f"save the {what} as UTF-8 and try again") from None


def write_user_text(target: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) beside ``target`` first and move it over in one step: a reader (or a
    crash, or a full disk) never meets a half-written file, and an older file of that name survives a
    failed write (writing in place left it truncated)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
