"""The open knowledge base as a user works with it: which KB opens at start-up, open, save, save as,
recent files, the recovery copy, the demo KB, and the semantic index the KB's questions use.

Rules kept here (the window follows them; a script can too):

- **Start-up**: a file named on the command line; else the last KB, if it still exists (else the
  demo KB, with a note saying why); else, on first run, the demo KB.
- **The demo KB is opened as a copy** in the data folder (``demo/demo_kb.xml``, made on first use
  and kept with the user's edits afterwards), so saving can never overwrite the installed
  ``resources/demo_kb.xml``; saving *to* the installed file is refused with a message.
- **Recent files and the last KB** record the user's own files only, never the demo copy.
- **Recovery copy**: when the app must close with unsaved edits (the session ends), they go to
  ``recovery/<name>.recovered.xml`` in the data folder, never over the user's file.
- **The semantic index** is opened once, on first need, from whichever worker needs it first:
  :class:`IndexHolder` opens it under a lock (two workers cannot both find it missing and open two).
- **The index follows the open KB** (:class:`IndexFollower`): opening another KB, editing or saving
  the open one, or asking for a rebuild brings the index up to date (only changed entries are
  embedded again, :func:`update_index`); until that has finished for the KB now open, the KB is not
  "indexed". New index settings (another model, folder or server) close the index: the next use
  opens the new one and the KB is indexed there.
- **Unsaved edits are never lost silently**: before another KB opens or the app closes, an edited
  KB asks Save / Discard / Cancel (:func:`unsaved_changes_prompt`, :func:`after_unsaved_choice`);
  Save goes first and the action runs once the save succeeded.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kmds_desktop import paths
from kmds_desktop.config import Settings, UISettings
from kmds_desktop.index.errors import SemanticIndexError
from kmds_desktop.kb import load_kb as _load
from kmds_desktop.kb import save_kb as _save

log = logging.getLogger(__name__)

DEMO_COPY_NAME = "demo_kb.xml"
#: Files that open as a knowledge base (KMDS files are RDF/XML).
KB_SUFFIXES = (".xml", ".owl", ".rdf")
#: Files only the literature import reads (a plain ``.xml`` is tried as a KB first).
LITERATURE_ONLY_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".json", ".json.gz", ".xml.gz")


class DemoOverwriteError(ValueError):
    """Saving to the installed demo KB: the app's own resource is never written."""


class IndexHolder:
    """The semantic index of this app session, opened on first use under a lock.

    ``get_or_open(settings)`` is what workers call; ``current`` reads it without opening; ``reset()``
    forgets it (the index settings changed: the next use opens the new one). The mapping form
    ``holder["index"]`` / ``holder.get("index")`` reads and sets the same value.
    """

    def __init__(self, index: Any | None = None, opener: Callable[[Settings], Any] | None = None) -> None:
        self._index = index
        self._lock = threading.Lock()  # one opening at a time (a worker's); reset() never waits on it
        self._generation = 0  # bumped by reset(): an index opened across a reset is not kept
        self._opener = opener  # default: the settings' index in the app's own index process

    @classmethod
    def in_process(cls, persist_dir: str | Path | None = None) -> IndexHolder:
        """A script's holder: the index opens in the calling process (a command runs no GUI thread
        to keep free), from ``persist_dir`` when given, else as the settings say."""

        def opener(settings: Settings) -> Any:
            # why: start-up time: the window imports this module at start, that one only when needed
            from kmds_desktop.index.factory import open_index

            if persist_dir is not None:
                # why: start-up time: kmds_desktop.index loads its parts on first use
                from kmds_desktop.index import SemanticIndex

                return SemanticIndex(persist_dir, settings.index.embedding_model)
            return open_index(settings)

        return cls(opener=opener)

    @property
    def current(self) -> Any | None:
        return self._index

    def get_or_open(self, settings: Settings, progress: Any = None) -> Any:
        """The index, opening it (in its own process) if no one has yet."""
        with self._lock:
            index = self._index
            if index is None:
                if progress:
                    progress(0, None, "opening the semantic index")
                generation = self._generation
                index = (self._opener or _open_own_index)(settings)
                if generation == self._generation:  # no reset meanwhile: the next caller shares it
                    self._index = index
            return index

    def reset(self) -> None:
        """Forget the index (its settings changed). Called on the GUI thread (Preferences saved): it
        never waits for an opening under way, which can take a minute while the index process starts;
        that opening's index is then not kept."""
        self._generation += 1
        self._index = None

    # the mapping form (``holder["index"]``), for callers written against a dict
    def __getitem__(self, key: str) -> Any:
        if key != "index":
            raise KeyError(key)
        return self._index

    def __setitem__(self, key: str, value: Any) -> None:
        if key != "index":
            raise KeyError(key)
        with self._lock:
            self._index = value

    def get(self, key: str, default: Any = None) -> Any:
        return self._index if key == "index" and self._index is not None else default


