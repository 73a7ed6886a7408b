"""Secrets (API keys, database passwords) from the environment or the OS keyring, never a file.

Values read here must never be logged or shown; use :func:`redact` on any text that might carry them.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
from urllib.parse import unquote

SERVICE = "kmds-desktop"
GOOGLE_KEY_NAME = "google_api_key"
OPENAI_KEY_NAME = "openai_api_key"


def _keyring_get(name: str) -> str | None:
    try:
        import keyring  # why: keyring loads on first use, not at start-up

        return keyring.get_password(SERVICE, name)
    except Exception:  # noqa: BLE001 - no keyring backend on this machine is not an error
        return None


def _keyring_set(name: str, value: str | None) -> None:
    import keyring  # why: keyring loads on first use, not at start-up

    if value:
        keyring.set_password(SERVICE, name, value)
    else:
        with contextlib.suppress(Exception):  # deleting a missing secret is fine
            keyring.delete_password(SERVICE, name)


def google_api_key() -> str | None:
    """``GOOGLE_API_KEY`` from the environment, else the keyring."""
    return os.environ.get("GOOGLE_API_KEY") or _keyring_get(GOOGLE_KEY_NAME)


def set_google_api_key(value: str | None) -> None:
    """Store (or with None/empty, remove) the Google API key in the OS keyring."""
    _keyring_set(GOOGLE_KEY_NAME, value)


def openai_api_key() -> str | None:
    """The OpenAI-compatible server's key: ``OPENAI_API_KEY`` from the environment, else the keyring
    (None for the local servers that need none)."""
    return os.environ.get("OPENAI_API_KEY") or _keyring_get(OPENAI_KEY_NAME)


def set_openai_api_key(value: str | None) -> None:
    """Store (or with None/empty, remove) the OpenAI-compatible server's key in the OS keyring."""
    _keyring_set(OPENAI_KEY_NAME, value)


def db_password(user: str, host: str) -> str | None:
    """``KMDS_DESKTOP_DB_PASSWORD`` / ``PGPASSWORD`` from the environment, else the keyring."""
    return (
        os.environ.get("KMDS_DESKTOP_DB_PASSWORD")
        or os.environ.get("PGPASSWORD")
        or _keyring_get(f"db:{user}@{host}")
    )


def set_db_password(user: str, host: str, value: str | None) -> None:
    _keyring_set(f"db:{user}@{host}", value)


def redact(text: str, *secrets: str | None) -> str:
    """Replace each non-empty secret in ``text`` with ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


#: ``scheme://user:password@`` (or ``user@``) at the start of an address, with or without a scheme.
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)?(?P<userinfo>[^/@\s]*)@(?=[^/\s])")


def url_userinfo(url: str) -> str | None:
    """The ``user:password`` part of an address such as ``http://user:pw@host:11434`` (else None)."""
    match = _USERINFO.match((url or "").strip())
    return match.group("userinfo") if match else None


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``: how an address is shown or logged."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme') or ''}***@", (url or "").strip(), count=1)


def url_secrets(url: str) -> list[str]:
    """What :func:`redact` must hide for an address: its user info and password, raw, decoded and
    base64-encoded (the ``Basic`` credentials they become)."""
    userinfo = url_userinfo(url)
    if not userinfo:
        return []
    password = userinfo.split(":", 1)[1] if ":" in userinfo else ""
    found = [userinfo, unquote(userinfo), password, unquote(password)]
    # as sent in a Basic Authorization header, which a server may echo back
    found.append(base64.b64encode(unquote(userinfo).encode("utf-8")).decode("ascii"))
    # longest first, so a password inside the user info is not replaced before the whole
    return sorted({f for f in found if len(f) >= 3}, key=len, reverse=True)
