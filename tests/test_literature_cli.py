"""``kmds-desktop literature status`` and ``literature import`` through the real entry point."""

from __future__ import annotations

import json

from kmds_desktop.cli import main
from kmds_desktop.literature.store.schema import LATEST_VERSION


def test_status_prints_server_schema_and_counts(pg_database, pg_dsn, capsys):
    assert main(["literature", "status", "--dsn", pg_dsn]) == 0
    out = capsys.readouterr().out
    assert f"schema:    version {LATEST_VERSION}" in out and "PostgreSQL 18" in out
    assert "SciFact" in out and "5183" in out
    assert main(["literature", "status", "--json", "--dsn", pg_dsn]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["sources"]["CF"] == 1239 and info["schema_version"] == LATEST_VERSION


def test_import_reports_counts_skips_and_failures(pg_empty_database, tmp_path, capsys):
    good = tmp_path / "a.jsonl"
    good.write_text('{"id": "c:1", "source": "cli", "title": "Heart failure"}\n{broken\n')
    dsn = pg_empty_database.dsn
    assert main(["literature", "import", "--quiet", str(good), "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert "1 record, 1 new" in out and "skipped line 2: not valid JSON" in out
    assert "1 document has no vector yet" in out and "literature embed" in out
    assert main(["literature", "import", "-q", "--embed", str(good), "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert "0 new, 0 updated, 1 unchanged" in out and "embedded 1 document in" in out
    assert "no vector yet" not in out
    assert main(["literature", "import", "-q", str(tmp_path / "nope.jsonl"), "--dsn", dsn]) == 1
    assert "nope.jsonl" in capsys.readouterr().err
    assert pg_empty_database.status()["documents"] == 1
