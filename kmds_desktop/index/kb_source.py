"""Where ``SemanticIndex.build`` reads a KB from: a file path, or a URL (as KMDS documents it).

A URL is fetched over HTTP(S) with bounds on size and time (a KB file comes from outside, so a
server that sends gigabytes or trickles bytes forever must not hang or fill the machine), saved
into a private temporary folder only for as long as it takes to parse it, and indexed under a
``kb_id`` derived from the URL, so building the same URL again updates the same entries.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from kmds_desktop.index.errors import KnowledgeBaseReadError
from kmds_desktop.kb import load_kb
from kmds_desktop.tasks import CancelToken, check

#: Largest KB accepted from a URL (a 10,000-observation KB is about 10 MB).
MAX_URL_BYTES = 256 * 1024 * 1024
#: Whole download must finish within this many seconds; each socket read within URL_READ_TIMEOUT_S.
URL_TIMEOUT_S = 120.0
URL_READ_TIMEOUT_S = 30.0
_READ_CHUNK = 256 * 1024


def is_url(kb_path: Any) -> bool:
    """Whether ``kb_path`` is a URL (``scheme://...``) rather than a file path."""
    return isinstance(kb_path, str) and "://" in kb_path[:16] and not kb_path.lower().startswith("file://")


def local_path(kb_path: str | os.PathLike[str]) -> Path:
    """A file path, also from a ``file://`` URL (never from ``Path("http://...")``, which mangles it)."""
    text = os.fspath(kb_path)
    if isinstance(text, str) and text.lower().startswith("file://"):
        return Path(urllib.request.url2pathname(urllib.parse.urlsplit(text).path)).expanduser()
    return Path(text).expanduser()


def kb_id_for_url(url: str) -> str:
    """Stable identity of a KB read from ``url`` (same length as a file's ``kb_id``)."""
    return hashlib.sha1(f"url:{url.strip()}".encode(), usedforsecurity=False).hexdigest()[:12]


def load_kb_url(url: str, *, max_bytes: int | None = None, timeout: float | None = None,
                cancel: CancelToken | None = None) -> Any:
    """Fetch ``url`` and load it as a KB; raises :class:`KnowledgeBaseReadError` naming the URL.

    ``max_bytes`` and ``timeout`` default to :data:`MAX_URL_BYTES` and :data:`URL_TIMEOUT_S`.
    """
    url = url.strip()
    max_bytes = MAX_URL_BYTES if max_bytes is None else max_bytes
    timeout = URL_TIMEOUT_S if timeout is None else timeout
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise KnowledgeBaseReadError(
            f"cannot read knowledge base {url}: only http(s) URLs and file paths are supported")
    folder = Path(tempfile.mkdtemp(prefix="kmds-kb-"))  # 0700, unpredictable name
    try:
        target = folder / "kb.xml"
        _download(url, target, max_bytes, timeout, cancel)

        try:
            return load_kb(target)
        except Exception as err:  # noqa: BLE001 - the KB core's error names the problem
            message = str(err).replace(str(target), url)
            raise KnowledgeBaseReadError(f"cannot read knowledge base {url}: {message}") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _download(url: str, target: Path, max_bytes: int, timeout: float, cancel: CancelToken | None) -> None:
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(url, headers={"User-Agent": "kmds-desktop"})  # noqa: S310 - http(s) only, checked above
    try:
        with urllib.request.urlopen(request, timeout=min(URL_READ_TIMEOUT_S, timeout)) as reply:  # noqa: S310 - as above
            declared = reply.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise KnowledgeBaseReadError(
                    f"cannot read knowledge base {url}: it is {int(declared):,} bytes, more than the "
                    f"{max_bytes:,} accepted")
            size = 0
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                while chunk := reply.read(_READ_CHUNK):
                    size += len(chunk)
                    if size > max_bytes:
                        raise KnowledgeBaseReadError(
                            f"cannot read knowledge base {url}: more than the {max_bytes:,} bytes accepted")
                    if time.monotonic() > deadline:
                        raise KnowledgeBaseReadError(
                            f"cannot read knowledge base {url}: the download took longer than {timeout:g} s")
                    check(cancel)
                    out.write(chunk)
    except KnowledgeBaseReadError:
        raise
    except urllib.error.HTTPError as err:
        raise KnowledgeBaseReadError(
            f"cannot read knowledge base {url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or err
        raise KnowledgeBaseReadError(f"cannot read knowledge base {url}: {reason}") from None
