"""Preferences as the app uses them: which LLM backend the settings give, and the models a server has.

Why here and not in the dialog: "is the configured model installed?" must have one answer. The
ask job uses :func:`kmds_desktop.llm.factory.choose_backend` (and
:func:`kmds_desktop.llm.ollama_backend.has_model`, where ``foo`` and ``foo:latest`` are the same
model), so the status the window shows is computed by the same functions. The probe and the model
lists are blocking network calls, run on a worker; each is bounded by a short timeout (they take the
worker's ``progress=``/``cancel=`` and do not use them).

The form's checks live here too (server addresses, empty model names, which field a validation
error belongs to, a connection string split into fields), so the CLI's options are checked as the
dialog checks the same settings. So does saving (:func:`save_preferences`: the connection string
first, then validation, then the OS keyring, then the settings file, stopping at the first step that
fails), so the dialog only collects the fields and shows the errors it is given back.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmds_desktop import paths, secrets
from kmds_desktop.config import (
    LLMSettings,
    Settings,
    SettingsError,
    load_settings,
    save_settings,
    validate_settings,
)
from kmds_desktop.llm.errors import LLMError
from kmds_desktop.llm.factory import USUAL_OPENAI_SERVERS, FoundServer, choose_backend, server_address
from kmds_desktop.llm.ollama_backend import OllamaBackend, has_model
from kmds_desktop.llm.openai_backend import OpenAIBackend
from kmds_desktop.text import plural

#: An LLM server's address as the settings want it: scheme, host, optional port, nothing else.
SERVER_ADDRESS_RE = re.compile(r"^https?://[^\s/:]+(:\d{1,5})?/?$")
SERVER_ADDRESS_HINT = "not a server address: write it like http://127.0.0.1:11434"
#: An OpenAI-compatible server's API root: the same, with an optional path (most end in ``/v1``).
API_ADDRESS_RE = re.compile(r"^https?://[^\s/:]+(:\d{1,5})?(/[^\s?#]*)?$")
API_ADDRESS_HINT = "not a server address: write it like http://127.0.0.1:8080/v1"

#: Settings that are server addresses, and settings that name a model (the settings model accepts
#: any string for both, so a typo would only show when the first question fails).
SERVER_ADDRESS_KEYS = ("llm.ollama_host", "query_generation.ollama_host")
API_ADDRESS_KEYS = ("llm.openai_base_url", "query_generation.openai_base_url")
MODEL_NAME_KEYS = ("llm.ollama_model", "llm.google_model", "llm.openai_model", "index.embedding_model")

#: The connection-string keys that have a field of their own in the literature settings.
CONNINFO_FIELDS = ("host", "port", "dbname", "user")

#: Seconds the status probe waits for a server, Ollama or OpenAI-compatible (the status bar, Preferences).
PROBE_TIMEOUT_S = 2.0
#: How a status text marks a server that answers: "ollama · model (ready)".
READY = "(ready)"


@dataclass(frozen=True)
class LLMProbe:
    """What the status line shows of the LLM, whether the server answers, and a server "auto" found
    that waits for a yes."""

    text: str
    tooltip: str
    #: The model server answers: the window has it read the route prompt ahead of the first question.
    ready: bool = False
    #: An OpenAI-compatible server found on a usual port, neither confirmed nor declined: the window
    #: asks ``candidate.question`` before any prompt goes to it.
    candidate: FoundServer | None = None


def ready_probe(name: str, tooltip: str, candidate: FoundServer | None = None) -> LLMProbe:
    """The status of a server that answers: ``name`` marked :data:`READY`, and ``ready`` set."""
    return LLMProbe(f"{name} {READY}", tooltip, ready=True, candidate=candidate)


def list_ollama_models(host: str, *, progress: Any = None, cancel: Any = None) -> list[str]:
    """Models installed on the Ollama server at ``host`` (raises LLMError naming the host)."""
    return OllamaBackend(host).list_models(timeout=5.0)


def list_openai_models(base_url: str, *, progress: Any = None, cancel: Any = None) -> list[str]:
    """Models the OpenAI-compatible server at ``base_url`` offers (``/v1/models``; raises LLMError)."""
    return OpenAIBackend(base_url).list_models(timeout=5.0)


def probe_llm_backend(llm: LLMSettings, *, openai_servers: tuple[tuple[str, int], ...] | None = None,
                      progress: Any = None, cancel: Any = None) -> LLMProbe:
    """The status of the configured LLM backend; never raises for an absent LLM. For "auto", what
    asking will use, including a confirmed server on a usual port (``openai_servers``: the ``(name,
    port)`` pairs to look on; None: the usual ports), and a found one still to confirm."""
    backend = llm.backend
    if backend == "offline":
        return LLMProbe("offline (no LLM; answers are extractive)", "Choose a backend in Edit > Preferences.")
    if backend == "google":
        has_key = bool(secrets.google_api_key())
        return LLMProbe(
            f"google · {llm.google_model}" + ("" if has_key else " (no API key)"),
            "The key is read from GOOGLE_API_KEY or the OS keyring.",
        )
    if backend == "openai":
        try:
            models = OpenAIBackend(llm.openai_base_url, llm.openai_model).list_models(timeout=PROBE_TIMEOUT_S)
        except LLMError as exc:
            return LLMProbe("openai (not reachable)", str(exc))
        listed = f"{llm.openai_base_url} offers: {', '.join(models) or 'no models'}"
        # one-model servers (llama.cpp) answer any name with their model, so only an empty list is bad
        if llm.openai_model in models or len(models) == 1:
            return ready_probe(f"openai · {llm.openai_model}", listed)
        return LLMProbe(f"openai · {llm.openai_model} (not offered)", listed)
    if backend == "auto":
        return _auto_probe(llm, USUAL_OPENAI_SERVERS if openai_servers is None else openai_servers)
    try:
        models = OllamaBackend(llm.ollama_host, llm.ollama_model).list_models(timeout=PROBE_TIMEOUT_S)
    except LLMError as exc:
        return LLMProbe("ollama (not reachable)", str(exc))
    listed = f"{llm.ollama_host} has: {', '.join(models) or 'no models'}"
    if has_model(models, llm.ollama_model):
        return ready_probe(f"ollama · {llm.ollama_model}", listed)
    return LLMProbe(f"ollama · {llm.ollama_model} (not installed)", listed)


def _auto_probe(llm: LLMSettings, openai_servers: tuple[tuple[str, int], ...]) -> LLMProbe:
    """The status of what "auto" will ask: the same choice asking makes (:func:`choose_backend`)."""
    choice = choose_backend(llm, probe_timeout=PROBE_TIMEOUT_S, openai_servers=openai_servers)
    if choice.name == "openai":
        model = str(getattr(choice.llm, "model", "") or "")
        address = server_address(str(getattr(choice.llm, "host", "") or ""))
        return ready_probe(f"openai · {model} at {address}", choice.note)
    why = {"no-model": f"Ollama has no {llm.ollama_model}",
           "unreachable": "Ollama not reachable"}.get(choice.ollama_state, "")
    if choice.name == "ollama":
        return ready_probe(f"ollama · {llm.ollama_model}", choice.note, choice.candidate)
    if choice.name == "google":
        text = f"google · {llm.google_model}" + (f" ({why})" if why else "")
    else:
        text = f"offline ({why})" if why else "offline"
    return LLMProbe(text, choice.note, candidate=choice.candidate)


def model_installed(models: list[str], name: str) -> bool:
    """Whether ``name`` is among the server's ``models`` (``foo`` and ``foo:latest`` are one model):
    the ask job's definition, used for every "installed" the dialog shows."""
    return has_model(models, name)


