"""The literature item models: qtmodeltester, editing, ticks, and stale-result handling."""

from __future__ import annotations

from PySide6.QtCore import Qt

from kmds_desktop.app.literature import CheckResult, LiteratureSession
from kmds_desktop.literature.queries.query_generation import QueryGenerationResult
from kmds_desktop.ui.literature.documents_model import DocumentsModel
from kmds_desktop.ui.literature.review_model import CHECKING, INVALID, VALID, ReviewModel


def _review_model() -> ReviewModel:
    """A generated row, an empty hand-written one (being written) and a hand-written query."""
    model = ReviewModel(LiteratureSession())
    model.begin_round("Does azithromycin help?", "2026-01-01T00:00:00+00:00")
    model.accept_attempt(QueryGenerationResult("builtin:keywords", "cystic & fibrosis", 1.25, 0.1, 1))
    model.add_hand_written("")
    model.add_hand_written("lung <-> function")
    return model


def _check(model: ReviewModel, uid: int, rev: int, ok: bool | None, message: str, matches: int | None = None,
           exact: bool = True) -> bool:
    return model.apply_check(CheckResult(uid, rev, ok, message, matches, exact))


def test_review_model_passes_qtmodeltester(qtmodeltester) -> None:
    model = _review_model()
    qtmodeltester.check(model, force_py=True)
    model.set_query(0, "cystic & (fibrosis | cf)")
    model.remove_rows([1])
    qtmodeltester.check(model, force_py=True)


def test_edit_tick_and_stale_validation(qtbot) -> None:
    model = _review_model()
    edited = []
    model.query_edited.connect(edited.append)
    uid = model.row(0).uid
    rev = model.row(0).revision
    assert model.setData(model.index(0, ReviewModel.COL_QUERY), "bad & (")
    assert edited == [uid] and model.row(0).validity == CHECKING
    # A result for the old text arrives late: ignored.
    assert not _check(model, uid, rev, True, "'cystic' & 'fibrosis'", matches=5)
    assert model.row(0).validity == CHECKING
    assert _check(model, uid, model.row(0).revision, False, "syntax error in tsquery")
    assert model.row(0).validity == INVALID
    assert model.data(model.index(0, ReviewModel.COL_VALID)) == "✗ invalid"
    assert model.data(model.index(0, ReviewModel.COL_ERROR)) == "syntax error in tsquery"
    # the edited row says so, with the model's own text
    assert model.data(model.index(0, ReviewModel.COL_MODEL)) == "builtin:keywords (edited)"
    tip = model.data(model.index(0, ReviewModel.COL_QUERY), Qt.ItemDataRole.ToolTipRole)
    assert "Edited from the model's: cystic & fibrosis" in tip

    # Ticks: unticking, tick all skips rows without a query, none clears.
    unchecked = Qt.CheckState.Unchecked.value
    model.setData(model.index(0, ReviewModel.COL_INCLUDE), unchecked, Qt.ItemDataRole.CheckStateRole)
    assert [r.model for r in model.included_rows()] == ["hand-written"]
    model.set_all_included(True)
    assert [r.included for r in model.rows()] == [True, False, True]
    model.set_all_included(False)
    assert model.included_rows() == []

    # Valid + count shows the count (estimates marked).
    row = model.row(2)
    assert _check(model, row.uid, row.revision, True, "'lung' <-> 'function'", 1234, exact=False)
    assert model.row(2).validity == VALID
    assert model.data(model.index(2, ReviewModel.COL_MATCHES)) == "~1,234"
    # Results for a removed row are dropped.
    model.remove_rows([2])
    assert not _check(model, row.uid, row.revision, True, "x", matches=1)


def test_documents_model(qtmodeltester) -> None:
    model = DocumentsModel()
    model.set_documents(
        [
            {"id": 1, "title": "B", "year": 2001, "publication": "J1", "source": "pubmed",
             "external_id": "9"},
            {"id": 2, "title": "A", "publication_date": "1999-01-01", "source": "scifact"},
        ],
        found_by={1: ["q1", "q2"], 2: ["q2"]},
    )
    qtmodeltester.check(model, force_py=True)
    assert model.rowCount() == 2
    assert [model.data(model.index(r, DocumentsModel.COL_RANK)) for r in (0, 1)] == ["1", "2"]
    assert model.data(model.index(0, DocumentsModel.COL_FOUND_BY)) == "q1; q2"
    assert model.data(model.index(1, DocumentsModel.COL_YEAR)) == "1999"
    assert model.data(model.index(0, 0), Qt.ItemDataRole.UserRole).pmid == "9"
    model.clear()
    qtmodeltester.check(model, force_py=True)