class IndexFollower:
    """Whether the semantic index is up to date with the open KB, and what each change asks of it.

    Each ``kb_*`` method says whether to bring the index up to date now (run :func:`update_index` on
    a worker, then report with :meth:`built`). ``auto`` off (tests, a script that indexes itself):
    only :meth:`rebuild` asks for it.
    """

    def __init__(self, holder: IndexHolder, *, auto: bool = True) -> None:
        self.holder = holder
        self.auto = auto
        self.ready_for: str | None = None  # kb_id of the KB the index was last brought up to date with
        #: Bumped where a build started before no longer counts (another KB, a rebuild, new settings):
        #: a job takes the ticket when it starts, and its end marks the KB indexed only with the last one.
        self.ticket = 0

    def is_ready(self, kb: Any) -> bool:
        """The index is up to date with ``kb`` (as of its last build: edits since wait for the next)."""
        return kb is not None and self.ready_for == getattr(kb, "kb_id", None)

    def kb_opened(self, kb: Any) -> bool:
        self.ready_for = None
        self.ticket += 1
        return self.auto and kb is not None

    def kb_edited(self, kb: Any) -> bool:
        """Only the changed entries are embedded again."""
        return self.auto and kb is not None

    def kb_saved(self, kb: Any) -> bool:
        return self.auto and kb is not None

    def rebuild(self, kb: Any) -> bool:
        """The user asked for it: the KB is not indexed until the build ends."""
        self.ready_for = None
        self.ticket += 1
        return kb is not None

    def built(self, kb: Any, open_kb: Any, ticket: int | None = None) -> bool:
        """A build for ``kb`` ended; True when it is the KB still open (now indexed). ``ticket``: the
        one the build took when it started; a build started before a rebuild or new settings (the job
        runner lets a running build finish) does not mark the KB indexed: the build asked since does."""
        if kb is not open_kb or kb is None or (ticket is not None and ticket != self.ticket):
            return False
        self.ready_for = kb.kb_id
        return True

    def settings_changed(self, old: Any, new: Any) -> bool:
        """New ``index`` settings: True when they differ (the index closes; the next use opens the
        new one, and the open KB is built there: the caller asks for :meth:`rebuild`)."""
        if old == new:
            return False
        self.holder.reset()
        self.ready_for = None
        self.ticket += 1
        return True


def update_index(
    holder: IndexHolder, settings: Settings, kb: Any, *, progress: Any = None, cancel: Any = None
) -> Any:
    """Bring the semantic index up to date with ``kb`` (only changed entries are embedded again)."""
    index = holder.get_or_open(settings, progress)
    return index.build_from_onto(kb, progress=progress, cancel=cancel)


def encode_texts(holder: IndexHolder, settings: Settings, texts: Any) -> Any:
    """Embed ``texts`` where the index embeds (the app's index process: torch never loads in the
    window's process); the literature search's semantic rows use it."""
    return holder.get_or_open(settings).encode(list(texts), settings.index.embedding_model)


def kb_summary(kb: Any, indexed: bool) -> tuple[str, str]:
    """(status line text, tooltip) for the open KB: its name, how many workflows and observations,
    and whether the semantic index is up to date with it."""
    if kb is None:
        return "No knowledge base", ""
    counts = kb.counts() if hasattr(kb, "counts") else {}
    n_obs = counts.get("observations", len(kb.observations))
    n_wf = counts.get("workflows", len(kb.workflows))
    index = " · indexed" if indexed else ""
    return (f"KB: {Path(kb.path).name} — {n_wf} workflow{'s' if n_wf != 1 else ''}, "
            f"{n_obs} observation{'s' if n_obs != 1 else ''}{index}", str(kb.path))