def models_summary(models: list[str], chosen: str) -> str:
    """The line under the Ollama model field once the server listed its models."""
    if not models:
        return "The server has no models yet (ollama pull <model>)."
    state = "installed" if model_installed(models, chosen) else "NOT installed on this server"
    return f"{plural(len(models), 'model')} on the server; the chosen model {chosen!r} is {state}."


def openai_models_summary(models: list[str], chosen: str) -> str:
    """The line under the OpenAI-compatible model field once the server listed its models. A server
    of one model (llama.cpp) answers any name with it, so only an empty list is a problem there."""
    if not models:
        return "The server offers no models: load one in it (LM Studio, llama.cpp's --model)."
    listed = ", ".join(models[:8]) + (f" and {len(models) - 8} more" if len(models) > 8 else "")
    if not chosen:
        return f"The server offers: {listed}. Type or pick one."
    if chosen in models or len(models) == 1:
        return f"The server offers: {listed}; {chosen!r} will answer."
    return f"The server offers: {listed}; {chosen!r} is NOT among them."


def model_list_label(name: str, models: list[str] | None) -> str:
    """How the query-generation model list shows ``name``: marked installed or not once the server's
    ``models`` are known (None: not asked yet); a ``builtin:`` generator needs no server."""
    if models is None or name.startswith("builtin:"):
        return name
    return f"{name}  ✓ installed" if model_installed(models, name) else f"{name}  (not installed)"


