"""The shared wording helper: counts agree with their noun in every layer."""

from __future__ import annotations

from kmds_desktop.literature.store.loading import FileReport, ImportReport
from kmds_desktop.text import plural


def test_plural_agrees_with_the_count() -> None:
    assert plural(1, "record") == "1 record"
    assert plural(0, "record") == "0 records"
    assert plural(1240, "record") == "1,240 records"
    assert plural(1, "query", "queries") == "1 query" and plural(2, "query", "queries") == "2 queries"


def test_an_import_of_one_record_from_one_file_says_so() -> None:
    """The import summary the literature panel and the CLI show."""
    report = ImportReport([FileReport("a.jsonl", "jsonl", records=1, inserted=1)])
    assert report.summary().startswith("1 file: 1 record, 1 new, ")
    two = ImportReport([FileReport("a.jsonl", "jsonl", records=2), FileReport("b.ris", "ris", records=3)])
    assert two.summary().startswith("2 files: 5 records, ")


def test_a_job_progress_line_says_the_job_name_once() -> None:
    from kmds_desktop.app.messages import job_progress_text, progress_line

    assert job_progress_text("Loading the embedding model", "loading the embedding model") == (
        "Loading the embedding model")
    assert job_progress_text("Indexing", "indexing: 3 of 9") == "Indexing: 3 of 9"
    assert job_progress_text("Indexing", "3 of 9") == "Indexing: 3 of 9"
    assert progress_line([("A", "x"), ("B", "y")]) == "2 tasks: B · A"


def test_a_long_message_is_cut_to_one_readable_line_that_says_its_length() -> None:
    from kmds_desktop.text import MESSAGE_LIMIT, shorten

    assert shorten("line 3: bad\n  year") == "line 3: bad year"
    long = "line 7: " + "x" * 120_000
    cut = shorten(long)
    assert len(cut) <= MESSAGE_LIMIT and cut.startswith("line 7: xxx")
    assert cut.endswith(f"({len(long):,} characters in all)")
    assert len(shorten(long, 80)) <= 80
