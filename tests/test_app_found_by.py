"""How "found by" names a semantic row (documents table, detail, exports), without Qt."""

from __future__ import annotations


def test_found_by_names_a_question_whole_and_a_long_sentence_by_its_start():
    from kmds_desktop.app.literature import FOUND_BY_CHARS, LiteratureSession

    question = "Does sweat chloride testing diagnose cystic fibrosis in adults?"
    assert LiteratureSession._found_by_name("semantic", question, None) == f"semantic: {question}"
    long = "word " * 60
    name = LiteratureSession._found_by_name("semantic", long, None)
    assert name.endswith("…") and len(name) <= len("semantic: ") + FOUND_BY_CHARS