def stored_keys() -> dict[str, bool]:
    """Which API keys the OS keyring (or the environment) holds: ``{"google": …, "openai": …}``, for
    the placeholders of the key fields (the keys themselves are never shown)."""
    return {"google": bool(secrets.google_api_key()), "openai": bool(secrets.openai_api_key())}


@dataclass
class PreferencesForm:
    """What the Preferences dialog collected: the settings as a dict (as
    :func:`~kmds_desktop.config.validate_settings` takes it), the field keys errors are shown
    under, and the secrets typed, which never go into the settings file."""

    data: dict[str, Any]
    fields: Collection[str] = ()
    dsn: str = ""
    google_key: str = ""
    forget_google_key: bool = False
    openai_key: str = ""


@dataclass
class SaveOutcome:
    """What :func:`save_preferences` did: the settings saved (None when nothing was), the errors by
    field key (``""`` is the form's general line), and the fields the connection string filled
    (shown in the form whether or not the save went through)."""

    settings: Settings | None
    errors: dict[str, str] = field(default_factory=dict)
    conninfo: dict[str, str] = field(default_factory=dict)

    @property
    def saved(self) -> bool:
        return self.settings is not None


def write_settings(settings: Settings, settings_path: Path | None = None) -> str | None:
    """Write the settings file; None when written, else why not (the window shows it and goes on:
    a settings file that cannot be written must not stop the app)."""
    try:
        save_settings(settings, settings_path)
    except (SettingsError, OSError) as exc:
        return f"Could not save the settings: {exc}"
    return None


def save_preferences(form: PreferencesForm, settings_path: Path | None = None) -> SaveOutcome:
    """Save the form, in the one order that never leaves half a change behind.

    1. The connection string (``literature.dsn``) is split into the external-server fields and its
       password; the fields join the form's data (and the mode becomes ``external``).
    2. Every value is validated (:func:`validate_form`); any error stops here, nothing written.
    3. The keys and the database password go to the OS keyring; a refusing keyring stops here,
       with what to do instead, before the settings file is touched.
    4. The settings file is written.
    """
    data = form.data
    conninfo: dict[str, str] = {}
    password: str | None = None
    dsn_error = ""
    if form.dsn.strip():
        try:
            conninfo, password = split_conninfo(form.dsn)
        except ValueError as exc:
            dsn_error = str(exc)
        else:
            data.setdefault("literature", {}).update({"mode": "external", **conninfo})
    settings, errors = validate_form(data, form.fields)
    if dsn_error:
        errors["literature.dsn"] = dsn_error
        settings = None
    if settings is None:
        return SaveOutcome(None, errors, conninfo)
    try:
        if form.forget_google_key:
            secrets.set_google_api_key(None)
        elif form.google_key.strip():
            secrets.set_google_api_key(form.google_key.strip())
        if form.openai_key.strip():
            secrets.set_openai_api_key(form.openai_key.strip())
        if password:
            secrets.set_db_password(settings.literature.user, settings.literature.host, password)
    except Exception as exc:  # noqa: BLE001 - no keyring backend: say so, save nothing
        return SaveOutcome(None, {"google_key": f"the OS keyring refused the secret ({exc}); set "
                                                "GOOGLE_API_KEY or PGPASSWORD in the environment instead"},
                           conninfo)
    try:
        save_settings(settings, settings_path)
    except (SettingsError, OSError) as exc:
        return SaveOutcome(None, {"": f"Could not write the settings: {exc}"}, conninfo)
    return SaveOutcome(settings, {}, conninfo)


