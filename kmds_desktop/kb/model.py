"""Plain records of a KMDS knowledge base: the UI, the semantic index and the CLI use these.

They are frozen dataclasses with no owlready2 objects inside, so they can cross threads, be
pickled, compared and turned into JSON; changes go through :class:`KnowledgeBase` methods so the
``dirty`` flag can never be bypassed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


class KnowledgeBaseError(Exception):
    """A knowledge base could not be read, written or changed; the message says which file and why."""

    def __init__(self, message: str, *, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.problem = message
        super().__init__(f"{path}: {message}" if path is not None else message)


@dataclass(frozen=True, slots=True)
class Workflow:
    """A KMDS workflow individual; ``depends_on`` holds the names of the workflows it depends on."""

    iri: str
    name: str
    kind: str
    description: str | None = None
    depends_on: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Observation:
    """One observation; ``workflows`` holds workflow names, empty when it is linked to none."""

    iri: str
    name: str
    category: str
    obs_type: str
    finding: str
    finding_seq: int | None = None
    intent: str | None = None
    workflows: list[str] = field(default_factory=list)
    file_order: int = 0

    @property
    def unlinked(self) -> bool:
        """True when no workflow lists this observation (KMDS files can contain such strays)."""
        return not self.workflows

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["unlinked"] = self.unlinked
        return data
