"""Which vectors a semantic row searches: the app's own, or those the database already holds.

On a database the app does not own (BMLibrarian), chunk vectors of the database's own model may
cover every document already (:mod:`kmds_desktop.literature.store.bmlibrarian_vectors`). They are used
when ``retrieval.use_database_vectors`` is on and that model answers on the configured Ollama server
(the row's sentence must be embedded by the model that made the vectors); otherwise the semantic row
runs on the app's vectors as before, and the reason the database's own were not used is kept for the
row's message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kmds_desktop.literature.errors import LiteratureError
from kmds_desktop.literature.store.bmlibrarian_vectors import (
    DatabaseVectors,
    find_database_vectors,
)
from kmds_desktop.llm.errors import LLMError
from kmds_desktop.tasks import CancelToken

log = logging.getLogger(__name__)


@dataclass
class VectorChoice:
    """The vectors to search (None: the app's own table) and how to embed a sentence for them."""

    vectors: DatabaseVectors | None = None
    backend: Any = None
    #: why the database's own vectors are not searched (their model is not on the server), or None
    note: str | None = None
    #: sentences embedded in this run (the question's vector serves its semantic row and the re-ranking)
    _embedded: dict[str, Any] = field(default_factory=dict, repr=False)

    def embed(self, text: str, *, cancel: CancelToken | None = None) -> Any:
        """The unit-length vector of ``text`` by the database's model; raises :class:`LiteratureError`
        when the server fails or the model makes vectors of another size than the table holds."""
        import numpy as np  # why: numpy loads on first use, not at start-up

        assert self.vectors is not None and self.backend is not None  # noqa: S101 - narrows: built with both
        if text in self._embedded:
            return self._embedded[text]
        try:
            vector = np.asarray(self.backend.embed([text], model=self.vectors.model_name, cancel=cancel)[0],
                                dtype=np.float32)
        except LLMError as err:
            raise LiteratureError(f"the sentence could not be embedded with {self.vectors.model_name}: "
                                  f"{err}") from None
        if vector.shape[0] != self.vectors.dimensions:
            raise LiteratureError(
                f"{self.vectors.model_name} on the Ollama server makes {vector.shape[0]}-dimensional "
                f"vectors, but the database's {self.vectors.table} holds {self.vectors.dimensions}: it is "
                "another model of that name; the semantic row cannot search them")
        norm = float(np.linalg.norm(vector))
        self._embedded[text] = vector / norm if norm > 0 else vector
        return self._embedded[text]


def choose_vectors(db: Any, *, use_database_vectors: bool, ollama_host: str, timeout_s: float,
                   cancel: CancelToken | None = None) -> VectorChoice:
    """The database's own vectors when there are some and their model is on the server, else the
    app's (with a note saying which model would let the row search the database's own)."""
    if not use_database_vectors or getattr(db, "schema_owner", "app") == "app":
        return VectorChoice()
    found = find_database_vectors(db, cancel=cancel)
    if not found:
        return VectorChoice()
    from kmds_desktop.llm.ollama_backend import OllamaBackend  # why: start-up time: it loads httpx, ollama

    for vectors in found:
        backend = OllamaBackend(ollama_host, vectors.model_name, timeout=timeout_s)
        if backend.is_available(timeout=min(timeout_s, 5.0)):
            log.info("semantic rows search %s (%s)", vectors.describe(), vectors.table)
            return VectorChoice(vectors, backend)
    names = ", ".join(dict.fromkeys(v.model_name for v in found))
    note = (f"this database holds its own vectors of every chunk it embedded ({names}), but the Ollama "
            f"server at {ollama_host} does not have that model: run 'ollama pull {found[0].model_name}' "
            "there to search them by meaning")
    log.info("%s", note)
    return VectorChoice(note=note)
