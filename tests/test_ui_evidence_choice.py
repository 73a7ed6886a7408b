"""Multiple choice in the Evidence view, real widgets over the real store of three shared PDFs (the
fixtures of tests/test_ui_evidence.py): a question and options typed, Choose clicked, the option the
papers bear out shown with its quote, which is on the cited page; the quote's paper and page clicked
and that page drawn; "insufficient" when the papers do not single one out; bad option lists refused
with what to fix and nothing run."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_ui_evidence
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor

from kmds_desktop.app.verdicts import MAX_OPTION_CHARS, MAX_OPTIONS, Judge, options_from_lines
from kmds_desktop.literature.evidence.quotes import verify_quote
from kmds_desktop.literature.evidence.verdict import ChoiceVerdict
from kmds_desktop.literature.fulltext.store import FulltextStore
from kmds_desktop.ui.evidence import EvidenceView

QUESTION = "How many Gly-X-Y repeats are in the collagenous domain of mCTRP1?"
OPTIONS = ["14", "2", "15"]
PNAS_DOI = "10.1073/pnas.0403760101"

#: The store of three shared PDFs and the view over it, as the Evidence view's own tests build them.
store_path = test_ui_evidence.store_path
view = test_ui_evidence.view
kb_copy = test_ui_evidence.kb_copy


def _choose(qtbot, view: EvidenceView, question: str, options: list[str]) -> None:
    view.judge_factory = lambda: Judge(None, "offline")
    qtbot.keyClicks(view.questions.line, question)
    view.choice.options.setPlainText("\n".join(options))
    qtbot.mouseClick(view.choice.choose_button, Qt.MouseButton.LeftButton)
    assert not view.choice.choose_button.isEnabled()  # busy while the job runs
    qtbot.waitUntil(lambda: view.choice.choice is not None, timeout=60_000)
    qtbot.waitUntil(lambda: not view.jobs.is_busy(), timeout=30_000)


def test_the_chosen_options_quote_is_on_its_page_and_opens_there(
        qtbot, view: EvidenceView, store_path: Path) -> None:
    _choose(qtbot, view, QUESTION, OPTIONS)
    result, paper_id = view.choice.choice, view.choice.paper_id
    assert result.answer == "14" and result.method == "offline"
    assert result.label == PNAS_DOI and result.pages == (3,) and paper_id is not None
    with FulltextStore(store_path) as store:
        assert store.paper(paper_id).doi == PNAS_DOI
        assert verify_quote(result.quote, lambda n: store.page_text(paper_id, n), 3).verified
    shown = view.choice.browser.toPlainText()
    assert shown.startswith("14 (judge: offline)") and f"{PNAS_DOI}, page 3: \u201cThere are" in shown
    assert "mCTRP1" in shown and view.choice.choose_button.isEnabled()
    browser = view.choice.browser
    found = browser.document().find(f"{PNAS_DOI}, page 3")
    assert not found.isNull()
    cursor = QTextCursor(browser.document())
    cursor.setPosition(found.selectionStart() + 2)
    with qtbot.waitSignal(view.page_shown, timeout=30_000) as drawn:
        qtbot.mouseClick(browser.viewport(), Qt.MouseButton.LeftButton,
                         pos=browser.cursorRect(cursor).center())
    page = drawn.args[0]
    assert page.paper_id == paper_id and page.page_no == 3 == view.page.page_no
    assert view.page.highlight_rects  # the quote is marked on the page
    assert view.record.label.text() and "click its paper and page" in view.status.text()


def test_papers_that_do_not_single_out_an_option_give_insufficient(qtbot, view: EvidenceView) -> None:
    """14 and 34 are both in the sentence that counts the repeats of every paralog: no clear winner."""
    _choose(qtbot, view, "How many Gly-X-Y repeats are in the collagenous domain of the adiponectin paralog "
                         "encoded by C1QTNF1 in mice?", ["14", "2", "4", "15", "24", "34"])
    result = view.choice.choice
    assert result.choice is None and result.quote is None and view.choice.paper_id is None
    shown = view.choice.browser.toPlainText()
    assert shown.startswith("insufficient: the papers do not decide")
    assert "no option stands out" in shown  # the note says why
    assert "do not decide it" in view.status.text()


@pytest.mark.parametrize(("options", "expected"), [
    ("14", "at least two options"),
    ("\n14\n\n   \n", "at least two options"),
    ("\n".join(str(n) for n in range(MAX_OPTIONS + 1)), f"keep at most {MAX_OPTIONS}"),
    ("14\n" + "x" * (MAX_OPTION_CHARS + 1), "option 2 has"),
    ("14\n15\n14", "listed twice"),
])
def test_a_bad_option_list_is_refused_and_runs_nothing(qtbot, view: EvidenceView, options: str,
                                                       expected: str) -> None:
    qtbot.keyClicks(view.questions.line, QUESTION)
    view.choice.options.setPlainText(options)
    with qtbot.waitSignal(view.message) as said:
        qtbot.mouseClick(view.choice.choose_button, Qt.MouseButton.LeftButton)
    assert said.args[0] == "warning" and expected in said.args[1] and "\n" not in said.args[1]
    assert not view.jobs.is_busy() and view.choice.choice is None
    assert view.choice.options.toPlainText() == options  # what was typed is kept to fix


def test_choose_without_a_question_says_what_to_do(qtbot, view: EvidenceView) -> None:
    view.choice.options.setPlainText("14\n15")
    with qtbot.waitSignal(view.message) as said:
        qtbot.mouseClick(view.choice.choose_button, Qt.MouseButton.LeftButton)
    assert said.args[0] == "warning" and "Type the question" in said.args[1]
    assert not view.jobs.is_busy() and view.choice.choice is None


def test_options_are_read_one_a_line() -> None:
    assert options_from_lines("  Above 40%\n\nAbove  20% \n") == ["Above 40%", "Above 20%"]
    assert len(options_from_lines("\n".join(f"option {n}" for n in range(MAX_OPTIONS)))) == MAX_OPTIONS
    with pytest.raises(ValueError, match="listed twice"):
        options_from_lines("Above 40%\nabove 40%")


def test_a_models_pick_its_sentence_does_not_bear_out_follows_the_sentence(qtbot, view: EvidenceView) -> None:
    """The judge is a model (scripted: it cites the sentence that counts the repeats but names "15"):
    the pane names the model as the judge and says, in a note, that the answer follows the sentence."""
    prompts: list[str] = []

    def model(prompt: str) -> str:
        prompts.append(prompt)
        number = next(line.split("]")[0].lstrip("[") for line in prompt.splitlines()
                      if line.startswith("[") and "14, 34, 23" in line)
        return f'{{"sentence": {number}, "answer": "15"}}'

    qtbot.keyClicks(view.questions.line, QUESTION)
    view.judge_factory = lambda: Judge(model, "scripted model")
    view.choice.options.setPlainText("\n".join(OPTIONS))
    qtbot.mouseClick(view.choice.choose_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.choice.choice is not None, timeout=60_000)
    result = view.choice.choice
    assert len(prompts) == 1 and QUESTION in prompts[0]
    assert result.answer == "14" and result.model_choice == OPTIONS.index("15")
    shown = view.choice.browser.toPlainText()
    assert shown.startswith("14 (judge: scripted model)")
    assert 'the model chose "15", but the sentence it cited names "14"' in shown


def test_a_judge_that_cannot_start_says_why_and_frees_the_button(qtbot, view: EvidenceView) -> None:
    why = "Ollama not reachable at http://localhost:11434: start it or choose offline"

    def unreachable() -> Judge:
        raise RuntimeError(why)

    qtbot.keyClicks(view.questions.line, QUESTION)
    view.judge_factory = unreachable
    view.choice.options.setPlainText("\n".join(OPTIONS))
    with qtbot.waitSignal(view.message, timeout=30_000) as said:
        qtbot.mouseClick(view.choice.choose_button, Qt.MouseButton.LeftButton)
    assert said.args == ["error", why]
    qtbot.waitUntil(lambda: view.choice.choose_button.isEnabled(), timeout=30_000)
    assert view.choice.choice is None and "Ollama not reachable" in view.status.text()


def test_the_quoted_paper_is_found_only_in_scope_and_a_missing_model_is_noted(store_path: Path) -> None:
    from kmds_desktop.app.verdicts import choose, quoted_paper

    with FulltextStore(store_path) as store:
        pnas = next(p.id for p in store.papers() if p.doi == PNAS_DOI)
        others = [p.id for p in store.papers() if p.id != pnas]
        result = choose(store, QUESTION, OPTIONS, Judge(None, "offline", "Ollama not reachable"))
        assert result.answer == "14" and "no model: Ollama not reachable" in result.notes
        assert quoted_paper(store, result) == pnas == quoted_paper(store, result, [pnas])
        assert quoted_paper(store, result, others) is None  # out of scope: no page to open
        assert choose(store, QUESTION, OPTIONS, paper_ids=others).answer == "insufficient"


def test_a_chosen_option_is_filed_under_the_selected_observation_as_the_page_it_rests_on(
        qtbot, view: EvidenceView, kb_copy: Path) -> None:
    from kmds_desktop.kb import load_kb, save_kb
    from kmds_desktop.kb.evidence_links import evidence_links

    kb = load_kb(kb_copy)
    observation = kb.observations[0]
    view.kb_target = lambda: (kb, observation)
    assert not view.choice.file_button.isEnabled()  # nothing chosen yet
    _choose(qtbot, view, QUESTION, OPTIONS)
    result = view.choice.choice
    assert view.choice.file_button.isEnabled() and observation.name in view.choice.target.text()
    with qtbot.waitSignal(view.evidence_filed) as filed:
        qtbot.mouseClick(view.choice.file_button, Qt.MouseButton.LeftButton)
    assert filed.args == [str(observation.iri)] and kb.dirty
    assert f"Filed 1 link under {observation.name}" in view.status.text()
    save_kb(kb)
    links = evidence_links(load_kb(kb_copy), observation.iri)
    assert [(link.doi, link.relation, link.pages, link.quote) for link in links] == [
        (PNAS_DOI, "citesAsEvidence", result.pages, result.quote)]
    assert links[0].quote_status == "verified"  # checked again on its page on the way in


def test_an_undecided_choice_or_one_without_an_observation_files_nothing(qtbot, view: EvidenceView) -> None:
    view.kb_target = lambda: (None, None)
    _choose(qtbot, view, QUESTION, OPTIONS)
    assert "select an observation" in view.choice.target.text()
    with qtbot.waitSignal(view.message) as said:
        qtbot.mouseClick(view.choice.file_button, Qt.MouseButton.LeftButton)
    assert said.args[0] == "warning" and "Select the observation" in said.args[1]
    view.choice.options.setPlainText("14\n2\n4\n15\n24\n34")
    view.questions.line.clear()
    _choose(qtbot, view, "How many Gly-X-Y repeats are in the collagenous domain of the adiponectin paralog "
                         "encoded by C1QTNF1 in mice?", ["14", "2", "4", "15", "24", "34"])
    assert view.choice.choice.choice is None
    assert not view.choice.file_button.isEnabled() and view.choice.target.text() == ""


def test_link_choice_refuses_what_it_cannot_file(store_path: Path, kb_copy: Path) -> None:
    from kmds_desktop.app.evidence_links import link_choice
    from kmds_desktop.app.verdicts import choose
    from kmds_desktop.kb import load_kb

    before = kb_copy.read_bytes()
    observation = load_kb(kb_copy).observations[0].iri
    with FulltextStore(store_path) as store:
        chosen = choose(store, QUESTION, OPTIONS)
        undecided = ChoiceVerdict(QUESTION, OPTIONS, "offline")  # no option, no quote
        with pytest.raises(ValueError, match="no option was chosen"):
            link_choice(kb_copy, observation, undecided, None, store=store)
        with pytest.raises(ValueError, match="no longer in the full-text store"):
            link_choice(kb_copy, observation, chosen, 10_000, store=store)
    assert kb_copy.read_bytes() == before  # nothing saved
