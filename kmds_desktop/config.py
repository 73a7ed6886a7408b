"""One validated settings model for the whole app, stored as JSON in the data folder.

The GUI's Preferences dialog, the CLI and the core read the same :class:`Settings`. Values are
validated by pydantic when loaded and before being saved, so an invalid file fails at start-up with
a message naming the key, and the Preferences dialog can show the same message inline.
Secrets (the Google API key, database passwords) are never stored here: they live in the OS keyring
or the environment (see :mod:`kmds_desktop.secrets`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kmds_desktop import paths

DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"
#: An OpenAI-compatible server on this machine (llama.cpp's ``llama-server`` listens on 8080); the
#: ``/v1`` is added when the address has no path (see ``llm.openai_backend.api_base``).
DEFAULT_OPENAI_BASE_URL = "http://127.0.0.1:8080/v1"


class SettingsError(ValueError):
    """Settings that cannot be used; the message names the offending key(s)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LLMSettings(_Section):
    """Which LLM answers questions (the orchestrator's router and synthesis)."""

    backend: Literal["auto", "ollama", "google", "openai", "offline"] = "auto"
    ollama_host: str = DEFAULT_OLLAMA_HOST
    ollama_model: str = "llama3.1:8b"
    google_model: str = "gemini-2.5-flash"
    #: An OpenAI-compatible server (LM Studio, llama.cpp, vLLM); its API key, when it needs one, is in
    #: the OS keyring or ``OPENAI_API_KEY``, never here. Only used when ``backend`` is "openai".
    openai_base_url: str = DEFAULT_OPENAI_BASE_URL
    openai_model: str = "default"
    temperature: float = Field(0.1, ge=0.0, le=2.0)
    timeout_s: float = Field(120.0, gt=0)
    #: OpenAI-compatible servers (API roots) that "auto" found on this machine's usual ports and the
    #: user agreed to use: a server on a shared workstation's loopback may be another user's, so none
    #: is sent a prompt before it is confirmed here.
    confirmed_servers: list[str] = Field(default_factory=list)
    #: Servers "auto" found and the user said no to: never used, never asked about again.
    declined_servers: list[str] = Field(default_factory=list)


class QueryGenerationSettings(_Section):
    """Multi-model query generation for the literature search (section ``query_generation``)."""

    multi_model_enabled: bool = False
    models: list[str] = Field(default_factory=lambda: ["builtin:keywords"], min_length=1)
    queries_per_model: int = Field(3, ge=1, le=3)
    execution_mode: str = "serial"
    deduplicate_results: bool = True
    show_all_queries_to_user: bool = True
    allow_query_selection: bool = True
    temperature: float = Field(0.1, ge=0.0, le=2.0)
    ollama_host: str = DEFAULT_OLLAMA_HOST
    #: The server that answers models named ``openai:NAME`` in ``models``.
    openai_base_url: str = DEFAULT_OPENAI_BASE_URL
    timeout_s: float = Field(120.0, gt=0)
    #: Whether the built-in generator adds each concept's neighbours in the embedding model's space
    #: ("pulmonary function" for "lung function") to its blocks, beside the corpus's abbreviations,
    #: spellings and feedback words. Off: no embedding model is loaded to write queries.
    builtin_embedding_variants: bool = True
    #: Models (as written in ``models``) asked for their own tsquery, as BMLibrarian asks. Every other
    #: LLM names the question's concepts as JSON and the app writes the queries from them (a small
    #: model's own tsqueries found far less than the built-in's; see ``literature.queries.concept_json``).
    verbatim_query_models: list[str] = Field(default_factory=list)

    @field_validator("execution_mode")
    @classmethod
    def _serial_only(cls, value: str) -> str:
        if value != "serial":
            raise ValueError(
                f"execution_mode {value!r} is not supported: only 'serial' is, because local Ollama "
                "models share one GPU/CPU and running them in parallel only makes each slower"
            )
        return value

    @field_validator("verbatim_query_models")
    @classmethod
    def _clean_verbatim(cls, value: list[str]) -> list[str]:
        return [m.strip() for m in value if m and m.strip()]

    @field_validator("models")
    @classmethod
    def _clean_models(cls, value: list[str]) -> list[str]:
        cleaned = [m.strip() for m in value if m and m.strip()]
        if not cleaned:
            raise ValueError("at least one model is required")
        return cleaned