def server_address_error(text: str | None) -> str | None:
    """Why ``text`` is not an LLM server address (None when it is one).

    Why not in the settings model: it accepts any string (old settings files must still load), so
    the window's form and the CLI's ``--ollama-host`` check the value here before they set it.
    """
    return None if SERVER_ADDRESS_RE.match((text or "").strip()) else SERVER_ADDRESS_HINT


def api_address_error(text: str | None) -> str | None:
    """Why ``text`` is not an OpenAI-compatible API address (None when it is one; a path such as
    ``/v1`` is allowed there, unlike an Ollama host)."""
    return None if API_ADDRESS_RE.match((text or "").strip()) else API_ADDRESS_HINT


def extra_errors(data: dict[str, Any]) -> dict[str, str]:
    """``{"section.name": message}`` for the checks the settings model does not make on ``data``
    (a settings dict as :func:`~kmds_desktop.config.validate_settings` takes it): server addresses
    and empty model names."""
    errors: dict[str, str] = {}
    for key in SERVER_ADDRESS_KEYS:
        section, name = key.split(".")
        problem = server_address_error(data.get(section, {}).get(name))
        if problem:
            errors[key] = problem
    for key in API_ADDRESS_KEYS:
        section, name = key.split(".")
        value = data.get(section, {}).get(name)
        if value is not None and not API_ADDRESS_RE.match(str(value).strip()):
            errors[key] = API_ADDRESS_HINT
    for key in MODEL_NAME_KEYS:
        section, name = key.split(".")
        if not str(data.get(section, {}).get(name) or "").strip():
            errors[key] = "cannot be empty"
    return errors


def field_of(key: str, fields: Collection[str]) -> str:
    """The form field a validation error's key belongs to: the key itself, else its
    ``section.name`` (a list item such as ``query_generation.models.2`` belongs to the list's
    field), else ``""`` (the form's general error line)."""
    if key in fields:
        return key
    parent = ".".join(key.split(".")[:2])
    return parent if parent in fields else ""


def validate_form(
    data: dict[str, Any], fields: Collection[str] = ()
) -> tuple[Settings | None, dict[str, str]]:
    """Validated settings, or None and ``{field: message}`` for every problem in ``data``.

    Each error is put under the field (one of ``fields``) it belongs to (see :func:`field_of`);
    the first message for a field wins. The dialog shows them under its fields; nothing here
    knows about widgets.
    """
    errors = extra_errors(data)
    settings: Settings | None = None
    try:
        settings = validate_settings(data)
    except SettingsError as exc:
        text = str(exc).removeprefix("invalid settings: ")
        for part in text.split("; "):
            key, _, msg = part.partition(": ")
            errors.setdefault(field_of(key, fields), msg or part)
    return (None if errors else settings), errors


def split_conninfo(text: str) -> tuple[dict[str, str], str | None]:
    """A PostgreSQL connection string (``key=value`` pairs or a ``postgresql://`` URL) as the
    literature settings' fields (``host``, ``port``, ``dbname``, ``user``; those it names) and
    its password (None when it has none; it belongs in the OS keyring, never in the settings).

    Raises ValueError with libpq's reason when ``text`` is not a connection string.
    """
    from psycopg import conninfo  # why: psycopg loads on first use, not at start-up

    try:
        info = conninfo.conninfo_to_dict(text.strip())
    except Exception as exc:  # noqa: BLE001 - psycopg raises ProgrammingError with libpq's reason
        raise ValueError(f"not a valid connection string ({exc})") from None
    fields = {key: str(info[key]) for key in CONNINFO_FIELDS if info.get(key)}
    return fields, (str(info["password"]) if info.get("password") else None)



def load_settings_or_defaults() -> tuple[Settings, str | None]:
    """The user's settings, or defaults plus a message when the file is unusable (the window's
    start-up; a command fails with exit 2 instead, naming the bad value).

    A broken file is copied aside (``settings.json.broken``) before defaults are used, so saving the
    defaults later never destroys what the user wrote.
    """
    try:
        return load_settings(), None
    except SettingsError as exc:
        path = paths.settings_file()
        backup = path.with_name(path.name + ".broken")
        try:
            shutil.copy2(path, backup)
            where = f" A copy of the file was kept as {backup}."
        except OSError:
            where = ""
        return Settings(), f"The settings could not be used, so defaults apply: {exc}.{where}"
