"""Claims and choices judged from the shared LitQA full texts: per paper supports / contradicts / not
addressed with a quote that is on its page, the balance, "cannot tell" and "insufficient" as answers,
a model's unverifiable quotes dropped and counted, yes / no / maybe, and the CLI's JSON."""

from __future__ import annotations

import json
import re

import pytest

from kmds_desktop.app.verdicts import Judge, choose, verdict, yes_no
from kmds_desktop.literature.evidence.quotes import verify_quote
from kmds_desktop.literature.evidence.verdict import (
    CANNOT_TELL,
    CHOICE_SENTENCES,
    CONTRADICTED,
    CONTRADICTS,
    INSUFFICIENT,
    NOT_ADDRESSED,
    SUPPORTED,
    SUPPORTS,
    ClaimVerdict,
    match_option,
    stance_from_polarity,
    yes_no_maybe,
)
from kmds_desktop.literature.fulltext.store import FulltextStore

PEG_DOI = "10.1126/sciadv.add4623"
PEG_QUESTION = ("I am designing peptide-guided LNPs for delivery to the retina, and am using PEG-maleimide "
                "to attach peptides to the the surface of the LNP. What fraction of the total PEG replaced "
                "with PEG-Maleimide would show no transfection?")
PEG_OPTIONS = ["Above 20%", "Above 40%", "Above 10%", "Above 60%"]
PEG_CLAIM = ("LNP formulations with over 40% of the PEG replaced by PEG-maleimide show no detectable "
             "transfection.")
PEG_DENIAL = ("LNP formulations with over 40% of the PEG replaced by PEG-maleimide show detectable "
              "transfection.")
PEG_QUOTE = ("Formulations with over 40% substitution with PEG-maleimide showed no detectable levels of "
             "transfection")
OFF_TOPIC = "The central bank raised its interest rate twice last year to fight inflation."


#: The first test imports the 40 shared PDFs (700 pages, real embeddings) once for the process
#: (``pdf_import`` in tests/support/fulltext.py): minutes on a busy two-core machine.
pytestmark = pytest.mark.timeout(1800)


def _quotes_are_on_their_pages(pdf_store: FulltextStore, result: ClaimVerdict) -> None:
    papers = {p.doi: p for p in pdf_store.papers() if p.doi}
    for document in result.documents:
        if document.quote is None:
            assert document.stance == NOT_ADDRESSED
            continue
        paper = papers[document.doi]
        check = verify_quote(document.quote, lambda n, pid=paper.id: pdf_store.page_text(pid, n),
                             document.pages[0])
        assert check.verified and check.pages == document.pages, document


def test_a_claim_the_paper_states_is_supported_with_the_quote_on_its_page(pdf_store) -> None:
    result = verdict(pdf_store, PEG_CLAIM)
    assert result.method == "offline"
    assert result.verdict in (SUPPORTED, "mixed")
    peg = next(d for d in result.documents if d.doi == PEG_DOI)
    assert peg.stance == SUPPORTS
    assert "40%" in peg.quote and "transfection" in peg.quote
    assert peg.pages == (5,)
    _quotes_are_on_their_pages(pdf_store, result)
    assert sum(result.balance.values()) == len(result.documents) >= 1


def test_the_denied_claim_is_contradicted_by_the_same_sentence(pdf_store) -> None:
    """Over all 40 papers: the denial's words rank the PEG paper's methods first; its result sentence,
    with the negation the denial lacks, is in the paper's third passage, which the judge reads."""
    result = verdict(pdf_store, PEG_DENIAL)
    peg = next(d for d in result.documents if d.doi == PEG_DOI)
    assert peg.stance == CONTRADICTS
    assert "40%" in peg.quote and "no detectable" in peg.quote
    assert peg.pages == (5,)
    assert result.verdict == CONTRADICTED and result.balance[CONTRADICTS] >= 1
    _quotes_are_on_their_pages(pdf_store, result)


def test_an_off_topic_claim_gets_cannot_tell(pdf_store) -> None:
    result = verdict(pdf_store, OFF_TOPIC)
    assert result.verdict == CANNOT_TELL
    assert all(d.stance == NOT_ADDRESSED and d.quote is None for d in result.documents)
    assert "cannot tell: 0 support, 0 contradict" in result.summary


def test_polarity_cues_decide_the_stance() -> None:
    claim = "Drug X increases survival."
    assert stance_from_polarity(claim, "Drug X increased survival in mice.") == SUPPORTS
    assert stance_from_polarity(claim, "Drug X reduced survival in mice.") == CONTRADICTS
    assert stance_from_polarity(claim, "Drug X did not increase survival.") == CONTRADICTS
    assert stance_from_polarity("Drug X does not increase survival.", "Drug X reduced survival.") == SUPPORTS


def test_multiple_choice_picks_the_option_the_passage_states_or_says_insufficient(pdf_store) -> None:
    result = choose(pdf_store, PEG_QUESTION, PEG_OPTIONS)
    assert result.answer == "Above 40%"
    assert result.label == PEG_DOI and result.pages == (5,)
    assert "40%" in result.quote
    undecided = choose(pdf_store, "Which city hosted the 1992 Summer Olympics?",
                       ["Barcelona", "Atlanta", "Seoul"])
    assert undecided.answer == INSUFFICIENT and undecided.choice is None
    assert undecided.notes
    with pytest.raises(ValueError, match="at least two options"):
        choose(pdf_store, PEG_QUESTION, ["Above 40%"])


