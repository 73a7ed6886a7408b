"""Server mode: build and search against a real Chroma server (``chroma run`` on 127.0.0.1)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from support.chroma import ChromaServer, chroma_server  # noqa: F401 - fixture

from kmds_desktop.config import Settings, save_settings
from kmds_desktop.index import DEFAULT_MODEL, SemanticIndex, embeddings
from kmds_desktop.index.cli import register
from kmds_desktop.index.factory import open_index


@pytest.fixture(scope="session")
def embedding_model():
    return embeddings.get_model(DEFAULT_MODEL)


def test_build_and_search_on_a_chroma_server(
    chroma_server: ChromaServer, kmds_data: Path, embedding_model  # noqa: F811
) -> None:
    index = SemanticIndex(chroma_host=chroma_server.host, chroma_port=chroma_server.port)
    report = index.build(kmds_data / "test_kb_exp_workflow.xml")
    assert report.embedded == 30 and index.count() == 30
    hits = index.search("feature engineering", n_results=3, category="data_representation")
    assert len(hits) == 3 and all(h["category"] == "data_representation" for h in hits)
    assert [h["distance"] for h in hits] == sorted(h["distance"] for h in hits)

    # A second client sees the same entries and an unchanged KB embeds nothing.
    other = SemanticIndex(chroma_host=chroma_server.host, chroma_port=chroma_server.port)
    assert other.build(kmds_data / "test_kb_exp_workflow.xml").embedded == 0
    assert other.search("feature engineering", n_results=3, category="data_representation") == hits


def test_settings_server_mode_is_honoured(
    chroma_server: ChromaServer,  # noqa: F811
    kmds_data: Path,
    data_home: Path,
    embedding_model,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = Settings()
    settings.index.mode = "server"
    settings.index.chroma_host = chroma_server.host
    settings.index.chroma_port = chroma_server.port
    save_settings(settings)

    assert open_index().location == chroma_server.url
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["index", str(kmds_data / "example_ml_kb_exp_workflow.xml"), "--quiet"])
    assert args.func(args) == 0
    assert "9 entries" in capsys.readouterr().out
    # The server holds the KB; the local index folder was never created.
    assert open_index().count(kb_id="*") >= 9
    assert not (data_home / "index").exists()
