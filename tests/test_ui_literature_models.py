"""The literature item models: qtmodeltester, editing, ticks, and stale-result handling."""

from __future__ import annotations

from PySide6.QtCore import Qt

from kmds_desktop.ui.documents_model import DocumentsModel
from kmds_desktop.ui.review_model import CHECKING, INVALID, VALID, QueryRow, ReviewModel


def _review_model() -> ReviewModel:
    model = ReviewModel()
    model.add_row(QueryRow("cystic & fibrosis", model="m1", attempt=1, generation_time=1.25))
    model.add_row(QueryRow("", model="m2", attempt=1, included=False, error="model 'm2' not found"))
    model.add_row(QueryRow("lung <-> function", model="hand-written"))
    return model


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
    assert not model.set_validation(uid, rev, True, "'cystic' & 'fibrosis'", matches=5)
    assert model.row(0).validity == CHECKING
    assert model.set_validation(uid, model.row(0).revision, False, "syntax error in tsquery")
    assert model.row(0).validity == INVALID
    shown = model.data(model.index(0, ReviewModel.COL_VALID))
    assert "syntax error in tsquery" in shown

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
    assert model.set_validation(row.uid, row.revision, True, "'lung' <-> 'function'", 1234, exact=False)
    assert model.row(2).validity == VALID
    assert model.data(model.index(2, ReviewModel.COL_MATCHES)) == "~1,234"
    # Results for a removed row are dropped.
    model.remove_rows([2])
    assert not model.set_validation(row.uid, row.revision, True, "x", matches=1)


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
    assert model.data(model.index(0, DocumentsModel.COL_FOUND_BY)) == "q1, q2"
    assert model.data(model.index(1, DocumentsModel.COL_YEAR)) == "1999"
    assert model.data(model.index(0, 0), Qt.ItemDataRole.UserRole).pmid == "9"
    model.clear()
    qtmodeltester.check(model, force_py=True)
