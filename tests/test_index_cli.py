"""``kmds-desktop index KB_FILE [--query TEXT] [--json] [--rebuild]`` end to end (real model, real store)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kmds_desktop.cli import main
from kmds_desktop.index import DEFAULT_MODEL, embeddings, store


@pytest.fixture(scope="session")
def embedding_model():
    return embeddings.get_model(DEFAULT_MODEL)


def run_cli(*argv: str) -> int:
    """The real entry point, as ``kmds-desktop index ...`` runs it."""
    return main(["index", *argv])


def test_build_then_query(
    kmds_data: Path, data_home: Path, embedding_model, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = str(kmds_data / "test_kb_exp_workflow.xml")
    assert run_cli(kb) == 0
    captured = capsys.readouterr()
    assert "30 embedded" in captured.out
    assert "30/30" in captured.err  # the progress bar
    assert (data_home / "index" / "chroma.sqlite3").exists()  # default: DATA_DIR/index

    assert run_cli(kb, "--query", "feature engineering", "--json", "-n", "4") == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 4 and all({"finding", "distance", "iri", "finding_seq"} <= set(h) for h in hits)

    assert run_cli(kb, "--query", "feature engineering", "--category", "exploratory", "--quiet") == 0
    out = capsys.readouterr().out
    assert out.startswith("1. [") and "exploratory /" in out and "data_representation" not in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--query", "   "), "question is empty"),
        (("-n", "0", "--query", "x"), "-n must be at least 1"),
    ],
)
def test_bad_arguments_exit_1_with_one_line(
    argv: tuple[str, ...], needle: str, kmds_data: Path, data_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(str(kmds_data / "generated_by_kmds" / "cli_kb.xml"), *argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and needle in err and len(err.splitlines()) == 1


def test_missing_kb_and_bad_folder(
    kmds_data: Path, tmp_path: Path, data_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(str(tmp_path / "nope.xml"), "--quiet") == 1
    assert "nope.xml does not exist" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    kb = kmds_data / "generated_by_kmds" / "cli_kb.xml"
    assert run_cli(str(kb), "--persist-dir", str(blocker / "idx"), "--quiet") == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot use index folder") and len(err.splitlines()) == 1


def test_rebuild_moves_a_damaged_store_aside(
    kmds_data: Path, tmp_path: Path, data_home: Path, embedding_model, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = str(kmds_data / "generated_by_kmds" / "cli_kb.xml")
    persist = tmp_path / "idx"
    assert run_cli(kb, "--persist-dir", str(persist), "--quiet") == 0
    store.close_local(persist)
    (persist / "chroma.sqlite3").write_bytes(b"\0garbage" * 100)
    capsys.readouterr()

    assert run_cli(kb, "--persist-dir", str(persist), "--quiet") == 1
    err = capsys.readouterr().err.strip()
    assert "damaged" in err and "--rebuild" in err and len(err.splitlines()) == 1

    assert run_cli(kb, "--persist-dir", str(persist), "--rebuild", "--quiet", "--query", "observation") == 0
    captured = capsys.readouterr()
    assert "moved to" in captured.err and captured.out.startswith("1. [")
    assert list(tmp_path.glob("idx.broken-*"))


def test_unknown_category_is_refused_with_the_choices(
    kmds_data: Path, data_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt category must not quietly print "no results": argparse names the valid ones."""
    kb = str(kmds_data / "generated_by_kmds" / "cli_kb.xml")
    with pytest.raises(SystemExit) as info:
        run_cli(kb, "--query", "x", "--category", "modeling_choice")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'modeling_choice'" in err
    for valid in ("exploratory", "modelling_choice", "model_selection", "workflow"):
        assert valid in err
    assert not (data_home / "index").exists()  # refused before anything was built


def test_rebuilding_a_kb_read_from_a_url_replaces_its_entries(tmp_path: Path, kmds_data: Path) -> None:
    """A KB given as a URL is filed under the URL's identity; --rebuild cleared the identity of the
    temporary file it was fetched into (a new one each time), so the URL's entries stayed and every
    rebuild added an orphan collection."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from kmds_desktop.index import kb_source
    from kmds_desktop.index.factory import open_index, rebuild_index

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(kmds_data)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/test_kb_exp_workflow.xml"
    folder = tmp_path / "index"
    try:
        first, _ = rebuild_index(url, persist_dir=folder)
        second, _ = rebuild_index(url, persist_dir=folder)
        index = open_index(None, persist_dir=folder)
        assert index.kb_ids() == [kb_source.kb_id_for_url(url)]
        assert index.count(kb_source.kb_id_for_url(url)) == first.total == second.total > 0
    finally:
        server.shutdown()
        server.server_close()