def warm_up(
    model_name: str,
    index_holder: IndexHolder | None = None,
    settings: Settings | None = None,
    *,
    prepare: Sequence[Callable[[], Any]] = (),
    progress: Any = None,
    cancel: Any = None,
) -> str:
    """Start the index process and load the embedding model in it (the job right after start-up).

    ``prepare`` are the view's own warm-ups, run first (the window builds its Markdown converter, so
    the first answer does not build it on the GUI thread). The embedding model (torch,
    sentence-transformers) loads in the index process, never in this one: importing them holds
    Python's GIL for 350-650 ms at a time, which would freeze the window even from a worker
    thread; ChromaDB runs in the index process too. An index that cannot open is logged, not
    raised: the first build reports it, with what to do.
    """
    if progress:
        progress(0, 2, "starting the semantic index")
    for step in prepare:
        step()
    index = index_holder.current if index_holder is not None else None
    if index is None and index_holder is not None and settings is not None:
        # Start the index process now (about a second) rather than when the first build needs it.
        try:
            index = index_holder.get_or_open(settings)  # under the holder's lock: one index, whoever asks
        except SemanticIndexError as err:
            log.warning("semantic index not opened at start-up: %s", err)
    if index is not None:
        if progress:
            progress(1, 2, "loading the embedding model")
        index.encode(["warm-up"], model_name)  # where this index embeds: its own process in the app
    return model_name


@dataclass(frozen=True)
class UnsavedPrompt:
    """What to ask before an action would drop unsaved edits: Save (default), Discard or Cancel."""

    title: str
    text: str
    choices: tuple[str, ...] = ("save", "discard", "cancel")
    default: str = "save"


def has_unsaved_changes(kb: Any) -> bool:
    """Whether ``kb`` has edits not yet saved (closing without asking writes a recovery copy)."""
    return kb is not None and bool(getattr(kb, "dirty", False))


def unsaved_changes_prompt(kb: Any, what: str) -> UnsavedPrompt | None:
    """None when nothing would be lost by ``what`` (e.g. "open other.xml", "close"); else the
    question to ask first."""
    if not has_unsaved_changes(kb):
        return None
    name = Path(str(kb.path)).name
    return UnsavedPrompt("Unsaved changes", f"{name} has unsaved changes. Save them before you {what}?")


def after_unsaved_choice(kb: Any, choice: str) -> str:
    """What the user's answer means: ``"save"`` (save, then do the action once saved), ``"proceed"``
    (Discard: the edits are dropped, the action runs now) or ``"stay"`` (Cancel, or the dialog was
    closed: nothing happens)."""
    if choice == "save":
        return "save"
    if choice == "discard":
        kb.dirty = False
        return "proceed"
    return "stay"


def _open_own_index(settings: Settings) -> Any:
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.index.factory import open_index

    return open_index(settings, own_process=True)


def installed_demo_path() -> Path:
    """The demo KB shipped with the app (read-only for the app)."""
    return paths.demo_kb_path()


def demo_copy_path() -> Path:
    """The user's copy of the demo KB in the data folder (what the app opens as "the demo KB")."""
    return paths.sub_dir("demo") / DEMO_COPY_NAME


def _same(a: str | Path, b: str | Path) -> bool:
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except OSError:
        return False


def is_demo(path: str | Path) -> bool:
    """Whether ``path`` is the demo KB (the installed file or the user's copy)."""
    return _same(path, installed_demo_path()) or _same(path, demo_copy_path())


def path_to_open(path: str | Path) -> Path:
    """The file to load for ``path``: the installed demo KB becomes the user's copy (made once)."""
    path = Path(path).expanduser()
    if not _same(path, installed_demo_path()):
        return path
    copy = demo_copy_path()
    if not copy.exists():
        tmp = copy.with_suffix(".xml.tmp")
        shutil.copyfile(installed_demo_path(), tmp)
        tmp.replace(copy)
    return copy


