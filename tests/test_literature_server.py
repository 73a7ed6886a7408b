"""The embedded server (reuse, socket-only, root handling, stop on exit) and external mode by DSN."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import psycopg
import pytest

from kmds_desktop.config import LiteratureSettings
from kmds_desktop.literature import open_database
from kmds_desktop.literature.errors import DatabaseUnavailable
from kmds_desktop.literature.store.schema import LATEST_VERSION, VERSION_TABLE
from kmds_desktop.literature.store.server import EmbeddedServer

REPO = Path(__file__).resolve().parent.parent


def _python(code: str, home: Path, extra_env: dict[str, str] | None = None) -> str:
    env = {**os.environ, "KMDS_DESKTOP_HOME": str(home), **(extra_env or {})}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_embedded_server_listens_only_on_a_private_socket(pg_server):
    info = (pg_server.pgdata / "postmaster.pid").read_text().splitlines()
    assert info[5].strip() == ""  # listen_addresses: no TCP at all
    assert Path(info[4].strip()) == pg_server.socket_dir()
    assert (pg_server.socket_dir() / ".s.PGSQL.5432").is_socket()
    mode = pg_server.pgdata.stat().st_mode & 0o777
    assert mode == 0o700
    owner = pg_server.pgdata.stat().st_uid
    if os.geteuid() == 0:
        assert owner != 0, "as root the server must run as an unprivileged user"
    else:
        assert owner == os.geteuid()
    server_uid = int(subprocess.run(["ps", "-o", "uid=", "-p", str(pg_server.pid())], capture_output=True,
                                    text=True, check=True).stdout.strip())
    assert server_uid != 0 and server_uid == owner


def test_second_app_instance_reuses_the_running_server(pg_database, pg_server):
    pid = pg_server.pid()
    home = pg_server.root.parent
    out = _python(
        """
        from kmds_desktop.literature import open_database
        db = open_database()
        print(db.server.pid(), db.status()["documents"])
        db.close()
        """,
        home,
    )
    child_pid, documents = (int(x) for x in out.split())
    assert child_pid == pid
    assert documents == pg_database.status()["documents"]
    assert pg_server.is_running() and pg_server.pid() == pid  # the child's exit left it running for us


def test_server_stops_when_the_last_app_process_exits():
    # Not under tmp_path: pytest resets its base folder to 0700, which would lock the server's
    # unprivileged user out when the tests run as root.
    home = Path(tempfile.mkdtemp(prefix="kmds-exit-test-"))
    out = _python(
        """
        from kmds_desktop.literature import open_database
        db = open_database()
        print(db.server.pid(), db.server.pgdata)
        """,
        home,
    )
    pid_text, pgdata = out.split()
    server = EmbeddedServer(Path(pgdata).parent)
    assert not server.is_running()
    assert not (Path(pgdata) / ".s.PGSQL.5432").exists() and not (Path(pgdata) / "postmaster.pid").exists()
    assert int(pid_text) > 0
    shutil.rmtree(home, ignore_errors=True)


def test_external_server_with_password_from_environment(pg_external, tmp_path, monkeypatch, caplog):
    dsn, password = pg_external["dsn"], pg_external["password"]
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("KMDS_DESKTOP_DB_PASSWORD", "wrong-" + password)
    with pytest.raises(DatabaseUnavailable) as info:
        open_database(dsn)
    assert password not in str(info.value) and "password authentication failed" in str(info.value)

    monkeypatch.setenv("KMDS_DESKTOP_DB_PASSWORD", password)
    db = open_database(dsn, settings=LiteratureSettings(statement_timeout_ms=5000))
    try:
        status = db.status()
        assert status["mode"] == "external" and status["schema_version"] == LATEST_VERSION
        assert password not in repr(status) and password not in db.dsn
        path = tmp_path / "ext.jsonl"
        path.write_text('{"id": "e:1", "source": "medrxiv", "title": "Preprint on influenza vaccines"}\n'
                        '{"id": "p:1", "source": "pubmed", "pmid": "42", "title": "Influenza in PubMed"}\n')
        assert db.import_files([path]).inserted == 2
        assert len(db.find_abstract_ids("influenza")) == 2
        only_medrxiv = db.find_abstract_ids("influenza", use_pubmed=False, use_others=False)
        assert [d["source_name"] for d in db.fetch_documents_by_ids(only_medrxiv)] == ["medRxiv"]
    finally:
        db.close()
    # the password inside a DSN is used but never shown
    db = open_database(f"{dsn} password={password}")
    try:
        assert password not in db.dsn and password not in db.display_name
    finally:
        db.close()
    assert password not in caplog.text


def test_external_settings_mode_reads_the_password_from_the_environment(pg_external, monkeypatch):
    monkeypatch.setenv("KMDS_DESKTOP_DB_PASSWORD", pg_external["password"])
    settings = LiteratureSettings(mode="external", host="127.0.0.1", port=pg_external["server"].tcp_port,
                                  dbname="literature_ext", user="postgres")
    db = open_database(settings=settings)
    try:
        assert db.mode == "external" and db.status()["server_version"].startswith("18")
    finally:
        db.close()


def test_external_password_from_the_os_keyring(pg_external, monkeypatch, caplog, memory_keyring):
    """No password in the environment: the one stored in the keyring for user@host is used, never shown."""
    from kmds_desktop import secrets

    monkeypatch.delenv("KMDS_DESKTOP_DB_PASSWORD", raising=False)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pytest.raises(DatabaseUnavailable) as info:  # nothing stored yet: a clear refusal
        open_database(pg_external["dsn"])
    assert "127.0.0.1" in str(info.value)
    secrets.set_db_password("postgres", "127.0.0.1", pg_external["password"])
    db = open_database(pg_external["dsn"])
    try:
        assert db.status()["mode"] == "external" and isinstance(db.find_abstract_ids("influenza"), set)
        assert pg_external["password"] not in db.dsn + db.display_name + repr(db.status())
    finally:
        db.close()
    assert pg_external["password"] not in caplog.text


BMLIBRARIAN_DDL = """
CREATE TABLE sources (id serial PRIMARY KEY, name text UNIQUE NOT NULL, url text, is_reputable boolean,
                      is_free boolean);