def test_a_models_quote_that_is_not_on_the_page_is_dropped_and_counted(pdf_store) -> None:
    """The model's replies are scripted (the judge is any ``prompt -> reply`` callable): the passage
    holding the key sentence is answered with it, every other passage with an invented quote."""

    def scripted(prompt: str) -> str:
        if "no detectable levels of transfection" in prompt:
            return 'Sure: {"stance": "SUPPORTS", "quote": "' + PEG_QUOTE + '"}'
        return '{"stance": "SUPPORTS", "quote": "PEG-maleimide cures every retinal disease in humans."}'

    result = verdict(pdf_store, PEG_CLAIM, Judge(scripted, "scripted"))
    assert result.method == "scripted"
    assert result.dropped_quotes >= 1
    assert any("dropped" in note for note in result.notes)
    peg = next(d for d in result.documents if d.doi == PEG_DOI)
    assert peg.stance == SUPPORTS and peg.quote == PEG_QUOTE
    assert all(d.quote is None for d in result.documents if d.doi != PEG_DOI)  # not on their pages
    _quotes_are_on_their_pages(pdf_store, result)



def _sentence_number(prompt: str, words: str) -> int:
    """The number the prompt gives the sentence holding ``words``."""
    line = next(line for line in prompt.splitlines() if words in line)
    return int(re.match(r"\[(\d+)\]", line).group(1))


def test_the_model_reads_numbered_sentences_and_the_app_quotes_the_one_it_names(pdf_store) -> None:
    """The prompt holds short numbered sentences, each with its paper and page, and the options as text
    (no letters); the model names a sentence and an option, and the app quotes that sentence."""
    prompts: list[str] = []

    def scripted(prompt: str) -> str:
        prompts.append(prompt)
        number = _sentence_number(prompt, "no detectable levels of transfection")
        return f'Here: {{"sentence": {number}, "answer": "above 40%"}}'

    picked = choose(pdf_store, PEG_QUESTION, PEG_OPTIONS, Judge(scripted, "scripted"))
    assert picked.answer == "Above 40%" and picked.model_choice == PEG_OPTIONS.index("Above 40%")
    assert PEG_QUOTE in picked.quote and picked.label == PEG_DOI and picked.pages == (5,)
    assert picked.notes == []
    prompt = prompts[0]
    numbered = [line for line in prompt.splitlines() if re.match(r"\[\d+\] ", line)]
    assert len(numbered) == CHOICE_SENTENCES
    assert f"({PEG_DOI}, p. 5)" in next(line for line in numbered if PEG_QUOTE in line)
    assert "- Above 40%" in prompt and "B. Above" not in prompt  # options as text, not letters
    assert len(prompt) < 4000  # sentences, not five whole passages (~7,000 characters)
    paper_id = _paper_id(pdf_store, PEG_DOI)
    assert verify_quote(picked.quote, lambda n: pdf_store.page_text(paper_id, n), 5).verified


def _paper_id(pdf_store: FulltextStore, doi: str) -> int:
    return next(p.id for p in pdf_store.papers() if p.doi == doi)


def test_a_pick_its_own_sentence_does_not_bear_out_follows_the_sentence(pdf_store) -> None:
    """The model cites the key sentence (it names 40%) but answers "Above 20%": the app answers what the
    sentence says and says so; what the model said is kept."""
    def scripted(prompt: str) -> str:
        number = _sentence_number(prompt, "no detectable levels of transfection")
        return f'{{"sentence": {number}, "answer": "Above 20%"}}'

    result = choose(pdf_store, PEG_QUESTION, PEG_OPTIONS, Judge(scripted, "scripted"))
    assert result.model_choice == PEG_OPTIONS.index("Above 20%")
    assert result.answer == "Above 40%" and PEG_QUOTE in result.quote and result.pages == (5,)
    assert any("the model chose \"Above 20%\"" in note and "follows the sentence" in note
               for note in result.notes)
    assert result.as_dict()["model_choice"] == PEG_OPTIONS.index("Above 20%")


def test_insufficient_from_the_model_yields_to_a_clear_offline_reading(pdf_store) -> None:
    """The model finds nothing, or names an option with a sentence about something else, while the
    offline reading of the same sentences decides clearly: the evidence answers, the note says why."""
    offline = choose(pdf_store, PEG_QUESTION, PEG_OPTIONS)
    assert offline.answer == "Above 40%"
    shy_judge = Judge(lambda _p: '{"answer": "insufficient"}', "scripted")
    shy = choose(pdf_store, PEG_QUESTION, PEG_OPTIONS, shy_judge)
    assert shy.model_choice is None and shy.answer == "Above 40%" and shy.quote == offline.quote
    assert any("found the sentences insufficient" in n and "evidence decides" in n for n in shy.notes)

    def off_topic_sentence(prompt: str) -> str:
        line = next(line for line in prompt.splitlines()
                    if re.match(r"\[\d+\] ", line) and not re.search(r"\b(10|20|40|60)\s?%", line))
        return f'{{"sentence": {line[1:line.index("]")]}, "answer": "Above 60%"}}'

    unsupported = choose(pdf_store, PEG_QUESTION, PEG_OPTIONS, Judge(off_topic_sentence, "scripted"))
    assert unsupported.model_choice == PEG_OPTIONS.index("Above 60%")
    assert unsupported.answer == "Above 40%"
    assert any("without a sentence that names it" in n for n in unsupported.notes)