def check_save_target(target: str | Path) -> Path:
    """Refuse the installed demo KB as a save target (one line for the user); returns the path."""
    target = Path(target).expanduser()
    if _same(target, installed_demo_path()):
        raise DemoOverwriteError(
            f"{target} is the demo knowledge base installed with the app and is never overwritten; "
            "use Save as to keep your changes in a file of your own")
    return target


def startup_kb(settings: Settings, kb_file: str | None = None) -> tuple[Path, str | None]:
    """Which KB to open at start-up, and a note when the remembered one is gone.

    The demo KB is named by its installed path; :func:`load_kb` opens the user's copy of it.
    """
    if kb_file:
        return Path(kb_file).expanduser(), None
    last = settings.ui.last_kb
    if last:
        if Path(last).exists():
            return Path(last), None
        return installed_demo_path(), f"The last knowledge base {last} no longer exists; opened the demo KB."
    return installed_demo_path(), None


def remember_opened(ui: UISettings, path: str | Path) -> None:
    """A KB was opened or saved at ``path``: recent files and the last KB (the user's files only)."""
    if is_demo(path):
        ui.last_kb = None
        return
    ui.add_recent(str(path))
    ui.last_kb = str(path)


def route_dropped(files: list[str]) -> tuple[str, list[str]]:
    """What files dropped on the window are for: ``("literature", files)`` when any is a literature
    file (those are imported), else ``("kb", [first KB file])``, else ``("", [])``."""
    literature = [f for f in files if f.lower().endswith(LITERATURE_ONLY_SUFFIXES) or os.path.isdir(f)]
    if literature:
        return "literature", literature
    kb_files = [f for f in files if f.lower().endswith(KB_SUFFIXES)]
    return ("kb", kb_files[:1]) if kb_files else ("", [])


def droppable(path: str) -> bool:
    """Whether the window accepts ``path`` dropped on it (a folder: the literature import's)."""
    return path.lower().endswith(KB_SUFFIXES + LITERATURE_ONLY_SUFFIXES) or os.path.isdir(path)


def recovery_path(kb_path: str | Path) -> Path:
    """Where unsaved edits of ``kb_path`` go when the app must close without asking."""
    return paths.sub_dir("recovery") / f"{Path(kb_path).stem}.recovered.xml"


# --- the slow parts: plain functions for a worker --------------------------------------------------


def load_kb(path: str | Path, *, progress: Any = None, cancel: Any = None) -> Any:
    """Load a KB file (the demo KB as the user's copy)."""
    return _load(str(path_to_open(path)), progress=progress, cancel=cancel)


def save_kb(kb: Any, path: str | Path | None = None, *, progress: Any = None, cancel: Any = None) -> Path:
    """Save ``kb`` (to ``path``, or its own file); never to the installed demo KB."""
    check_save_target(path if path is not None else kb.path)
    return Path(_save(kb, str(path) if path is not None else None, progress=progress, cancel=cancel))


def write_recovery_copy(kb: Any) -> Path:
    """Write unsaved edits to the recovery copy; returns where. A note beside it names the file the
    edits belong to, so the next start can offer them back (:func:`pending_recoveries`)."""
    original = str(kb.path)  # saving elsewhere may move the KB's own path to the copy
    target = recovery_path(kb.path)
    _save(kb, target)
    note = {"original": original, "written_at": datetime.now(UTC).isoformat(timespec="seconds")}
    target.with_suffix(".json").write_text(json.dumps(note), encoding="utf-8")
    return target


@dataclass(frozen=True)
class Recovery:
    """Unsaved edits a closing window wrote to ``recovery/``: offered back at the next start."""

    copy: Path
    original: Path | None  # the file the edits belong to (None: a copy without its note)
    written_at: str = ""

    def describe(self) -> str:
        """One line for the message bar."""
        name = self.original.name if self.original else self.copy.name
        when = f" (written {self.written_at.replace('T', ' ')[:16]} UTC)" if self.written_at else ""
        return f"Unsaved edits of {name} were kept when the app closed{when}."


