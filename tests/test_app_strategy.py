"""The history window's action rule (:func:`kmds_desktop.app.strategy.set_actions`), without Qt."""

from __future__ import annotations

import pytest

from kmds_desktop.app.presentation import SavedSet
from kmds_desktop.app.strategy import SetActions, set_actions


def _set(kind: str = "search", status: str = "complete") -> SavedSet:
    return SavedSet(number=1, name="", kind=kind, status=status, question="q", expression=None,
                    database="db", started_at="2024-01-01T00:00:00", finished_at=None, pid=None,
                    host=None, document_count=3, details={})


def test_no_set_allows_nothing():
    assert set_actions(None) == SetActions()
    assert not any(vars(set_actions(None)).values())


@pytest.mark.parametrize("kind", ["search", "rerun"])
def test_a_complete_search_allows_everything(kind):
    allowed = set_actions(_set(kind))
    assert all(vars(allowed).values())


def test_a_combination_is_never_rerun_but_is_checked_reported_and_exported():
    allowed = set_actions(_set("combination"))
    assert not allowed.rerun
    assert allowed.rename and allowed.delete
    assert allowed.check and allowed.overlap and allowed.report and allowed.export_documents


@pytest.mark.parametrize("kind", ["search", "rerun", "combination"])
def test_an_incomplete_set_is_only_renamed_or_deleted(kind):
    allowed = set_actions(_set(kind, status="running"))
    assert allowed.rename and allowed.delete
    assert not (allowed.rerun or allowed.check or allowed.overlap or allowed.report
                or allowed.export_documents)
