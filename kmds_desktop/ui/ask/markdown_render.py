"""Markdown to HTML for the answer and detail views, with one converter built once.

``markdown.markdown(text, extensions=["extra"])`` builds a new converter on every call and looks the
extension names up through the installed packages' entry points, which takes ~100 ms. On the GUI
thread that is a visible stutter, so the views share one converter built from extension objects.
"""

from __future__ import annotations

import threading

import markdown
from markdown.extensions.extra import ExtraExtension
from markdown.extensions.sane_lists import SaneListExtension

_converter: markdown.Markdown | None = None
#: The workers' converter (answers are rendered on the worker that wrote them), one at a time.
_worker_converter: markdown.Markdown | None = None
_worker_lock = threading.Lock()


def _build() -> markdown.Markdown:
    return markdown.Markdown(extensions=[ExtraExtension(), SaneListExtension()], output_format="html")


def prepare() -> None:
    """Build the shared converter ahead of time, on a worker (the start-up warm-up).

    Building it takes 40-100 ms of Python work; done lazily, that lands on the GUI thread just
    when the first answer arrives. The worker only builds it and never converts with it, so the
    GUI thread remains its only user.
    """
    global _converter
    if _converter is None:
        built = _build()
        if _converter is None:
            _converter = built


def to_html(text: str) -> str:
    """HTML for ``text``; the GUI thread and the workers each have a converter (not thread-safe)."""
    global _converter, _worker_converter
    if threading.current_thread() is not threading.main_thread():
        with _worker_lock:
            if _worker_converter is None:
                _worker_converter = _build()
            return _worker_converter.reset().convert(text or "")
    if _converter is None:
        _converter = _build()
    return _converter.reset().convert(text or "")
