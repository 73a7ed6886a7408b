"""Claims and choices judged from the shared LitQA full texts: per paper supports / contradicts / not
addressed with a quote that is on its page, the balance, "cannot tell" and "insufficient" as answers,
a model's unverifiable quotes dropped and counted, yes / no / maybe, and the CLI's JSON."""

from __future__ import annotations

import json

import pytest
from support.fulltext import shared_import

from kmds_desktop.app.verdicts import Judge, choose, verdict, yes_no
from kmds_desktop.literature.evidence.quotes import verify_quote
from kmds_desktop.literature.evidence.verdict import (
    CANNOT_TELL,
    CONTRADICTED,
    CONTRADICTS,
    INSUFFICIENT,
    NOT_ADDRESSED,
    SUPPORTED,
    SUPPORTS,
    ClaimVerdict,
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


#: The first test to run imports the 40 shared PDFs with real embeddings (minutes on a busy machine).
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def imported():
    return shared_import()


@pytest.fixture()
def store(imported):
    with FulltextStore(imported.store_path) as opened:
        yield opened


def _quotes_are_on_their_pages(store: FulltextStore, result: ClaimVerdict) -> None:
    papers = {p.doi: p for p in store.papers() if p.doi}
    for document in result.documents:
        if document.quote is None:
            assert document.stance == NOT_ADDRESSED
            continue
        paper = papers[document.doi]
        check = verify_quote(document.quote, lambda n, pid=paper.id: store.page_text(pid, n),
                             document.pages[0])
        assert check.verified and check.pages == document.pages, document


def test_a_claim_the_paper_states_is_supported_with_the_quote_on_its_page(store) -> None:
    result = verdict(store, PEG_CLAIM)
    assert result.method == "offline"
    assert result.verdict in (SUPPORTED, "mixed")
    peg = next(d for d in result.documents if d.doi == PEG_DOI)
    assert peg.stance == SUPPORTS
    assert "40%" in peg.quote and "transfection" in peg.quote
    assert peg.pages == (5,)
    _quotes_are_on_their_pages(store, result)
    assert sum(result.balance.values()) == len(result.documents) >= 1


def test_the_denied_claim_is_contradicted_by_the_same_sentence(store) -> None:
    """Over all 40 papers: the denial's words rank the PEG paper's methods first; its result sentence,
    with the negation the denial lacks, is in the paper's third passage, which the judge reads."""
    result = verdict(store, PEG_DENIAL)
    peg = next(d for d in result.documents if d.doi == PEG_DOI)
    assert peg.stance == CONTRADICTS
    assert "40%" in peg.quote and "no detectable" in peg.quote
    assert peg.pages == (5,)
    assert result.verdict == CONTRADICTED and result.balance[CONTRADICTS] >= 1
    _quotes_are_on_their_pages(store, result)


def test_an_off_topic_claim_gets_cannot_tell(store) -> None:
    result = verdict(store, OFF_TOPIC)
    assert result.verdict == CANNOT_TELL
    assert all(d.stance == NOT_ADDRESSED and d.quote is None for d in result.documents)
    assert "cannot tell: 0 support, 0 contradict" in result.summary


def test_polarity_cues_decide_the_stance() -> None:
    claim = "Drug X increases survival."
    assert stance_from_polarity(claim, "Drug X increased survival in mice.") == SUPPORTS
    assert stance_from_polarity(claim, "Drug X reduced survival in mice.") == CONTRADICTS
    assert stance_from_polarity(claim, "Drug X did not increase survival.") == CONTRADICTS
    assert stance_from_polarity("Drug X does not increase survival.", "Drug X reduced survival.") == SUPPORTS


def test_multiple_choice_picks_the_option_the_passage_states_or_says_insufficient(store) -> None:
    result = choose(store, PEG_QUESTION, PEG_OPTIONS)
    assert result.answer == "Above 40%"
    assert result.label == PEG_DOI and result.pages == (5,)
    assert "40%" in result.quote
    undecided = choose(store, "Which city hosted the 1992 Summer Olympics?",
                       ["Barcelona", "Atlanta", "Seoul"])
    assert undecided.answer == INSUFFICIENT and undecided.choice is None
    assert undecided.notes
    with pytest.raises(ValueError, match="at least two options"):
        choose(store, PEG_QUESTION, ["Above 40%"])


def test_a_models_quote_that_is_not_on_the_page_is_dropped_and_counted(store) -> None:
    """The model's replies are scripted (the judge is any ``prompt -> reply`` callable): the passage
    holding the key sentence is answered with it, every other passage with an invented quote."""

    def scripted(prompt: str) -> str:
        if "no detectable levels of transfection" in prompt:
            return 'Sure: {"stance": "SUPPORTS", "quote": "' + PEG_QUOTE + '"}'
        return '{"stance": "SUPPORTS", "quote": "PEG-maleimide cures every retinal disease in humans."}'

    result = verdict(store, PEG_CLAIM, Judge(scripted, "scripted"))
    assert result.method == "scripted"
    assert result.dropped_quotes >= 1
    assert any("dropped" in note for note in result.notes)
    peg = next(d for d in result.documents if d.doi == PEG_DOI)
    assert peg.stance == SUPPORTS and peg.quote == PEG_QUOTE
    assert all(d.quote is None for d in result.documents if d.doi != PEG_DOI)  # not on their pages
    _quotes_are_on_their_pages(store, result)

    picked = choose(store, PEG_QUESTION, PEG_OPTIONS, Judge(
        lambda _prompt: '{"answer": "B", "passage": 1, "quote": "' + PEG_QUOTE + '"}', "scripted"))
    assert picked.answer == "Above 40%" and picked.pages == (5,)
    invented = choose(store, PEG_QUESTION, PEG_OPTIONS, Judge(
        lambda _prompt: '{"answer": "A", "passage": 1, "quote": "Twenty percent is the limit."}', "scripted"))
    assert invented.answer == INSUFFICIENT and invented.dropped_quotes == 1


def test_yes_no_maybe(store) -> None:
    answer, judged = yes_no(store, "Do LNPs with over 40% PEG-maleimide show no detectable transfection?")
    assert (answer, judged.verdict) in {("yes", SUPPORTED), ("maybe", "mixed")}
    assert yes_no(store, OFF_TOPIC)[0] == CANNOT_TELL
    assert yes_no_maybe(ClaimVerdict("x", "offline")) == CANNOT_TELL


def test_cli_verdict_and_choose_print_json(imported, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from kmds_desktop import paths
    from kmds_desktop.cli import main

    monkeypatch.setenv("KMDS_DESKTOP_HOME", str(imported.data_dir))
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