def test_a_question_the_papers_do_not_answer_stays_insufficient_with_a_model(pdf_store) -> None:
    shy_judge = Judge(lambda _p: '{"answer": "insufficient"}', "scripted")
    olympics = "Which city hosted the 1992 Summer Olympics?"
    result = choose(pdf_store, olympics, ["Barcelona", "Atlanta", "Seoul"], shy_judge)
    assert result.answer == INSUFFICIENT and result.quote is None
    assert any("insufficient" in n for n in result.notes)


def test_a_models_answer_is_matched_to_the_option_it_names() -> None:
    options = ["membrane trafficking", "ATP sensitivity", "metabolic inhibition",
               "channel stimulation by MgADP"]
    assert match_option("Membrane trafficking.", options) == 0
    assert match_option("channel stimulation by MgADP", options) == 3
    assert match_option("the ATP sensitivity of the channel", options) == 1
    assert match_option("insufficient", options) is None
    assert match_option("", options) is None and match_option(None, options) is None
    assert match_option("C", options) is None  # no letters are shown, so a letter names nothing
    assert match_option("Above 40%", ["Above 20%", "Above 40%"]) == 1
    assert match_option("40%", ["Above 20%", "Above 40%"]) == 1


def test_yes_no_maybe(pdf_store) -> None:
    answer, judged = yes_no(pdf_store, "Do LNPs with over 40% PEG-maleimide show no detectable transfection?")
    assert (answer, judged.verdict) in {("yes", SUPPORTED), ("maybe", "mixed")}
    assert yes_no(pdf_store, OFF_TOPIC)[0] == CANNOT_TELL
    assert yes_no_maybe(ClaimVerdict("x", "offline")) == CANNOT_TELL


def test_cli_verdict_and_choose_print_json(pdf_import, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from kmds_desktop import paths
    from kmds_desktop.cli import main

    monkeypatch.setenv("KMDS_DESKTOP_HOME", str(pdf_import.data_dir))
    paths.set_data_dir(None)
    assert main(["literature", "verdict", PEG_CLAIM, "--backend", "offline", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    peg = next(d for d in out["documents"] if d["doi"] == PEG_DOI)
    assert peg["stance"] == SUPPORTS and peg["pages"] == [5] and "40%" in peg["quote"]
    assert out["verdict"] in (SUPPORTED, "mixed") and out["method"] == "offline"

    args = ["literature", "choose", PEG_QUESTION, "--backend", "offline", "--json"]
    assert main([*args, *(x for o in PEG_OPTIONS for x in ("--option", o))]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "Above 40%"
    assert main([*args, "--option", "Above 40%"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "at least two options" in err
    assert main(["literature", "verdict", "  ", "--backend", "offline"]) == 1
    assert "claim is empty" in capsys.readouterr().err



def test_the_windows_encoder_embeds_the_search_and_the_judging(pdf_store) -> None:
    """The window passes its index process's encoder: the passage search and the offline judging embed
    with it (the shipped model loading in the window's own process was what it is there to avoid)."""
    from kmds_desktop.index.embeddings import encode

    calls: list[int] = []

    def encoder(texts):
        calls.append(len(texts))
        return encode(list(texts))

    judged = verdict(pdf_store, PEG_CLAIM, encoder=encoder)
    assert calls and judged.verdict in (SUPPORTED, "mixed")
    before = len(calls)
    chosen = choose(pdf_store, PEG_QUESTION, PEG_OPTIONS, encoder=encoder)
    assert len(calls) > before and chosen.answer == "Above 40%"


@pytest.mark.parametrize("reply", [
    "{" * 40_000,  # a scan from every brace to the end took 23 s
    '{"stance": "SUPPORTS", "quote": ' + "[" * 3000 + "]" * 3000 + "}",  # RecursionError escaped
    '{"answer": 2, "sentence": 1e999}',  # OverflowError escaped
    '{"answer": 2, "sentence": "' + "9" * 5000 + '"}',
])
def test_a_hostile_model_reply_is_no_verdict_and_the_offline_reading_stands(pdf_store, reply: str) -> None:
    claim = verdict(pdf_store, PEG_CLAIM, Judge(lambda _prompt: reply, "scripted"))
    assert claim.method == "scripted" and all(d.quote is None or d.doi for d in claim.documents)
    chosen = choose(pdf_store, PEG_QUESTION, PEG_OPTIONS, Judge(lambda _prompt: reply, "scripted"))
    assert chosen.answer in (*PEG_OPTIONS, INSUFFICIENT)
