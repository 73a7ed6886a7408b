"""Markdown to HTML for the answer and detail views, with one converter built once.

``markdown.markdown(text, extensions=["extra"])`` builds a new converter on every call and looks the
extension names up through the installed packages' entry points, which takes ~100 ms. On the GUI
thread that is a visible stutter, so the views share one converter built from extension objects.
"""

from __future__ import annotations

import markdown
from markdown.extensions.extra import ExtraExtension
from markdown.extensions.sane_lists import SaneListExtension

_converter: markdown.Markdown | None = None


def to_html(text: str) -> str:
    """HTML for ``text`` (GUI thread only: the converter is shared and not thread-safe)."""
    global _converter
    if _converter is None:
        _converter = markdown.Markdown(
            extensions=[ExtraExtension(), SaneListExtension()], output_format="html"
        )
    return _converter.reset().convert(text or "")
