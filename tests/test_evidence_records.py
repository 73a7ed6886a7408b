"""Imported PDFs matched to literature records (DOI, then title) in a real PostgreSQL database, and the
user's correction "this PDF is record X" kept across match runs, re-imports and the file's removal and
return; through the CLI, which runs the same session code as the window."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support.fulltext import link_pdfs, litqa_dir

from kmds_desktop.app.evidence import EvidenceSession
from kmds_desktop.cli import main
from kmds_desktop.literature.store.identities import find_known

BPJ = "j.bpj.2021.11.1119.pdf"
PNAS = "pnas.0403760101.pdf"


def _cli_json(capsys, *argv: str) -> dict:
    assert main(["literature", "fulltext", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _by_file(report: dict) -> dict[str, dict]:
    return {Path(p["file"]).name: p for p in report["papers"]}


def test_pdfs_match_records_and_a_correction_by_hand_persists(tmp_path: Path, data_home: Path,
                                                              pg_empty_database, capsys) -> None:
    folder = link_pdfs([BPJ, PNAS], tmp_path / "pdfs")
    with EvidenceSession() as session:
        session.import_folder(folder)
        pnas_title = session.find_paper(PNAS).title
        pnas_doi = session.find_paper(PNAS).doi
    assert pnas_title and len(pnas_title.split()) >= 4 and pnas_doi
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(json.dumps(r) for r in [
        {"pmid": "111", "title": "A record whose DOI is the biophysics paper's", "abstract": "x",
         "doi": "10.1016/J.BPJ.2021.11.1119"},  # DOIs compare case-insensitively
        {"pmid": "222", "title": pnas_title, "abstract": "the PNAS paper, known by its title only"},
        {"pmid": "333", "title": "Clonal growth of crustose lichens", "abstract": "another paper"},
    ]) + "\n", encoding="utf-8")
    db = pg_empty_database
    db.import_files([records])
    ids = {d.pmid: d.doc_id for d in find_known(db, pmids=["111", "222", "333"])}
    dsn = str(db.dsn)

    first = _by_file(_cli_json(capsys, "match", "--dsn", dsn))
    assert (first[BPJ]["record_id"], first[BPJ]["match"]) == (ids["111"], "doi")
    assert (first[PNAS]["record_id"], first[PNAS]["match"]) == (ids["222"], "title")

    # The user says the PNAS PDF is record 333: kept by the next match run.
    fixed = _cli_json(capsys, "record", PNAS, str(ids["333"]), "--dsn", dsn)
    assert (fixed["record_id"], fixed["match"], fixed["record"]) == (ids["333"], "manual", "PMID 333")
    again = _by_file(_cli_json(capsys, "match", "--dsn", dsn))
    assert (again[PNAS]["record_id"], again[PNAS]["match"]) == (ids["333"], "manual")
    assert again[BPJ]["match"] == "doi"

    # An id that is no record is refused in one line, and the correction stays.
    assert main(["literature", "fulltext", "record", PNAS, "987654", "--dsn", dsn]) == 1
    assert "no literature record with id 987654" in capsys.readouterr().err
    assert main(["literature", "fulltext", "record", "nothing-like-it.pdf", "--none"]) == 1
    assert "names no imported papers" in capsys.readouterr().err

    # The file deleted (its paper leaves the store) and brought back: the correction comes back too.
    shutil.move(folder / PNAS, tmp_path / PNAS)
    with EvidenceSession() as session:
        assert [Path(p).name for p in session.import_folder(folder).removed] == [PNAS]
        shutil.move(tmp_path / PNAS, folder / PNAS)
        assert session.import_folder(folder).count("imported") == 1
        back = session.find_paper(PNAS)
    assert (back.record_id, back.record_match) == (ids["333"], "manual")
    status = {Path(p["file"]).name: p for p in _cli_json(capsys, "status")["papers"]}
    assert (status[PNAS]["record_id"], status[PNAS]["record_match"]) == (ids["333"], "manual")

    # "None of the records" is a correction too; --clear gives the paper back to the matcher.
    assert _cli_json(capsys, "record", pnas_doi, "--none")["record_id"] is None
    assert _by_file(_cli_json(capsys, "match", "--dsn", dsn))[PNAS]["record_id"] is None
    _cli_json(capsys, "record", PNAS, "--clear")
    cleared = _by_file(_cli_json(capsys, "match", "--dsn", dsn))
    assert (cleared[PNAS]["record_id"], cleared[PNAS]["match"]) == (ids["222"], "title")
    assert (litqa_dir() / "pdfs" / PNAS).is_file()

    # A multiple-choice question's options are searched with it: the passage that names one comes first.
    question = "How many Gly-X-Y repeats are in the collagenous domain of mCTRP1?"
    assert main(["literature", "evidence", question, "--option", "14", "--option", "34", "--option", "23",
                 "--top", "3", "--json"]) == 0
    passages = json.loads(capsys.readouterr().out)["passages"]
    assert Path(passages[0]["file"]).name == PNAS
    assert "14, 34, 23, 23, 14, and 34 Gly-X-Y" in passages[0]["text"] and passages[0]["start_page"] <= 3