class LiteratureSettings(_Section):
    """The literature database: the embedded server (default) or any PostgreSQL by DSN."""

    mode: Literal["embedded", "external"] = "embedded"
    host: str = "127.0.0.1"
    port: int = Field(5432, ge=1, le=65535)
    dbname: str = "bmlibrarian"
    user: str = "postgres"
    statement_timeout_ms: int = Field(30_000, ge=0)
    fetch_batch_size: int = Field(50, ge=1, le=10_000)
    max_rows: int = Field(100, ge=1, le=100_000)


class RetrievalSettings(_Section):
    """Searching the literature by meaning, and merging rows (section ``retrieval``).

    ``fusion_k`` is the constant of reciprocal rank fusion: a document's fused score is the sum over
    the ticked rows of ``weight / (fusion_k + rank)`` (rank from 1), so a larger constant flattens the
    difference between the first ranks (Cormack et al. 2009 and BMLibrarian use 60).
    ``semantic_weight`` is the weight of semantic and hypothetical rows (full-text rows weigh 1).
    ``rerank`` re-orders the fused candidates by mixing their cosine similarity to the question (stored
    vectors, computed on demand for candidates without one) with their full-text evidence (the best
    score a full-text row gave them), both scaled to 0-1: ``rerank_weight`` is the similarity's share
    (0: full-text evidence only, 1: similarity only). ``fulltext_ranking`` orders each full-text row:
    ``bm25`` ranks from the top-k index beside the database (an OR row skips the documents that
    cannot reach the rows asked for, an AND row costs about its rarest term's documents; idf where the
    index is not finished), ``idf`` weighs every term by its rarity in
    PostgreSQL (every match ranked), ``ts_rank_cd`` is PostgreSQL's cover density, every word alike
    (BMLibrarian's order). bm25 is the default because it is the one that stays fast at PubMed size;
    on SciFact *train* it is within 0.6 % of idf (fused nDCG@10 0.709 against 0.713, recall@100
    0.951 both).

    Defaults measured on SciFact *train* claims (three ``builtin:keywords`` rows and the semantic
    row; docs/design/ranking.md, *Measured*): idf ranking, k = 20 with semantic weight 3, re-ranking on with
    weight 0.7. Tuned only on the train split.
    """

    semantic_row: bool = True  # add a semantic row (the question) to every search
    hypothetical_row: bool = True  # and, when an LLM is configured, a hypothetical-abstract row
    fusion: Literal["rrf", "best_rank"] = "rrf"
    fusion_k: int = Field(20, ge=1, le=1000)
    semantic_weight: float = Field(3.0, ge=0.0, le=10.0)
    fulltext_ranking: Literal["bm25", "idf", "ts_rank_cd"] = "bm25"
    rerank: bool = True
    rerank_weight: float = Field(0.7, ge=0.0, le=1.0)
    rerank_candidates: int = Field(200, ge=1, le=5000)
    embed_after_import: bool = True
    embed_batch_size: int = Field(64, ge=1, le=4096)
    allow_vectors_in_external_database: bool = False
    #: On a database the app does not own that holds vectors of its own (BMLibrarian's chunk vectors),
    #: semantic rows search those when their model is on the Ollama server (``query_generation.
    #: ollama_host``): nothing to embed, every document they cover is found.
    use_database_vectors: bool = True
    #: bm25 rows: rank a broad AND row by walking every match instead of within the top-k index's
    #: impact tier (see literature.store.topk_tiers). Off by default: the walk grows with the matches
    #: (tens of milliseconds per row at PubMed size); the tier's row is the same matches' best in
    #: the tier, labelled as such in every report.
    exact_broad_rows: bool = False


