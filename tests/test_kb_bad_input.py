"""Bad files never crash the loader: each gets a KnowledgeBaseError naming the file and the problem,
nothing is written, and nothing outside the file is fetched or expanded."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest

from kmds_desktop.kb import KnowledgeBaseError, load_kb

RDF_OPEN = (
    '<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
    'xmlns:owl="http://www.w3.org/2002/07/owl#" xmlns="http://test.org/kmds/kmds.owl#" '
    'xml:base="http://test.org/kmds/kmds.owl">\n'
)
GOOD_BODY = (
    '<owl:NamedIndividual rdf:about="#wf"><rdf:type rdf:resource="#KnowledgeApplicationWorkflow"/>'
    '<has_exploratory_observations rdf:resource="#exploratoryobservation1"/></owl:NamedIndividual>\n'
    '<owl:NamedIndividual rdf:about="#exploratoryobservation1">'
    '<rdf:type rdf:resource="#ExploratoryObservation"/>'
    "<finding>caf\u00e9 prices are skewed</finding></owl:NamedIndividual>\n"
)


def _write(folder: Path, name: str, data: bytes | str) -> Path:
    path = folder / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def _refused(path: Path, *fragments: str) -> KnowledgeBaseError:
    before = sorted(p.name for p in path.parent.iterdir()) if path.parent.is_dir() else []
    with pytest.raises(KnowledgeBaseError) as info:
        load_kb(path)
    err = info.value
    assert str(path) in str(err), "the message must name the file"
    for fragment in fragments:
        assert fragment.lower() in str(err).lower()
    after = sorted(p.name for p in path.parent.iterdir()) if path.parent.is_dir() else []
    assert before == after, "loading must never write anything"
    return err


def test_a_minimal_hand_written_kb_loads(tmp_path: Path) -> None:
    kb = load_kb(_write(tmp_path, "ok.xml", RDF_OPEN + GOOD_BODY + "</rdf:RDF>\n"))
    (obs,) = kb.observations
    assert obs.finding == "caf\u00e9 prices are skewed"
    assert obs.workflows == ["wf"] and obs.finding_seq is None and obs.obs_type == ""


def test_missing_file(tmp_path: Path) -> None:
    _refused(tmp_path / "nope.xml", "not found")


def test_directory(tmp_path: Path) -> None:
    folder = tmp_path / "a_folder.xml"
    folder.mkdir()
    _refused(folder, "folder")


def test_empty_file(tmp_path: Path) -> None:
    _refused(_write(tmp_path, "empty.xml", b""), "empty")
    _refused(_write(tmp_path, "blank.xml", b"  \n\n"), "empty")


def test_not_xml(tmp_path: Path) -> None:
    _refused(_write(tmp_path, "notes.xml", "workflow,finding\nwf1,skewed\n"), "not an XML file")


def test_truncated_xml(tmp_path: Path, kmds_data: Path) -> None:
    data = (kmds_data / "test_kb_exp_workflow.xml").read_bytes()
    _refused(_write(tmp_path, "cut.xml", data[: len(data) // 2]), "truncated")


def test_xml_that_is_not_rdf(tmp_path: Path) -> None:
    _refused(_write(tmp_path, "page.xml", "<html><body><p>hello</p></body></html>"), "not RDF/XML", "html")


def test_rdf_without_kmds_classes(tmp_path: Path) -> None:
    foaf = (
        '<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
        'xmlns:foaf="http://xmlns.com/foaf/0.1/"><foaf:Person rdf:about="http://example.org/alice">'
        "<foaf:name>Alice</foaf:name></foaf:Person></rdf:RDF>"
    )
    _refused(_write(tmp_path, "foaf.rdf", foaf), "no KMDS classes")


def test_invalid_utf8(tmp_path: Path) -> None:
    data = (RDF_OPEN + GOOD_BODY + "</rdf:RDF>\n").encode("utf-8").replace("caf\u00e9".encode(), b"caf\xe9")
    _refused(_write(tmp_path, "latin1.xml", data), "not valid UTF-8")


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # http.server API
        _Recorder.hits.append(self.path)
        body = b'<!ENTITY leak "LEAKED">'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def recorder():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.hits = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_external_entity_is_refused_without_fetching(tmp_path: Path, recorder: str) -> None:
    secret = _write(tmp_path, "secret.txt", "TOP SECRET")
    for name, decl in {
        "xxe_file.xml": f'<!ENTITY x SYSTEM "file://{secret}">',
        "xxe_http.xml": f'<!ENTITY x SYSTEM "{recorder}/x">',
        "xxe_param.xml": f'<!ENTITY % p SYSTEM "{recorder}/p"> %p;',
    }.items():
        doc = f'<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [{decl}]>\n' + RDF_OPEN.split("\n", 1)[1]
        doc += GOOD_BODY.replace("skewed", "&x;" if "%" not in decl else "skewed") + "</rdf:RDF>\n"
        _refused(_write(tmp_path, name, doc), "refused", "entity")
    assert _Recorder.hits == []


def test_external_dtd_is_refused_without_fetching(tmp_path: Path, recorder: str) -> None:
    doc = (
        f'<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF SYSTEM "{recorder}/kmds.dtd">\n'
        + RDF_OPEN.split("\n", 1)[1]
    )
    _refused(_write(tmp_path, "dtd.xml", doc + GOOD_BODY + "</rdf:RDF>\n"), "refused", "external")
    assert _Recorder.hits == []


def test_entity_expansion_bomb_is_refused_before_expanding(tmp_path: Path) -> None:
    levels = ['<!ENTITY lol0 "lollollollollollollollollollol">']
    levels += [f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(1, 10)]
    doc = (
        '<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF ['
        + "".join(levels)
        + "]>\n"
        + RDF_OPEN.split("\n", 1)[1]
        + GOOD_BODY.replace("skewed", "&lol9;")
        + "</rdf:RDF>\n"
    )
    import time

    start = time.perf_counter()
    _refused(_write(tmp_path, "bomb.xml", doc), "refused", "entity")
    assert time.perf_counter() - start < 2.0  # 10^9 expansions would take minutes and gigabytes


def test_internal_entity_without_expansion_is_still_refused(tmp_path: Path) -> None:
    # Even a harmless-looking declaration is refused: KMDS never writes one.
    doc = '<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [<!ENTITY kmds "http://test.org/kmds/kmds.owl#">]>\n'
    doc += RDF_OPEN.split("\n", 1)[1] + GOOD_BODY + "</rdf:RDF>\n"
    _refused(_write(tmp_path, "ent.xml", doc), "entity")


def test_bad_literal_gives_one_message_and_no_stray_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """owlready2 hands parse errors to sys.excepthook before raising: the app's hook (which shows an
    "unexpected error") must not see it, and nothing is printed; the one error names line and cause."""
    import sys

    seen: list[BaseException] = []
    monkeypatch.setattr(sys, "excepthook", lambda t, v, tb: seen.append(v))
    hook = sys.excepthook
    body = GOOD_BODY.replace(
        "<finding>",
        '<finding_sequence rdf:datatype="http://www.w3.org/2001/XMLSchema#integer">abc</finding_sequence>'
        "<finding>",
    )
    err = _refused(_write(tmp_path, "badint.xml", RDF_OPEN + body + "</rdf:RDF>\n"), "not valid RDF/XML")
    assert "line 4, column" in str(err) and "'abc'" in str(err)
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert seen == [] and sys.excepthook is hook


def test_big_file_is_parsed_in_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """owlready2 forks a parser process for files of 8 MB or more; in the app (Qt, torch, worker
    threads) a fork can deadlock, so a big KB must be parsed without one."""
    import multiprocessing

    def no_fork(self, *args, **kwargs):
        raise AssertionError("a parser process was started")

    monkeypatch.setattr(multiprocessing.Process, "start", no_fork)
    big_text = "skewed " * 1_300_000  # about 9 MB in one finding
    path = _write(tmp_path, "big.xml", RDF_OPEN + GOOD_BODY.replace("skewed", big_text) + "</rdf:RDF>\n")
    assert path.stat().st_size > 8_000_000
    (obs,) = load_kb(path).observations
    assert len(obs.finding) == len("caf\u00e9 prices are ") + len(big_text)
