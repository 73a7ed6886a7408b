"""``KnowledgeBase``: the loaded records of one KMDS file, their edits, and atomic saving.

Records are plain dataclasses (see :mod:`kmds_desktop.kb.model`); the owlready2 world that held
the file stays private to this object and is only touched when saving, which is what lets the
GUI load on a worker thread and hand the records to models and the semantic index freely.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kmds_desktop import paths
from kmds_desktop.crashpoints import crash_point
from kmds_desktop.kb.model import KnowledgeBaseError, Observation, Workflow
from kmds_desktop.kb.safety import prescan_rdfxml, read_kb_bytes
from kmds_desktop.kb.save_temp import create_locked_temp, remove_stale_temps
from kmds_desktop.kb.store import MAX_INT, KBStore
from kmds_desktop.kb.vocabulary import (
    CATEGORIES,
    CATEGORY_CLASS,
    KMDS_NS,
    OBSERVATION_TYPES,
    WORKFLOW_KINDS,
)
from kmds_desktop.tasks import Cancelled, CancelToken, ProgressFn, check, report

# Characters XML 1.0 cannot carry at all; a finding holding one would make an unreadable file.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Workflow names become IRIs (``#name``); KMDS allows spaces, but these would break the IRI.
_BAD_NAME = re.compile(r'[#<>"{}|\\^`\x00-\x1f\ud800-\udfff\ufffe\uffff]')
_OBS_FIELDS = ("category", "obs_type", "finding", "finding_seq", "intent", "workflows")
_WF_FIELDS = ("name", "kind", "description", "depends_on")


def kb_id_for(path: str | os.PathLike[str]) -> str:
    """Stable identity of a KB file: a short hash of its resolved absolute path."""
    resolved = str(Path(path).expanduser().resolve())
    return hashlib.sha1(resolved.encode("utf-8"), usedforsecurity=False).hexdigest()[:12]


class KnowledgeBase:
    """Workflows and observations of one KMDS file, ordered for display, with edit methods.

    ``observations`` are ordered by workflow (file order, unlinked last), category (as in
    ``CATEGORIES``), ``finding_seq`` (missing last), then file order. Every edit sets ``dirty``;
    :func:`save_kb` clears it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        workflows: Iterable[Workflow] = (),
        observations: Iterable[Observation] = (),
        *,
        notes: Iterable[str] = (),
        _store: KBStore | None = None,
    ) -> None:
        self.path = Path(path).expanduser().resolve()
        self.notes: list[str] = list(notes)
        self.dirty = False
        self._store = _store
        self._lock = threading.RLock()
        self._workflows: dict[str, Workflow] = {w.iri: w for w in workflows}
        self._obs: dict[str, Observation] = {o.iri: o for o in observations}
        self._removed: set[str] = set()
        self._next_order = max((o.file_order for o in self._obs.values()), default=-1) + 1
        self._sorted: list[Observation] | None = None

    # -- read access ----------------------------------------------------------------------------
    @property
    def kb_id(self) -> str:
        return kb_id_for(self.path)

    @property
    def workflows(self) -> list[Workflow]:
        return list(self._workflows.values())

    @property
    def observations(self) -> list[Observation]:
        with self._lock:
            if self._sorted is None:
                self._sorted = sorted(self._obs.values(), key=self._sort_key())
            return list(self._sorted)

    def _sort_key(self):  # noqa: ANN202 - a closure over the current workflow order
        wf_pos = {w.name: i for i, w in enumerate(self._workflows.values())}
        unlinked = len(wf_pos)
        cat_pos = {c: i for i, c in enumerate(CATEGORIES)}

        def key(o: Observation) -> tuple[int, int, int, int, int]:
            first = min((wf_pos.get(w, unlinked) for w in o.workflows), default=unlinked)
            seq = o.finding_seq
            return (first, cat_pos.get(o.category, 99), seq is None, seq or 0, o.file_order)

        return key

    def observation(self, iri: str) -> Observation | None:
        """The observation with this IRI (or bare name), or None."""
        found = self._obs.get(iri)
        if found is None and "#" not in iri:
            found = self._obs.get(KMDS_NS + iri)
        return found

    def workflow(self, name_or_iri: str) -> Workflow | None:
        """The workflow with this name or IRI, or None."""
        found = self._workflows.get(name_or_iri)
        if found is None:
            found = next((w for w in self._workflows.values() if w.name == name_or_iri), None)
        return found

    def counts(self) -> dict[str, int]:
        """Observations per category plus totals (for status bars and the CLI)."""
        out = {c: 0 for c in CATEGORIES}
        for o in self._obs.values():
            out[o.category] = out.get(o.category, 0) + 1
        out["observations"] = len(self._obs)
        out["workflows"] = len(self._workflows)
        out["unlinked"] = sum(1 for o in self._obs.values() if o.unlinked)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "kb_id": self.kb_id,
            "notes": list(self.notes),
            "workflows": [w.to_dict() for w in self.workflows],
            "observations": [o.to_dict() for o in self.observations],
        }

    def __len__(self) -> int:
        return len(self._obs)

    def __repr__(self) -> str:
        return (
            f"KnowledgeBase({str(self.path)!r}, workflows={len(self._workflows)}, "
            f"observations={len(self._obs)}, dirty={self.dirty})"
        )

    # -- observation edits --------------------------------------------------------------------
    def add_observation(
        self,
        category: str,
        finding: str,
        *,
        obs_type: str | None = None,
        finding_seq: int | None = None,
        intent: str | None = None,
        workflows: Iterable[str] = (),
        name: str | None = None,
    ) -> Observation:
        """Add an observation; IRIs follow KMDS's ``<class>N`` naming and never reuse a taken one.

        ``obs_type`` defaults to the category's first KMDS type; ``finding_seq`` defaults to the
        next number in the first workflow's category (like KMDS numbers its findings).
        """
        with self._lock:
            category = self._check_category(category)
            wf_names = self._in_workflow_order(self._check_workflow_names(workflows))
            if name is None:
                name = self._free_name(CATEGORY_CLASS[category].lower())
            self._check_name(name, "observation name")
            iri = KMDS_NS + name
            if iri in self._obs or iri in self._workflows:
                raise KnowledgeBaseError(f"an entry named {name!r} already exists", path=self.path)
            if finding_seq is None:
                finding_seq = self._next_seq(category, wf_names[0] if wf_names else None)
            obs = Observation(
                iri=iri,
                name=name,
                category=category,
                obs_type=self._check_obs_type(obs_type, category),
                finding=self._check_finding(finding),
                finding_seq=self._check_seq(finding_seq),
                intent=self._check_intent(intent),
                workflows=wf_names,
                file_order=self._next_order,
            )
            self._next_order += 1
            self._obs[iri] = obs
            self._removed.discard(iri)
            self._changed()
            return obs

    def update_observation(self, iri: str, /, **changes: Any) -> Observation:
        """Change fields of an observation (``category``, ``obs_type``, ``finding``, ``finding_seq``,
        ``intent``, ``workflows``); its IRI never changes, so index entries stay valid."""
        with self._lock:
            old = self._require_observation(iri)
            unknown = set(changes) - set(_OBS_FIELDS)
            if unknown:
                raise KnowledgeBaseError(
                    f"cannot change {', '.join(sorted(unknown))} of an observation "
                    f"(editable: {', '.join(_OBS_FIELDS)})",
                    path=self.path,
                )
            category = self._check_category(changes.get("category", old.category))
            obs_type = changes.get("obs_type", old.obs_type if category == old.category else None)
            new = replace(
                old,
                category=category,
                obs_type=self._check_obs_type(obs_type, category),
                finding=self._check_finding(changes["finding"]) if "finding" in changes else old.finding,
                finding_seq=self._check_seq(changes.get("finding_seq", old.finding_seq)),
                intent=self._check_intent(changes.get("intent", old.intent)),
                workflows=self._in_workflow_order(
                    self._check_workflow_names(changes.get("workflows", old.workflows))
                ),
            )
            if new != old:
                self._obs[old.iri] = new
                self._changed()
            return new

    def delete_observation(self, iri: str) -> None:
        with self._lock:
            old = self._require_observation(iri)
            del self._obs[old.iri]
            self._removed.add(old.iri)
            self._changed()

    # -- workflow edits -----------------------------------------------------------------------
    def add_workflow(
        self,
        name: str,
        kind: str = WORKFLOW_KINDS[0],
        description: str | None = None,
        depends_on: Iterable[str] = (),
    ) -> Workflow:
        """Add a workflow; its IRI is ``<KMDS namespace><name>`` as KMDS writes it."""
        with self._lock:
            name = self._check_name(name, "workflow name")
            iri = KMDS_NS + name
            if self.workflow(name) is not None or iri in self._obs:
                raise KnowledgeBaseError(
                    f"a workflow or observation named {name!r} already exists", path=self.path
                )
            wf = Workflow(
                iri=iri,
                name=name,
                kind=self._check_kind(kind),
                description=self._check_optional_text(description, "description"),
                depends_on=self._check_workflow_names(depends_on),
            )
            self._workflows[iri] = wf
            self._removed.discard(iri)
            self._changed()
            return wf

    def update_workflow(self, name_or_iri: str, /, **changes: Any) -> Workflow:
        """Change ``name``, ``kind``, ``description`` or ``depends_on``. A rename changes the
        workflow's IRI (KMDS derives it from the name) and every reference to it."""
        with self._lock:
            old = self._require_workflow(name_or_iri)
            unknown = set(changes) - set(_WF_FIELDS)
            if unknown:
                raise KnowledgeBaseError(
                    f"cannot change {', '.join(sorted(unknown))} of a workflow "
                    f"(editable: {', '.join(_WF_FIELDS)})",
                    path=self.path,
                )
            name = self._check_name(changes.get("name", old.name), "workflow name")
            if name != old.name and (self.workflow(name) is not None or KMDS_NS + name in self._obs):
                raise KnowledgeBaseError(
                    f"a workflow or observation named {name!r} already exists", path=self.path
                )
            depends = self._check_workflow_names(changes.get("depends_on", old.depends_on), allow=name)
            new = Workflow(
                iri=KMDS_NS + name if name != old.name else old.iri,
                name=name,
                kind=self._check_kind(changes.get("kind", old.kind)),
                description=self._check_optional_text(
                    changes.get("description", old.description), "description"
                ),
                depends_on=[name if d == old.name else d for d in depends],
            )
            if new == old:
                return old
            if new.iri != old.iri:
                self._rename_workflow(old, new)
            else:
                self._workflows[old.iri] = new
            self._changed()
            return new

    def delete_workflow(self, name_or_iri: str, *, delete_observations: bool = False) -> None:
        """Remove a workflow; its observations become unlinked unless ``delete_observations``
        (observations another workflow still lists are always kept)."""
        with self._lock:
            old = self._require_workflow(name_or_iri)
            del self._workflows[old.iri]
            self._removed.add(old.iri)
            for iri, obs in list(self._obs.items()):
                if old.name in obs.workflows:
                    rest = [w for w in obs.workflows if w != old.name]
                    if delete_observations and not rest:
                        del self._obs[iri]
                        self._removed.add(iri)
                    else:
                        self._obs[iri] = replace(obs, workflows=rest)
            for iri, wf in list(self._workflows.items()):
                if old.name in wf.depends_on:
                    self._workflows[iri] = replace(wf, depends_on=[d for d in wf.depends_on if d != old.name])
            self._changed()

    # -- helpers ------------------------------------------------------------------------------
    def _rename_workflow(self, old: Workflow, new: Workflow) -> None:
        items = list(self._workflows.items())
        self._workflows = {
            (new.iri if iri == old.iri else iri): (new if iri == old.iri else wf) for iri, wf in items
        }
        for iri, wf in list(self._workflows.items()):
            if old.name in wf.depends_on and iri != new.iri:
                self._workflows[iri] = replace(
                    wf, depends_on=[new.name if d == old.name else d for d in wf.depends_on]
                )
        for iri, obs in list(self._obs.items()):
            if old.name in obs.workflows:
                self._obs[iri] = replace(
                    obs, workflows=[new.name if w == old.name else w for w in obs.workflows]
                )
        self._removed.add(old.iri)
        self._removed.discard(new.iri)

    def _changed(self) -> None:
        self.dirty = True
        self._sorted = None

    def _require_observation(self, iri: str) -> Observation:
        obs = self.observation(iri)
        if obs is None:
            raise KnowledgeBaseError(f"no observation {iri!r} in this knowledge base", path=self.path)
        return obs

    def _require_workflow(self, name_or_iri: str) -> Workflow:
        wf = self.workflow(name_or_iri)
        if wf is None:
            raise KnowledgeBaseError(f"no workflow {name_or_iri!r} in this knowledge base", path=self.path)
        return wf

    def _free_name(self, prefix: str) -> str:
        """``prefix`` + one more than the highest number in use, so a deleted observation's IRI
        (which the semantic index may still hold) is not handed to a new observation."""
        taken = {o.name for o in self._obs.values()} | {iri.rsplit("#", 1)[-1] for iri in self._removed}
        highest = 0
        for name in taken:
            suffix = name[len(prefix) :]
            if name.startswith(prefix) and suffix.isascii() and suffix.isdigit() and len(suffix) < 19:
                highest = max(highest, int(suffix))  # "²" is a digit to isdigit(), not to int()
        return f"{prefix}{highest + 1}"

    def _next_seq(self, category: str, workflow: str | None) -> int:
        seqs = [
            o.finding_seq
            for o in self._obs.values()
            if o.category == category
            and o.finding_seq is not None
            and ((workflow in o.workflows) if workflow else o.unlinked)
        ]
        return max(seqs, default=0) + 1

    def _check_category(self, category: str) -> str:
        if category not in CATEGORIES:
            raise KnowledgeBaseError(
                f"unknown category {category!r} (expected one of {', '.join(CATEGORIES)})", path=self.path
            )
        return category

    def _check_obs_type(self, obs_type: str | None, category: str) -> str:
        if obs_type is None or not str(obs_type).strip():
            return OBSERVATION_TYPES[category][0]
        return self._check_text(str(obs_type).strip(), "observation type")

    def _check_text(self, text: Any, what: str) -> str:
        if not isinstance(text, str):
            raise KnowledgeBaseError(f"{what} must be text, not {type(text).__name__}", path=self.path)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        bad = _XML_INVALID.search(text)
        if bad:
            raise KnowledgeBaseError(
                f"{what} contains a character (U+{ord(bad.group()):04X}) that a KMDS file cannot store; "
                "remove it and try again",
                path=self.path,
            )
        return text

    def _check_finding(self, text: Any) -> str:
        """A finding the user writes (added or edited) says something: one rule for the window's
        dialog and every other caller. Findings already in a loaded file are kept as they are."""
        text = self._check_text(text, "finding")
        if not text.strip():
            raise KnowledgeBaseError("the finding cannot be empty", path=self.path)
        return text

    def _check_optional_text(self, text: Any, what: str) -> str | None:
        return None if text is None else self._check_text(text, what)

    def _check_intent(self, intent: Any) -> str | None:
        if intent is None or (isinstance(intent, str) and not intent.strip()):
            return None
        return self._check_text(intent, "intent").strip()

    def _check_seq(self, seq: Any) -> int | None:
        if seq is None:
            return None
        if isinstance(seq, bool) or not isinstance(seq, int):
            try:
                seq = int(str(seq).strip())  # thousands of digits: ValueError, said below
            except ValueError:
                raise KnowledgeBaseError(
                    f"finding_seq must be a whole number, not {str(seq)[:40]!r}", path=self.path
                ) from None
        if not -MAX_INT <= seq <= MAX_INT:  # the store (SQLite) and every reader take 64-bit numbers
            raise KnowledgeBaseError(f"finding_seq {seq} is out of range (at most {MAX_INT:,})",
                                     path=self.path)
        return seq

    def _check_name(self, name: Any, what: str) -> str:
        if not isinstance(name, str) or not name.strip():
            raise KnowledgeBaseError(f"{what} must not be empty", path=self.path)
        name = name.strip()
        bad = _BAD_NAME.search(name)
        if bad:
            raise KnowledgeBaseError(
                f"{what} {name!r} contains {bad.group()!r}, which an IRI cannot hold", path=self.path
            )
        return name

    def _check_kind(self, kind: str) -> str:
        if kind not in WORKFLOW_KINDS:
            raise KnowledgeBaseError(
                f"unknown workflow kind {kind!r} (expected one of {', '.join(WORKFLOW_KINDS)})",
                path=self.path,
            )
        return kind

    def _in_workflow_order(self, names: list[str]) -> list[str]:
        """An observation lists its workflows in the KB's workflow order, as a reload would."""
        pos = {w.name: i for i, w in enumerate(self._workflows.values())}
        return sorted(names, key=lambda n: pos.get(n, len(pos)))

    def _check_workflow_names(self, names: Iterable[str], allow: str | None = None) -> list[str]:
        if isinstance(names, str):
            names = [names]
        out: list[str] = []
        for ref in names:
            if allow is not None and ref == allow:
                wf_name = ref
            else:
                wf = self.workflow(ref)
                if wf is None:
                    raise KnowledgeBaseError(f"no workflow {ref!r} in this knowledge base", path=self.path)
                wf_name = wf.name
            if wf_name not in out:
                out.append(wf_name)
        return out


