"""Secrets (API keys, database passwords) from the environment or the OS keyring, never a file.

Values read here must never be logged or shown; use :func:`redact` on any text that might carry them.
"""

from __future__ import annotations

import os

SERVICE = "kmds-desktop"
GOOGLE_KEY_NAME = "google_api_key"


def _keyring_get(name: str) -> str | None:
    try:
        import keyring

        return keyring.get_password(SERVICE, name)
    except Exception:  # noqa: BLE001 - no keyring backend on this machine is not an error
        return None


def _keyring_set(name: str, value: str | None) -> None:
    import keyring

    if value:
        keyring.set_password(SERVICE, name, value)
    else:
        try:
            keyring.delete_password(SERVICE, name)
        except Exception:  # noqa: BLE001 - deleting a missing secret is fine
            pass


def google_api_key() -> str | None:
    """``GOOGLE_API_KEY`` from the environment, else the keyring."""
    return os.environ.get("GOOGLE_API_KEY") or _keyring_get(GOOGLE_KEY_NAME)


def set_google_api_key(value: str | None) -> None:
    """Store (or with None/empty, remove) the Google API key in the OS keyring."""
    _keyring_set(GOOGLE_KEY_NAME, value)


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