CREATE TABLE document (id serial PRIMARY KEY, source_id integer REFERENCES sources(id),
  external_id text NOT NULL, doi text, title text, abstract text, authors text[], publication text,
  publication_date date, mesh_terms text[], keywords text[], url text, withdrawn_date date,
  augmented_keywords text[],
  search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', coalesce(title,'')),'A') ||
    setweight(to_tsvector('english', coalesce(abstract,'')),'B')) STORED,
  UNIQUE (source_id, external_id));
CREATE INDEX idx_document_search_vector ON document USING gin (search_vector);
INSERT INTO sources (name) VALUES ('pubmed'), ('medrxiv'), ('other');
INSERT INTO document (source_id, external_id, title, publication_date) VALUES
  (1, '100', 'Asthma in children', '2020-05-01'), (2, 'm1', 'Asthma preprint', NULL),
  (3, 'o1', 'Asthma elsewhere', '1999-01-01');
"""


def _schema_snapshot(conn: psycopg.Connection) -> list[tuple]:
    return conn.execute(
        "SELECT c.relname, c.relkind, pg_get_indexdef(c.oid) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' ORDER BY 1"
    ).fetchall()


def test_existing_bmlibrarian_database_is_used_as_is(pg_external, monkeypatch):
    admin, password = pg_external["admin"], pg_external["password"]
    with psycopg.connect(**admin, password=password, autocommit=True) as conn:
        conn.execute("CREATE DATABASE bmlib")
    with psycopg.connect(**{**admin, "dbname": "bmlib"}, password=password, autocommit=True) as conn:
        conn.execute(BMLIBRARIAN_DDL)
        before = _schema_snapshot(conn)
    monkeypatch.setenv("KMDS_DESKTOP_DB_PASSWORD", password)
    db = open_database(f"host=127.0.0.1 port={pg_external['server'].tcp_port} dbname=bmlib user=postgres")
    try:
        assert db.schema_owner == "external" and db.schema_version is None
        assert len(db.find_abstract_ids("asthma")) == 3
        pubmed = db.find_abstract_ids("asthma", use_medrxiv=False, use_others=False)
        docs = db.fetch_documents_by_ids(pubmed)
        assert [(d["source_name"], d["pmid"]) for d in docs] == [("pubmed", "100")]
        assert len(db.find_abstract_ids("asthma", use_pubmed=False, use_medrxiv=False)) == 1
        assert db.status()["sources"] == {"medrxiv": 1, "other": 1, "pubmed": 1}
    finally:
        db.close()
    with psycopg.connect(**{**admin, "dbname": "bmlib"}, password=password) as conn:
        assert _schema_snapshot(conn) == before
        assert conn.execute("SELECT to_regclass(%s)", (VERSION_TABLE,)).fetchone()[0] is None


def test_schema_upgrades_apply_in_order(pg_external, monkeypatch):
    admin, password = pg_external["admin"], pg_external["password"]
    with psycopg.connect(**admin, password=password, autocommit=True) as conn:
        conn.execute("CREATE DATABASE upgrade_me")
    from kmds_desktop.literature.store.schema import UPGRADES

    with psycopg.connect(**{**admin, "dbname": "upgrade_me"}, password=password, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {VERSION_TABLE} (version integer PRIMARY KEY, description text NOT NULL, "
                     "applied_at timestamptz NOT NULL DEFAULT now())")
        for statement in UPGRADES[0][2]:
            conn.execute(statement)
        conn.execute(f"INSERT INTO {VERSION_TABLE} (version, description) VALUES (1, 'v1')")
    monkeypatch.setenv("KMDS_DESKTOP_DB_PASSWORD", password)
    port = pg_external["server"].tcp_port
    db = open_database(f"host=127.0.0.1 port={port} dbname=upgrade_me user=postgres")
    try:
        assert db.schema_version == LATEST_VERSION and db.schema_owner == "app"
    finally:
        db.close()
    with psycopg.connect(**{**admin, "dbname": "upgrade_me"}, password=password) as conn:
        versions = conn.execute(
            f"SELECT version FROM {VERSION_TABLE} ORDER BY applied_at, version").fetchall()
        assert [v[0] for v in versions] == list(range(1, LATEST_VERSION + 1))
        assert conn.execute("SELECT to_regclass('idx_document_publication_date')").fetchone()[0]
        storage = conn.execute("SELECT attstorage FROM pg_attribute WHERE attrelid = 'document'::regclass "
                               "AND attname = 'search_vector'").fetchone()[0]
        assert storage == "m"  # upgrade 3: the vector stays in the row, ranking needs no TOAST lookup


def _interpreter_for(user: str) -> str:
    """A Python with this project's packages that ``user`` may execute (the venv's may live under /root)."""
    candidates = [sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"]
    for candidate in candidates:
        probe = subprocess.run(["runuser", "-u", user, "--", candidate, "-c", "pass"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    raise AssertionError(f"no Python interpreter among {candidates} can be run by {user!r}")


def test_a_normal_user_runs_the_embedded_server_directly():
    """As root the suite covers the unprivileged-service-user path; this covers a normal user's run."""
    home = Path(tempfile.mkdtemp(prefix="kmds-user-test-"))
    code = textwrap.dedent(
        """
        import os, psutil
        from kmds_desktop.literature import open_database
        db = open_database()
        server_uid = psutil.Process(db.server.pid()).uids().real
        print(os.geteuid(), server_uid, db.server.pgdata.stat().st_uid, db.status()["schema_version"])
        """
    )
    site = next(p for p in sys.path if p.endswith("site-packages"))
    env = {**os.environ, "KMDS_DESKTOP_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": f"{REPO}{os.pathsep}{site}"}
    if os.geteuid() == 0:
        import pwd

        os.chown(home, pwd.getpwnam("nobody").pw_uid, -1)
        home.chmod(0o755)
        command = ["runuser", "-u", "nobody", "--", _interpreter_for("nobody"), "-c", code]
    else:
        command = [sys.executable, "-c", code]
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        user, server_uid, owner, version = (int(x) for x in done.stdout.split())
        assert user != 0 and server_uid == user == owner and version == LATEST_VERSION
        assert not EmbeddedServer(home / "postgres").is_running()  # stopped when the process exited
    finally:
        shutil.rmtree(home, ignore_errors=True)
