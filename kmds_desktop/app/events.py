"""A small observer API for the application sessions: a session announces what changed, views listen.

Why: a view that re-reads everything after each click (``_update_buttons`` called from every
handler) must know every path by which the state can change, and one forgotten path leaves a
button stale. A session that announces its own changes is the one place that knows them; a view
subscribes once and renders what it is told changed.

Usage::

    unsubscribe = session.subscribe(lambda change: ...)   # change.kind, change.uids
    ...
    unsubscribe()

Listeners are called synchronously, in subscription order, after the change is complete, on the
thread that changed the session (the GUI thread in the window, the only thread in the CLI).
Nothing here knows about Qt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Change", "Listener", "Observable"]


@dataclass(frozen=True)
class Change:
    """One announced change: what kind of thing changed, and for row changes, which rows (uids)."""

    kind: str
    uids: tuple[int, ...] = ()


Listener = Callable[[Change], None]


class Observable:
    """Mixin for a session that announces its changes (:meth:`subscribe`, :meth:`announce`)."""

    _listeners: list[Listener]

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(change)`` after each change from now on; returns the unsubscribe call."""
        listeners = self.__dict__.setdefault("_listeners", [])
        listeners.append(listener)

        def unsubscribe() -> None:
            if listener in listeners:
                listeners.remove(listener)

        return unsubscribe

    def announce(self, kind: str, uids: Iterable[int] = ()) -> None:
        """Tell every listener that ``kind`` changed (for ``uids``, when the change is about rows)."""
        listeners = self.__dict__.get("_listeners")
        if not listeners:
            return
        change = Change(kind, tuple(uids))
        for listener in list(listeners):
            listener(change)
