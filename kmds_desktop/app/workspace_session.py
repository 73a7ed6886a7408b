"""The workspace session: the open knowledge base and its semantic index, owned in one Qt-free place.

Why a session: the open KB used to be an attribute of the main window, so every part of the window
(menus, status line, recovery bars, the ask panel) reached into the window for it and re-read it
after each step. Here the state has one owner; it announces each change through
:mod:`kmds_desktop.app.events` and the views subscribe. The rules themselves (which KB opens at
start-up, when the index follows the KB, what the unsaved-changes question means) stay in
:mod:`kmds_desktop.app.workspace`; this class only keeps the state they act on.

The blocking steps (loading, saving, indexing) still run on a worker: the caller runs
:func:`~kmds_desktop.app.workspace.load_kb` and friends as jobs and reports each outcome here
(:meth:`WorkspaceSession.opened`, :meth:`~WorkspaceSession.saved`, :meth:`~WorkspaceSession.index_built`).
Each ``opened``/``edited``/``saved`` returns whether the index should be brought up to date now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kmds_desktop.app import workspace
from kmds_desktop.app.events import Observable
from kmds_desktop.config import Settings

__all__ = ["INDEX_CHANGED", "KB_EDITED", "KB_OPENED", "KB_SAVED", "WorkspaceSession"]

#: Another KB is open now (or the same one, reloaded or restored from a recovery copy).
KB_OPENED = "kb.opened"
#: The open KB was edited (it has unsaved changes).
KB_EDITED = "kb.edited"
#: The open KB was written to a file (its path may have changed: Save as).
KB_SAVED = "kb.saved"
#: Whether the index is up to date with the open KB changed (a build ended, a rebuild began).
INDEX_CHANGED = "index.changed"


class WorkspaceSession(Observable):
    """The open KB, the index that answers its questions, and whether the index has caught up.

    ``settings`` is the app's settings object (shared with the window, which writes it to disk);
    ``index`` an already open semantic index (tests), else one opens on first use;
    ``auto_index`` off: the index is built only when asked (:meth:`rebuild`).
    """

    def __init__(self, settings: Settings, *, index: Any | None = None, auto_index: bool = True) -> None:
        self.settings = settings
        self.kb: Any = None
        self.index_holder = workspace.IndexHolder(index)
        self.index_follower = workspace.IndexFollower(self.index_holder, auto=auto_index)

    # -- reading --
    @property
    def indexed(self) -> bool:
        """The index is up to date with the open KB (as of its last build)."""
        return self.index_follower.is_ready(self.kb)

    def summary(self) -> tuple[str, str]:
        """(status line text, tooltip) for the open KB (:func:`~kmds_desktop.app.workspace.kb_summary`)."""
        return workspace.kb_summary(self.kb, self.indexed)

    def file_name(self) -> str | None:
        """The open KB's file name (the window's title), None when no KB is open."""
        return Path(self.kb.path).name if self.kb is not None else None

    def has_unsaved_changes(self) -> bool:
        return workspace.has_unsaved_changes(self.kb)

    def ask_context(self) -> dict[str, Any]:
        """What answering a question needs: the KB, the index when it has caught up, the settings."""
        index = self.index_holder.get("index")
        return {
            "kb": self.kb,
            "index": index if self.indexed else None,
            "settings": self.settings,
            "index_holder": self.index_holder,
        }

    def encode(self, texts: Any) -> Any:
        """Embed texts in the index process (opened on first use): torch never loads in this process."""
        return workspace.encode_texts(self.index_holder, self.settings, texts)

    # -- outcomes reported by the caller (each announced) --
    def opened(self, kb: Any) -> bool:
        """``kb`` is open now: remembered among the recent files; True when the index should follow."""
        self.kb = kb
        build = self.index_follower.kb_opened(kb)
        workspace.remember_opened(self.settings.ui, kb.path)
        self.announce(KB_OPENED)
        return build

    def edited(self) -> bool:
        """The open KB was edited; True when the index should follow (only changed entries re-embed)."""
        self.announce(KB_EDITED)
        return self.index_follower.kb_edited(self.kb)

    def saved(self, target: str | Path) -> bool:
        """The open KB was written to ``target`` (the demo copy is never a recent file); True when
        the index should follow."""
        if not workspace.is_demo(target):
            workspace.remember_opened(self.settings.ui, target)
        self.announce(KB_SAVED)
        return self.index_follower.kb_saved(self.kb)

    def index_ticket(self) -> int:
        """What a build job takes when it starts, and gives back to :meth:`index_built`."""
        return self.index_follower.ticket

    def index_built(self, kb: Any, ticket: int | None = None) -> None:
        """A build for ``kb`` ended (announced when ``kb`` is still the open one and no rebuild or new
        settings came since the build started: it is indexed now)."""
        if self.index_follower.built(kb, self.kb, ticket):
            self.announce(INDEX_CHANGED)

    def rebuild(self) -> bool:
        """The user asked for a rebuild: True when there is a KB to index (not indexed until it ends)."""
        if not self.index_follower.rebuild(self.kb):
            return False
        self.announce(INDEX_CHANGED)
        return True

    def index_settings_changed(self, new: Any) -> bool:
        """New ``index`` settings take effect: True when the open KB must be indexed in the new index."""
        rebuild = self.index_follower.settings_changed(self.settings.index, new)
        self.settings.index = new
        if rebuild and self.index_follower.kb_opened(self.kb):
            self.announce(INDEX_CHANGED)
            return True
        return False

    def clear_recent(self) -> None:
        self.settings.ui.recent_files = []