def pending_recoveries() -> list[Recovery]:
    """The recovery copies in the data folder, oldest first. Why the app layer: the window offers
    them at start-up (Restore, Compare, Discard) and a script could do the same."""
    folder = paths.sub_dir("recovery", create=False)
    if not folder.is_dir():
        return []
    found = []
    for copy in sorted(folder.glob("*.recovered.xml"), key=lambda p: p.stat().st_mtime):
        original, written = None, ""
        try:
            note = json.loads(copy.with_suffix(".json").read_text(encoding="utf-8"))
            original = Path(note["original"]) if note.get("original") else None
            written = str(note.get("written_at") or "")
        except (OSError, ValueError, KeyError, TypeError):
            pass  # an older copy without its note: still offered, by its own name
        found.append(Recovery(copy, original, written))
    return found


def discard_recovery(recovery: Recovery) -> None:
    """Delete a recovery copy and its note (the user chose Discard, or restored it)."""
    for path in (recovery.copy, recovery.copy.with_suffix(".json")):
        path.unlink(missing_ok=True)


def restore_recovery(recovery: Recovery, *, progress: Any = None, cancel: Any = None) -> Any:
    """Load the recovered edits as the open KB: its file is the original (Save writes there, after
    the usual question), it counts as unsaved, and the copy is removed (the window holds the edits
    now; closing asks to save them)."""
    kb = load_kb(recovery.copy, progress=progress, cancel=cancel)
    if recovery.original is not None:
        kb.path = recovery.original
    kb.dirty = True
    discard_recovery(recovery)
    return kb


def compare_recovery(recovery: Recovery, *, progress: Any = None, cancel: Any = None) -> str:
    """What the recovered edits change against the file on disk, in a few lines (observations
    added, removed and changed, by IRI)."""
    copy = load_kb(recovery.copy, progress=progress, cancel=cancel)
    if recovery.original is None or not recovery.original.exists():
        n = len(copy.observations)
        return f"The file the edits belong to is not there any more; the copy holds {n} " + (
            "observation." if n == 1 else "observations.")
    disk = load_kb(recovery.original, progress=progress, cancel=cancel)
    old = {o.iri: o for o in disk.observations}
    new = {o.iri: o for o in copy.observations}
    added = [new[i] for i in new if i not in old]
    removed = [old[i] for i in old if i not in new]
    changed = [new[i] for i in new if i in old and new[i] != old[i]]
    if not (added or removed or changed):
        return f"The recovered copy holds the same observations as {recovery.original.name}."
    total = len(added) + len(changed) + len(removed)
    lines = [f"Against {recovery.original.name}: {len(added)} added, {len(changed)} changed, "
             f"{len(removed)} removed {'observation' if total == 1 else 'observations'}."]
    lines += [f"+ {o.finding[:80]}" for o in added[:5]]
    lines += [f"~ {o.finding[:80]}" for o in changed[:5]]
    lines += [f"- {o.finding[:80]}" for o in removed[:5]]
    return "\n".join(lines)


def observation_matches(obs: Any, needle: str) -> bool:
    """Whether an observation passes the KB filter: a case-insensitive substring of its finding,
    type or intent (an empty filter passes all). The window's filter box uses it; here so the rule
    is testable and usable without the tree widget."""
    if not needle:
        return True
    needle = needle.casefold()
    return any(needle in (value or "").casefold() for value in (obs.finding, obs.obs_type, obs.intent))


def new_observation_defaults(
    selection: Sequence[tuple[str, str]], workflow_names: Collection[str]
) -> tuple[str | None, str | None]:
    """(category, workflow) a new observation starts with, from where the user is in the KB tree.

    ``selection`` is the selected node and its ancestors, nearest first, as ``(kind, key)``:
    kinds ``observation`` (key: IRI), ``category`` (key: category id), ``workflow`` (key: its
    name) and ``unlinked`` (observations no workflow lists). The category is the nearest category
    node's; the workflow is the nearest workflow node's when the KB defines it (a name that
    observations link to but the KB does not define cannot be chosen), none under ``unlinked``.
    Why here: which record a new observation joins is the app's rule, not the tree widget's.
    """
    category = next((key for kind, key in selection if kind == "category"), None)
    workflow = None
    for kind, key in selection:
        if kind in ("workflow", "unlinked"):
            workflow = key if kind == "workflow" and key in workflow_names else None
            break
    return category, workflow
