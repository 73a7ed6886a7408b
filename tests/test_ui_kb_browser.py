"""The KB browser panel on real KMDS files: tree with counts, filter, details, edit dialogs."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox, QMessageBox

from kmds_desktop.kb import load_kb
from kmds_desktop.ui.kb.browser import KBBrowser
from kmds_desktop.ui.kb.observation_editor import ObservationDialog
from kmds_desktop.ui.kb.tree_model import UNLINKED_LABEL, KBTreeModel, KindRole


@pytest.fixture(scope="module")
def analytics_kb_path(kmds_data):
    return kmds_data / "example_analytics_kb_app_workflow.xml"


@pytest.fixture()
def browser(qtbot, analytics_kb_path):
    widget = KBBrowser()
    qtbot.addWidget(widget)
    widget.set_kb(load_kb(analytics_kb_path))
    widget.resize(500, 700)
    widget.show()
    return widget


def _top_labels(model: KBTreeModel) -> list[str]:
    return [model.index(r, 0).data() for r in range(model.rowCount())]


def test_tree_counts_and_unlinked_node(browser):
    labels = _top_labels(browser.model)
    assert labels == ["ITSM modelling (8)", f"{UNLINKED_LABEL} (2)"]
    unlinked = browser.model.index(1, 0)
    cat = browser.model.index(0, 0, unlinked)
    assert cat.data() == "Model selection (2)"
    assert cat.data(KindRole) == "category"
    assert browser.model.index(0, 0, cat).data(KindRole) == "observation"


def test_tree_model_passes_qtmodeltester(qtmodeltester, kmds_data):
    model = KBTreeModel()
    model.set_kb(load_kb(kmds_data / "test_kb_exp_workflow.xml"))
    qtmodeltester.check(model, force_py=True)
    model.set_filter("model")
    qtmodeltester.check(model, force_py=True)


def test_filter_is_debounced_and_matches_finding_type_intent(qtbot, browser):
    model = browser.model
    qtbot.keyClicks(browser.filter_edit, "TIMESTAMPS")
    assert model.filter_text == ""  # not yet: debounced
    qtbot.waitUntil(lambda: model.filter_text == "TIMESTAMPS", timeout=2000)
    found = _observation_nodes(model)  # case-insensitive match on the finding
    assert found and all("timestamps" in n.obs.finding.lower() for n in found)
    assert _top_labels(model) == [f"ITSM modelling ({len(found)})"]
    browser.set_filter_now("feature_assessment")  # matches the intent
    assert {n.obs.intent for n in _observation_nodes(model)} == {"FEATURE_ASSESSMENT"}
    browser.set_filter_now("Data Quality")  # matches the type
    assert {n.obs.obs_type for n in _observation_nodes(model)} == {"Data Quality Observation"}
    assert model.visible_observation_count() == 2
    browser.set_filter_now("no such words anywhere")
    assert model.rowCount() == 0


def _observation_nodes(model):
    return [n for n in model._walk(model._root) if n.kind == "observation"]


def test_select_shows_details(qtbot, browser):
    obs = browser.kb.observations[0]
    with qtbot.waitSignal(browser.observation_selected) as sig:
        assert browser.select_observation(obs.iri)
    assert sig.args == [obs.iri]
    text = browser.details.toPlainText()
    assert obs.obs_type in text and obs.name in text and "DATA_UNDERSTANDING" in text


def test_select_clears_a_filter_that_hides_the_observation(browser):
    browser.set_filter_now("Data Quality")
    target = next(o for o in browser.kb.observations if o.category == "model_selection")
    assert browser.select_observation(target.iri)
    assert browser.filter_edit.text() == "" and browser.current_iri() == target.iri


def test_add_edit_delete_through_dialogs(qtbot, browser):
    kb = browser.kb
    before = len(kb.observations)
    edits = []
    browser.kb_edited.connect(edits.append)

    browser.add_observation()
    dialog = browser.active_dialog
    assert isinstance(dialog, ObservationDialog)
    dialog.category.setCurrentIndex(dialog.category.findData("modelling_choice"))
    dialog.obs_type.setCurrentText("Modelling Assumption Observation")
    dialog.finding.setPlainText("Residuals look **normal** after the log transform")
    dialog.intent.setCurrentText("MODEL_EXPLANATION")
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert len(kb.observations) == before + 1 and kb.dirty
    new_iri = browser.current_iri()
    new = kb.observation(new_iri)
    assert new.finding.startswith("Residuals") and new.workflows == ["ITSM modelling"]
    assert "normal" in browser.details.toPlainText()

    browser.edit_observation()
    dialog = browser.active_dialog
    assert dialog.finding.toPlainText().startswith("Residuals")
    dialog.finding.setPlainText("")  # invalid: shown inline, dialog stays open, nothing changes
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert dialog.error.isVisible() and "empty" in dialog.error.text()
    assert kb.observation(new_iri).finding.startswith("Residuals")
    dialog.finding.setPlainText("Residuals are skewed")
    dialog.sequence.setValue(42)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert kb.observation(new_iri).finding == "Residuals are skewed"
    assert kb.observation(new_iri).finding_seq == 42

    browser.delete_observation()
    box = browser.active_dialog
    assert isinstance(box, QMessageBox)
    box.button(QMessageBox.StandardButton.Yes).click()
    assert kb.observation(new_iri) is None and len(kb.observations) == before
    assert len(edits) == 3


def test_workflow_description_edit(browser):
    wf_index = browser.model.index_for_workflow("ITSM modelling")
    browser.tree.setCurrentIndex(wf_index)
    assert "KnowledgeApplicationWorkflow" in browser.details.toPlainText()
    browser.edit_selected()
    dialog = browser.active_dialog
    dialog.description.setPlainText("Incident tickets: time-to-close modelling")
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert browser.kb.workflow("ITSM modelling").description == "Incident tickets: time-to-close modelling"
    assert browser.tree.isExpanded(browser.model.index_for_workflow("ITSM modelling"))


def test_double_click_opens_editor(qtbot, browser):
    obs = browser.kb.observations[0]
    browser.select_observation(obs.iri)
    index = browser.tree.currentIndex()
    rect = browser.tree.visualRect(index)
    qtbot.mousePress(browser.tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(browser.tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert isinstance(browser.active_dialog, ObservationDialog)
    browser.active_dialog.reject()


def test_journey_filter_the_tree_with_a_record_selected(qtbot, browser):
    """Click a record, then type filters: one that keeps it (still selected, details shown) and one
    that hides it (its details go: they would describe a record the tree no longer shows)."""
    target = next(o for o in browser.kb.observations if o.obs_type == "Data Quality Observation")
    index = browser.model.index_for_iri(target.iri)
    browser.tree.scrollTo(index)
    with qtbot.waitSignal(browser.observation_selected) as picked:
        qtbot.mouseClick(browser.tree.viewport(), Qt.MouseButton.LeftButton,
                         pos=browser.tree.visualRect(index).center())
    assert picked.args == [target.iri]
    assert target.name in browser.details.toPlainText()

    qtbot.mouseClick(browser.filter_edit, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(browser.filter_edit, "Data Quality")
    qtbot.waitUntil(lambda: browser.model.filter_text == "Data Quality", timeout=2000)
    assert browser.current_iri() == target.iri and target.name in browser.details.toPlainText()

    browser.filter_edit.selectAll()
    with qtbot.waitSignal(browser.observation_selected, timeout=2000) as hidden:
        qtbot.keyClicks(browser.filter_edit, "no such words anywhere")
    assert hidden.args == [""]
    assert browser.model.filter_text == "no such words anywhere" and browser.model.rowCount() == 0
    assert browser.current_iri() == "" and browser.details.toPlainText() == ""
    assert not browser.edit_button.isEnabled()


def test_a_category_of_one_says_one_observation(qtbot, browser):
    """Clicking a category node with one record reads "1 observation", never "1 observations";
    the workflow node counts its records in the same words."""
    tree = browser.tree
    workflow = browser.model.index(0, 0)
    tree.expand(workflow)
    single = next(browser.model.index(r, 0, workflow) for r in range(browser.model.rowCount(workflow))
                  if browser.model.index(r, 0, workflow).data() == "Data representation (1)")
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=tree.visualRect(single).center())
    assert tree.currentIndex() == single
    text = browser.details.toPlainText()
    assert "1 observation" in text and "1 observations" not in text, text
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=tree.visualRect(workflow).center())
    assert "8 observations" in browser.details.toPlainText()
