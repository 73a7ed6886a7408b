"""PostgreSQL fixtures: the app's embedded server started for real, with the shared corpora imported.

``pg_database`` is the session-wide, read-mostly database every area's tests share: the embedded
server in the session data folder (exactly what ``open_database()`` uses there), with SciFact,
PubMed sample, PubMedQA, CF and both raw MEDLINE XML files imported. Tests that write use
``pg_empty_database`` (a fresh database on the same server, dropped afterwards). ``pg_external`` is a
second server on a 127.0.0.1 TCP port with password authentication, for external mode; ``pg_own_server``
a server of one test's own, for tests that stop it.

Every server started here is stopped, and its files deleted, at session end. Nothing is skipped:
when PostgreSQL cannot start (for example no unprivileged user can be created as root) the fixture
fails with the reason.
"""

from __future__ import annotations

import os
import secrets as pysecrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

__all__ = ["pg_database", "pg_dsn", "pg_empty_database", "pg_external", "pg_own_server", "pg_server",
           "PG_CORPUS_FILES"]

_SESSION_HOME = Path(os.environ.get("KMDS_DESKTOP_HOME") or tempfile.mkdtemp(prefix="kmds-pg-home-"))

#: Files imported into ``pg_database`` (relative to ``../shared/data/literature``).
PG_CORPUS_FILES = (
    "scifact/corpus.jsonl",
    "pubmed_sample/corpus.jsonl",
    "raw/medline16n0902.xml.gz",
    "raw/test_current_medline.xml.gz",
    "pubmedqa/ori_pqal.json",
    "cf/corpus.jsonl",
)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """The embedded server of the session data folder, started by the app's own code."""
    from kmds_desktop.literature.store.server import default_server

    # durable=False: no fsync for a server whose data is thrown away (same code, same binaries).
    server = default_server(_SESSION_HOME / "postgres", durable=False)
    assert server.is_running(), f"embedded PostgreSQL did not start: see {server.log_path}"
    yield server
    server.destroy()  # stop it and delete its files (~150 MB with the corpora) from the session folder


@pytest.fixture(scope="session")
def pg_database(pg_server: Any, literature_data: Path) -> Iterator[Any]:
    """An open ``LiteratureDatabase`` on the embedded test server with the shared corpora imported."""
    from kmds_desktop.literature.store.database import open_embedded

    db = open_embedded(pg_server.root, statement_timeout_ms=30_000)
    report = db.import_files([literature_data / rel for rel in PG_CORPUS_FILES])
    assert report.records > 9000 and not report.skipped, report.summary()
    yield db
    db.close()


@pytest.fixture(scope="session")
def pg_dsn(pg_database: Any) -> str:
    """libpq DSN of ``pg_database`` (Unix socket of the embedded server; no password needed)."""
    return str(pg_database.dsn)


@pytest.fixture()
def pg_empty_database(pg_server: Any) -> Iterator[Any]:
    """A fresh, empty literature database on the session server (schema created), dropped afterwards."""
    from kmds_desktop.config import LiteratureSettings
    from kmds_desktop.literature.store.database import open_database

    name = f"kmds_test_{pysecrets.token_hex(4)}"
    admin = pg_server.conninfo("postgres")
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # generated identifier, not user input
    info = pg_server.conninfo(name)
    dsn = " ".join(f"{k}={v}" for k, v in info.items())
    db = open_database(dsn, settings=LiteratureSettings(statement_timeout_ms=30_000))
    yield db
    db.close()
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def pg_external(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A second server on 127.0.0.1 with SCRAM password auth: ``{"dsn", "password", "server"}``.

    The DSN carries host, port, database and user but no password, as a user would configure it.
    """
    from kmds_desktop.literature.store.server import EmbeddedServer, _free_port

    password = "pw-" + pysecrets.token_hex(8)
    root = Path(tempfile.mkdtemp(prefix="kmds-ext-pg-"))
    server = EmbeddedServer(root, tcp_port=_free_port(), password=password, durable=False)
    server.start()
    admin = server.conninfo("postgres")
    with psycopg.connect(**admin, password=password, autocommit=True) as conn:
        conn.execute("CREATE DATABASE literature_ext")
    dsn = f"host=127.0.0.1 port={server.tcp_port} dbname=literature_ext user=postgres"
    yield {"dsn": dsn, "password": password, "server": server, "admin": admin}
    server.destroy()


@pytest.fixture()
def pg_own_server() -> Iterator[dict[str, Any]]:
    """A server of this test's own with an empty literature database: ``{"server", "database"}``.

    For tests that stop the server: the session's server stays up for every other test.
    """
    from kmds_desktop.config import LiteratureSettings
    from kmds_desktop.literature.store.database import open_database
    from kmds_desktop.literature.store.server import EmbeddedServer

    root = Path(tempfile.mkdtemp(prefix="kmds-own-pg-"))
    server = EmbeddedServer(root, durable=False)
    server.start()
    with psycopg.connect(**server.conninfo("postgres"), autocommit=True) as conn:
        conn.execute("CREATE DATABASE literature_own")
    dsn = " ".join(f"{k}={v}" for k, v in server.conninfo("literature_own").items())
    db = open_database(dsn, settings=LiteratureSettings(statement_timeout_ms=30_000))
    yield {"server": server, "database": db}
    db.close()
    server.destroy()