# -- loading and saving -------------------------------------------------------------------------
def load_kb(
    path: str | os.PathLike[str],
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> KnowledgeBase:
    """Read a KMDS RDF/XML file into a :class:`KnowledgeBase` (own owlready2 World per file).

    Bad input raises :class:`KnowledgeBaseError` naming the file and the problem; nothing is
    written. A file holding only the KMDS schema loads as an empty KB with a note.
    """
    file = Path(path).expanduser()
    report(progress, 0, 3, f"Reading {file.name}")
    data = read_kb_bytes(file)
    check(cancel)
    prescan_rdfxml(data, file)
    check(cancel)
    report(progress, 1, 3, "Parsing RDF")
    store = KBStore.from_bytes(data, file)
    try:
        check(cancel)
        report(progress, 2, 3, "Collecting workflows and observations")
        result = store.read()
    except BaseException:
        store.close()
        raise
    if not result.has_kmds_terms:
        store.close()
        raise KnowledgeBaseError(
            "this RDF file has no KMDS classes or properties (namespace http://test.org/kmds/kmds.owl#); "
            "it is not a KMDS knowledge base",
            path=file,
        )
    notes = list(result.notes)
    if not result.workflows and not result.observations:
        notes.insert(0, "the file holds only the KMDS schema: no workflows or observations yet")
    kb = KnowledgeBase(file, result.workflows, result.observations, notes=notes, _store=store)
    report(progress, 3, 3, f"Loaded {len(kb)} observations")
    return kb


def new_kb(path: str | os.PathLike[str]) -> KnowledgeBase:
    """An empty, unsaved KB that will be written to ``path`` (nothing touches the disk yet)."""
    kb = KnowledgeBase(path, _store=KBStore.empty())
    kb.dirty = True
    return kb


def save_kb(
    kb: KnowledgeBase,
    path: str | os.PathLike[str] | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> Path:
    """Write ``kb`` as KMDS RDF/XML, atomically: a temporary file in the same folder is written,
    checked, then moved over the target with ``os.replace``, so a failed save never damages the
    original. Temporary files left beside the target by killed saves are removed first
    (:mod:`kmds_desktop.kb.save_temp`). Saving to another path makes that path the KB's file ("save as")."""
    target = Path(path).expanduser().resolve() if path is not None else kb.path
    if target.is_dir():
        raise KnowledgeBaseError("is a folder; choose a file name to save to", path=target)
    folder = target.parent
    if not folder.is_dir():
        raise KnowledgeBaseError(f"the folder {folder} does not exist", path=target)
    with kb._lock:  # noqa: SLF001 - saving is the KB's own job, in its module
        if kb._store is None:  # noqa: SLF001
            kb._store = KBStore.empty()  # noqa: SLF001
        report(progress, 0, 3, "Preparing")
        check(cancel)
        try:
            kb._store.sync(list(kb._workflows.values()), kb.observations, kb._removed)  # noqa: SLF001
        except (ValueError, OverflowError, sqlite3.Error) as exc:  # a value the store cannot hold
            raise KnowledgeBaseError(f"could not be saved: a value cannot be stored ({exc})",
                                     path=target) from None
        kb._removed.clear()  # noqa: SLF001
        check(cancel)
        report(progress, 1, 3, f"Writing {target.name}")
        remove_stale_temps(folder, target.name)  # left by saves that were killed
        try:
            fd, lock_fd, tmp = create_locked_temp(folder, target.name)
        except OSError as exc:
            raise KnowledgeBaseError(
                f"cannot write in {folder} ({exc.strerror or exc})", path=target
            ) from None
        try:
            with os.fdopen(fd, "wb") as fh:
                kb._store.write(fh)  # noqa: SLF001
                fh.flush()
                os.fsync(fh.fileno())
            check(cancel)
            report(progress, 2, 3, "Checking the written file")
            prescan_rdfxml(tmp.read_bytes(), target)  # never replace a good file with a broken one
            if target.exists():
                with contextlib.suppress(OSError):
                    os.chmod(tmp, target.stat().st_mode & 0o7777)
            else:
                # mkstemp makes 0600; a new KB gets the mode any new file gets in this process
                # (0600 in the app, whose umask keeps the user's files private)
                os.chmod(tmp, paths.new_file_mode())
            crash_point("kb.save.temp-written")  # the new file whole beside the old one
            os.replace(tmp, target)
        except KnowledgeBaseError:
            tmp.unlink(missing_ok=True)
            raise
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise KnowledgeBaseError(f"could not be saved ({exc.strerror or exc})", path=target) from None
        except Cancelled:
            tmp.unlink(missing_ok=True)
            raise
        except Exception as exc:  # noqa: BLE001 - a serializer failure must not escape as a traceback
            tmp.unlink(missing_ok=True)
            problem = f"could not be saved ({type(exc).__name__}: {exc})"
            raise KnowledgeBaseError(problem, path=target) from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        finally:
            os.close(lock_fd)  # the temporary file is renamed or removed: nothing to guard now
        kb.path = target
        kb.dirty = False
        report(progress, 3, 3, "Saved")
    return target