class IndexSettings(_Section):
    """The semantic index: local ChromaDB store (default) or a Chroma server."""

    mode: Literal["local", "server"] = "local"
    chroma_host: str = "127.0.0.1"
    chroma_port: int = Field(8000, ge=1, le=65535)
    embedding_model: str = "all-MiniLM-L6-v2"
    #: Most records an answer shows (a listing shows every match up to it, an open question its
    #: relevant records up to it); the CLI's ``ask --limit`` overrides it for one question.
    n_results: int = Field(50, ge=1, le=1000)


class UISettings(_Section):
    """Window state and history that persist between runs."""

    recent_files: list[str] = Field(default_factory=list)
    last_kb: str | None = None
    window_geometry: str | None = None  # base64 of QMainWindow.saveGeometry()
    window_state: str | None = None  # base64 of QMainWindow.saveState()
    splitter_sizes: list[int] = Field(default_factory=list)
    question_history: list[str] = Field(default_factory=list)
    max_recent: int = Field(10, ge=1, le=50)
    #: The folder each kind of file dialog last chose a file in ("kb", "literature", "export", ...):
    #: the next dialog of that kind starts there, not in the home folder.
    last_folders: dict[str, str] = Field(default_factory=dict)

    def add_recent(self, path: str) -> None:
        """Put ``path`` first in the recent list (no duplicates, bounded)."""
        items = [p for p in self.recent_files if p != path]
        self.recent_files = [path, *items][: self.max_recent]


class Settings(_Section):
    """All settings of the app."""

    llm: LLMSettings = Field(default_factory=LLMSettings)
    query_generation: QueryGenerationSettings = Field(default_factory=QueryGenerationSettings)
    literature: LiteratureSettings = Field(default_factory=LiteratureSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    ui: UISettings = Field(default_factory=UISettings)


def describe_validation_error(err: ValidationError, prefix: str = "") -> str:
    """Turn a pydantic error into lines like ``query_generation.execution_mode: ...``."""
    lines = []
    for item in err.errors():
        key = ".".join(str(p) for p in item["loc"])
        key = f"{prefix}{key}" if prefix else key
        lines.append(f"{key}: {item['msg']}")
    return "; ".join(lines)


def validate_settings(data: dict[str, Any]) -> Settings:
    """Build :class:`Settings` from a dict, raising :class:`SettingsError` naming each bad key."""
    try:
        return Settings.model_validate(data)
    except ValidationError as err:
        raise SettingsError(f"invalid settings: {describe_validation_error(err)}") from None


def load_settings(path: Path | None = None) -> Settings:
    """Read the settings file (defaults when it does not exist).

    A file that is not JSON or has invalid values raises :class:`SettingsError`; the file itself is
    left as it is so the user can fix it.
    """
    path = path or paths.settings_file()
    if not path.exists():
        return Settings()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SettingsError(f"cannot read settings file {path}: {err}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"settings file {path} must hold a JSON object")
    try:
        return validate_settings(data)
    except SettingsError as err:
        raise SettingsError(f"{path}: {err}") from None


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    """Validate and write the settings atomically (temporary file, then rename)."""
    path = path or paths.settings_file()
    validate_settings(settings.model_dump())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(settings.model_dump(mode="json"), fh, indent=2)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def get_query_generation_config(settings: Settings | None = None) -> dict[str, Any]:
    """The ``query_generation`` section as a plain dict, by BMLibrarian's name for it.

    Keys (BMLibrarian's): ``multi_model_enabled``, ``models``, ``queries_per_model``,
    ``execution_mode``, ``deduplicate_results``, ``show_all_queries_to_user``,
    ``allow_query_selection``; and this app's ``temperature``, ``ollama_host``, ``timeout_s``.
    Read from the settings file (defaults when there is none); a copy, so changing it changes
    nothing until saved through :func:`save_settings`.
    """
    settings = settings if settings is not None else load_settings()
    return settings.query_generation.model_dump(mode="json")
