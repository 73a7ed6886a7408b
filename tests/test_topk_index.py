"""The top-k index matches exactly what PostgreSQL's ``@@`` matches, on the shared corpora.

A differential test: queries generated from the corpora's own words (AND/OR/NOT, phrases ``<->``
and ``<N>`` taken from real titles, prefixes, hyphenated and numeric terms, stop words inside
phrases, OR groups inside phrases) run both in PostgreSQL and in the index; the id sets must be equal
for every query the index accepts, and the index must accept the plain shapes (no silent fallback).
"""

from __future__ import annotations

import random
import re
import shutil
from typing import Any

import pytest

from kmds_desktop.literature.store.topk_build import build_index, refresh_index
from kmds_desktop.literature.store.topk_index import GAP, SCHEMA_VERSION, BuildState, TopKIndex, body_tokens
from kmds_desktop.literature.store.tsquery_tree import Node, Term, read_tree

WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)?")


def test_body_tokens_keep_postgres_positions() -> None:
    assert body_tokens("'failur':3B 'heart':1A 'it''s':5") == f"heart {GAP} failur {GAP} it's"
    assert body_tokens("'x' 'y':2") == f"{GAP} y x"


def test_reading_a_deeply_nested_query_uses_no_recursion() -> None:
    depth = 20_000
    tree = read_tree("(" * depth + "'a' & 'b'" + ")" * depth)
    assert tree == Node("and", (Term("a"), Term("b")))
    tree = read_tree("!" * 5000 + "'a'")
    for _ in range(5000):
        assert isinstance(tree, Node) and tree.op == "not"
        tree = tree.children[0]
    assert tree == Term("a")


def test_precedence_is_postgres_own() -> None:
    assert read_tree("'a' | 'b' & !'c' <-> 'd'") == Node("or", (
        Term("a"), Node("and", (Term("b"), Node("phrase", (Node("not", (Term("c"),)), Term("d")), 1)))))
    assert read_tree("'a':* <2> 'b':AB") == Node("phrase", (Term("a", True), Term("b", False, "AB")), 2)


@pytest.fixture(scope="module")
def built(pg_database: Any, tmp_path_factory: pytest.TempPathFactory) -> TopKIndex:
    index = TopKIndex(tmp_path_factory.mktemp("topk") / "index")
    state = build_index(pg_database, index, batch=3000)
    assert state.complete and state.documents == index.documents() > 8000
    return index


def _postgres_ids(db: Any, query: str) -> set[int]:
    rows = db.run(lambda c: c.execute(
        "SELECT id FROM document WHERE withdrawn_date IS NULL AND "
        "search_vector @@ to_tsquery('english', %s)", (query,)).fetchall())
    return {int(r[0]) for r in rows}


def _printed(db: Any, query: str) -> str:
    return str(db.run(lambda c: c.execute("SELECT to_tsquery('english', %s)::text", (query,)).fetchone()[0]))


def _generated_queries(db: Any, count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    titles = [str(r[0]) for r in db.run(lambda c: c.execute(
        "SELECT title FROM document WHERE title IS NOT NULL ORDER BY id").fetchall())]
    rng.shuffle(titles)
    sentences = [WORD.findall(t) for t in titles[:3000]]
    sentences = [s for s in sentences if len(s) >= 4]
    words = [w for s in sentences for w in s]
    hyphenated = sorted({w for w in words if "-" in w})
    numeric = ["2", "10", "19", "1", "100"]

    def word() -> str:
        return rng.choice(words).lower()

    def phrase(distance: int | None = None) -> str:
        s = rng.choice(sentences)
        i = rng.randrange(len(s) - 2)
        if distance is None:
            return f"{s[i]} <-> {s[i + 1]}"
        return f"{s[i]} <{distance}> {s[i + distance]}"

    def chain() -> str:
        s = rng.choice(sentences)
        i = rng.randrange(len(s) - 2)
        return f"{s[i]} <-> {s[i + 1]} <-> {s[i + 2]}"

    shapes = [
        lambda: word(),
        lambda: f"{word()} & {word()}",
        lambda: f"{word()} | {word()} | {word()}",
        lambda: f"{word()} & !{word()}",
        lambda: f"!{word()}",
        lambda: f"({word()} | {word()}) & ({word()} | {word()})",
        lambda: phrase(),
        lambda: phrase(2),
        lambda: f"{phrase()} | {word()}",
        lambda: chain(),
        lambda: f"{word()[:4]}:*",
        lambda: f"{word()[:3]}:* & {word()}",
        lambda: rng.choice(hyphenated) if hyphenated else word(),
        lambda: f"{rng.choice(hyphenated) if hyphenated else word()} | {rng.choice(numeric)}",
        lambda: f"{rng.choice(numeric)} & {word()}",
        lambda: f"heart <-> of <-> {word()}",
        lambda: f"({word()} | {word()}) <-> {word()}",
        lambda: f"!({word()} | {word()}) & {word()}",
        lambda: f"{word()} <-> ({word()} <-> {word()} | {word()})",
    ]
    return [rng.choice(shapes)() for _ in range(count)]


def test_the_index_matches_exactly_what_postgres_matches(pg_database: Any, built: TopKIndex) -> None:
    queries = _generated_queries(pg_database, 400)
    compared = 0
    matched_something = 0
    for text in queries:
        try:
            expected = _postgres_ids(pg_database, text)
        except Exception:  # noqa: BLE001 - a generated word PostgreSQL refuses (e.g. a lone number form)
            continue
        printed = _printed(pg_database, text)
        query = built.translate(printed)
        assert query is not None, f"the index refused a plain query {text!r} ({printed!r})"
        got = {doc_id for doc_id, _ in built.top(query, max(1, len(expected)) + 5)}
        assert got == expected, (text, printed, len(got), len(expected), sorted(got ^ expected)[:5])
        assert built.count(query) == len(expected), text
        plan = built.plan(printed)  # the row as searches run it: at this size never within a tier
        assert built.top_ranked(plan, 10) == (built.top(query, 10), None), text
        compared += 1
        matched_something += bool(expected)
    assert compared >= 350 and matched_something >= 250, (compared, matched_something)


def test_what_the_index_cannot_run_exactly_is_left_to_postgres(built: TopKIndex) -> None:
    for printed in ("'heart':* <-> 'failur'", "'a' <-> !'b'", "'a':B & 'c'", "'a' <0> 'b'"):
        assert built.translate(printed) is None, printed
    assert built.translate("") is not None and built.count(built.translate("")) == 0


def test_a_deeply_nested_query_runs_in_postgres_not_in_the_index(pg_database: Any, built: TopKIndex) -> None:
    """tantivy searches nested boolean queries recursively: 500 levels of AND/OR killed the process
    (SIGSEGV). Deeper than MAX_QUERY_DEPTH goes to PostgreSQL; up to it the index runs the query, on a
    worker thread with a 512 KB stack too, and matches what PostgreSQL matches."""
    import threading

    from kmds_desktop.literature.store.topk_index import MAX_QUERY_DEPTH

    def nested(levels: int) -> str:
        return "cystic & ( fibrosis | " * levels + "lung" + " )" * levels

    deep = _printed(pg_database, nested(1000))
    assert deep.count("(") >= 1000  # PostgreSQL keeps the nesting as typed
    assert built.translate(deep) is None
    assert built.translate("!" * 1000 + "'cystic'") is None
    levels = (MAX_QUERY_DEPTH - 3) // 2  # an AND and an OR a level, the title wrapper's two more
    query = nested(levels)
    outcome: dict[str, Any] = {}

    def search() -> None:
        translated = built.translate(_printed(pg_database, query))
        outcome["ids"] = None if translated is None else {i for i, _ in built.top(translated, 10_000)}

    threading.stack_size(512 * 1024)
    try:
        worker = threading.Thread(target=search)
        worker.start()
        worker.join()
    finally:
        threading.stack_size(0)
    assert outcome["ids"] == _postgres_ids(pg_database, query) != set()


def test_filters_and_ranking(pg_database: Any, built: TopKIndex) -> None:
    query = built.translate(_printed(pg_database, "cystic <-> fibrosis"))
    hits = built.top(query, 100)
    assert len(hits) == 100 and all(a[1] >= b[1] for a, b in zip(hits, hits[1:], strict=False))
    import datetime as dt

    since = dt.date(2000, 1, 1)
    expected = {int(r[0]) for r in pg_database.run(lambda c: c.execute(
        "SELECT id FROM document WHERE withdrawn_date IS NULL AND publication_date >= %s AND "
        "search_vector @@ to_tsquery('english', 'cystic <-> fibrosis')", (since,)).fetchall())}
    got = {i for i, _ in built.top(built.filtered(query, None, since, None), 100_000)}
    assert got == expected
    assert built.document_frequency("fibrosi") == len(_postgres_ids(pg_database, "fibrosis"))


def test_refresh_follows_new_changed_and_withdrawn_documents(pg_empty_database: Any, tmp_path: Any,
                                                              literature_data: Any, monkeypatch: Any) -> None:
    from kmds_desktop.literature.store import topk_build

    db = pg_empty_database
    db.import_files([literature_data / "cf" / "corpus.jsonl"])
    index = TopKIndex(tmp_path / "index")
    build_index(db, index, batch=500)
    before = index.documents()
    target = db.run(lambda c: c.execute(
        "SELECT id FROM document WHERE search_vector @@ to_tsquery('english', 'pseudomonas') "
        "ORDER BY id LIMIT 2").fetchall())
    withdrawn, changed = int(target[0][0]), int(target[1][0])
    middle = sorted(index.all_ids())[before // 2]

    def edit(c: Any) -> None:
        with c.transaction():
            c.execute("UPDATE document SET withdrawn_date = current_date WHERE id = %s", (withdrawn,))
            c.execute("UPDATE document SET title = 'zyxwvut quokka study' WHERE id = %s", (changed,))
            c.execute("DELETE FROM document WHERE id = (SELECT max(id) FROM document)")
            c.execute("DELETE FROM document WHERE id = %s", (middle,))

    db.run(edit)
    monkeypatch.setattr(topk_build, "ID_RANGE", 97)  # the deleted ids found a range at a time
    result = refresh_index(db, index)
    assert result.removed == 3 and result.indexed >= 1, (result, before, index.documents())
    assert index.documents() == before - 3 and middle not in index.all_ids()
    quokka = index.translate(_printed(db, "quokka"))
    assert [i for i, _ in index.top(quokka, 10)] == [changed]
    pseudomonas = index.translate(_printed(db, "pseudomonas"))
    assert {i for i, _ in index.top(pseudomonas, 10_000)} == _postgres_ids(db, "pseudomonas")


def test_adding_new_documents_also_takes_in_changed_ones_and_leaves_nothing_to_refresh(
        pg_empty_database: Any, tmp_path: Any, literature_data: Any) -> None:
    """An import's extend (new ids) re-indexes the older rows written since, and moves the point the
    refresh reads from: a refresh right after has nothing to do (it used to re-read every row added
    since the first build)."""
    db = pg_empty_database
    db.import_files([literature_data / "cf" / "corpus.jsonl"])
    index = TopKIndex(tmp_path / "index")
    build_index(db, index, batch=500)
    old = int(db.run(lambda c: c.execute("SELECT min(id) FROM document").fetchone()[0]))
    source = int(db.run(lambda c: c.execute("SELECT source_id FROM document WHERE id = %s",
                                            (old,)).fetchone()[0]))

    def write(c: Any) -> None:
        with c.transaction():
            c.execute("UPDATE document SET title = 'zyxwvut wombat study' WHERE id = %s", (old,))
            for n in range(3):
                c.execute("INSERT INTO document (source_id, external_id, title, abstract) "
                          "VALUES (%s, %s, 'numbat survey', 'numbats in the wild')", (source, f"new-{n}"))

    db.run(write)
    state = build_index(db, index, batch=500)
    assert state.complete
    wombat = index.translate(_printed(db, "wombat"))
    assert [i for i, _ in index.top(wombat, 10)] == [old]  # the changed older document
    numbat = index.translate(_printed(db, "numbat"))
    assert {i for i, _ in index.top(numbat, 10)} == _postgres_ids(db, "numbat") and len(
        _postgres_ids(db, "numbat")) == 3
    result = refresh_index(db, index)
    assert (result.indexed, result.removed) == (0, 0)


def test_a_batch_that_fails_half_way_is_not_kept_and_the_build_goes_on(pg_empty_database: Any, tmp_path: Any,
                                                                       literature_data: Any,
                                                                       monkeypatch: Any) -> None:
    """A failure inside a batch (the disk full, a bad row) drops that batch's added rows: the build
    goes on from the last committed batch, and no document is in the index twice."""
    db = pg_empty_database
    db.import_files([literature_data / "cf" / "corpus.jsonl"])
    index = TopKIndex(tmp_path / "index")
    real_add, calls = TopKIndex.add, {"n": 0}

    def failing_add(self: TopKIndex, rows: Any) -> int:
        calls["n"] += 1
        added = real_add(self, rows)
        if calls["n"] == 3:
            raise OSError("no space left on device")
        return added

    monkeypatch.setattr(TopKIndex, "add", failing_add)
    with pytest.raises(OSError):
        build_index(db, index, batch=200)
    monkeypatch.setattr(TopKIndex, "add", real_add)
    assert len(TopKIndex(tmp_path / "index").all_ids()) == 400  # the two batches committed
    state = build_index(db, TopKIndex(tmp_path / "index"), batch=200)
    ids = TopKIndex(tmp_path / "index").all_ids()
    expected = int(db.run(lambda c: c.execute("SELECT count(*) FROM document").fetchone()[0]))
    assert state.complete and len(ids) == len(set(ids)) == expected == state.documents


def test_cancel_during_the_imports_index_step_keeps_the_import_and_the_next_build_goes_on(
        pg_empty_database: Any, literature_data: Any, data_home: Any, monkeypatch: Any) -> None:
    """The import's own index step honours Cancel (at PubMed size it reads millions of rows): the
    documents imported stay, the index is left unfinished, and the next build completes it."""
    from kmds_desktop.literature.store.topk_build import index_folder
    from kmds_desktop.tasks import CancelToken

    db = pg_empty_database
    token = CancelToken()
    messages: list[str] = []

    def progress(done: int, total: int, message: str) -> None:
        messages.append(message)
        if message.startswith("fast search index: indexed"):  # the step's first batch is committed
            token.cancel()

    from kmds_desktop.literature.store import topk_build

    monkeypatch.setattr(topk_build, "BATCH", 500)  # CF's 1,239 documents: three batches
    report = db.import_files([literature_data / "cf" / "corpus.jsonl"], progress=progress, cancel=token)
    assert report.inserted == 1239 == db.status()["documents"]
    assert any(m.startswith("fast search index: indexing 1,239 documents") for m in messages)
    state = BuildState.load(index_folder(db) / "state.json")
    assert state is not None and not state.complete and state.documents == 500
    assert db.topk_index() is None  # rows run in PostgreSQL meanwhile
    index = TopKIndex(index_folder(db))
    assert build_index(db, index).complete and index.documents() == 1239


def test_pages_of_tied_scores_neither_skip_nor_repeat_documents(tmp_path: Any) -> None:
    """15 documents of one and the same score in three segments (one re-indexed): tantivy cuts a tie at
    its limit in segment order, which varies; the pages of 5 are ids 1-5, 6-10, 30-34 every time."""
    for run in range(6):
        index = TopKIndex(tmp_path / f"index{run}")
        doc = "'a':1 'b':2"
        index.add([(i, doc, 1, None) for i in range(1, 11)])
        index.commit()
        index.add([(i, doc, 1, None) for i in range(30, 35)])
        index.commit()
        index.delete(range(6, 11))
        index.add([(i, doc, 1, None) for i in range(6, 11)])
        index.commit()
        query = index.translate("'a'")
        pages = [[i for i, _ in index.top(query, 5, offset)] for offset in (0, 5, 10)]
        assert pages == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [30, 31, 32, 33, 34]], (run, pages)


def test_the_index_belongs_to_the_database_not_to_the_address_it_was_reached_by(
        pg_empty_database: Any, literature_data: Any, data_home: Any) -> None:
    """The identity is the server's system identifier and the database's name and oid: another address
    of the same server is the same database. An index made when the identity named the address is moved
    to its new folder once, finished as it was (not rebuilt)."""
    from kmds_desktop import paths
    from kmds_desktop.literature.store.topk_build import _key, database_identity, identities, index_folder

    db = pg_empty_database
    db.import_files([literature_data / "cf" / "corpus.jsonl"])
    identity, legacy = identities(db)
    assert identity == database_identity(db) and "@" not in identity and legacy.startswith(identity + "@")
    import shutil

    shutil.rmtree(paths.sub_dir("topk") / _key(identity))  # the import's own index: as if never made
    db.attach_topk_index(False)
    old = paths.sub_dir("topk") / _key(legacy)
    state = build_index(db, TopKIndex(old))  # as an older version built it: keyed and marked by address
    state.database = legacy
    state.save(old / "state.json")
    folder = index_folder(db)
    assert folder != old and not old.exists()
    moved = BuildState.load(folder / "state.json")
    assert moved is not None and moved.complete and moved.database == identity
    assert TopKIndex(folder).documents() == 1239 and db.topk_index() is not None


def test_a_tie_longer_than_the_margin_reads_on_until_it_ends(tmp_path: Any) -> None:
    """120 documents of one score in four segments: past the margin read at once (32) the search reads
    twice as many until the tie ends, so every page of 10 is the next 10 ids."""
    index = TopKIndex(tmp_path / "index")
    for start in (1, 41, 81):
        index.add([(i, "'a':1 'b':2", 1, None) for i in range(start, start + 40)])
        index.commit()
    index.delete(range(20, 30))
    index.add([(i, "'a':1 'b':2", 1, None) for i in range(20, 30)])
    index.commit()
    query = index.translate("'a'")
    pages = [[i for i, _ in index.top(query, 10, offset)] for offset in range(0, 120, 10)]
    assert pages == [list(range(start, start + 10)) for start in range(1, 121, 10)]


def _broad_terms(db: Any, built: TopKIndex, least_share: float) -> list[str]:
    rows = db.run(lambda c: c.execute(
        "SELECT word, ndoc FROM ts_stat('SELECT search_vector FROM document') ORDER BY ndoc DESC "
        "LIMIT 400").fetchall())
    total = built.documents()
    return [str(w) for w, n in rows if n >= least_share * total and str(w).isalpha()
            and built.tiers is not None and str(w) in built.tiers.thresholds]


def test_impact_tiers_bound_a_broad_and_rows_walk_and_return_only_true_matches(
        pg_database: Any, built: TopKIndex) -> None:
    """A broad AND over the row budget runs within an impact tier: every row a true match with its
    exact BM25 score, the best of the tier's, most of the exact top rows among them."""
    assert built.tiers is not None and len(built.tiers.thresholds) > 100
    broad = _broad_terms(pg_database, built, 0.08)
    assert len(broad) >= 12, broad
    rng = random.Random(3)
    overlaps, shares = [], []
    for _ in range(12):
        a, b = rng.sample(broad, 2)
        text = f"{a} & {b}"
        plan = built.plan(_printed(pg_database, text))
        assert plan is not None and plan.operands == ((a,), (b,))
        matches = _postgres_ids(pg_database, text)
        exact = built.top(plan.query, len(matches) + 5)
        scores = dict(exact)
        # a budget an eighth of the postings (a broad row at a few million documents)
        budget = (built.document_frequency(a) + built.document_frequency(b)) // 8
        tiered, tier = built.top_ranked(plan, 20, budget=budget)
        if tier is None:  # every tier narrower than the page: exact
            assert tiered == exact[:20]
            continue
        assert len(tiered) == 20 and {i for i, _ in tiered} <= matches, text
        assert all(scores[i] == pytest.approx(s) for i, s in tiered), text  # exact BM25 scores
        assert [s for _, s in tiered] == sorted((s for _, s in tiered), reverse=True)
        overlaps.append(len({i for i, _ in tiered} & {i for i, _ in exact[:20]}) / 20)
        shares.append(sum(s for _, s in tiered) / sum(s for _, s in exact[:20]))
        # the same row without the budget (the shared corpora's rows fit it) ranks exactly
        assert built.top_ranked(plan, 20) == (exact[:20], None)
    assert len(overlaps) >= 8, overlaps
    print(f"tiered rows: {len(overlaps)}, overlap with the exact top 20: median "
          f"{sorted(overlaps)[len(overlaps) // 2]:.2f}, score share {min(shares):.3f}..{max(shares):.3f}")
    assert sorted(overlaps)[len(overlaps) // 2] >= 0.9 and min(shares) >= 0.98, (overlaps, shares)


def test_a_tier_with_too_few_matches_gives_way_and_pages_share_one_ranking(
        pg_database: Any, built: TopKIndex) -> None:
    broad = _broad_terms(pg_database, built, 0.08)
    a, b = broad[0], broad[1]
    plan = built.plan(_printed(pg_database, f"{a} & {b}"))
    matches = _postgres_ids(pg_database, f"{a} & {b}")
    exact = built.top(plan.query, len(matches) + 5)
    budget = (built.document_frequency(a) + built.document_frequency(b)) // 8
    first, tier = built.top_ranked(plan, 30, budget=budget)
    assert tier is not None
    pages = [built.top_ranked(plan, 10, offset, budget=budget) for offset in (0, 10, 20)]
    assert [hit for page, _ in pages for hit in page] == first and {t for _, t in pages} == {tier}
    # asking for every match: no tier has them all, so the row is ranked exactly
    assert built.top_ranked(plan, len(matches), budget=budget) == (exact[:len(matches)], None)
    # shapes the tiers do not restrict (a phrase, one term, an OR, an AND of prefixes) rank exactly
    for text in (f"{a} <-> {b}", a, f"{a} | {b}", f"{a[:3]}:* & {b[:3]}:*"):
        other = built.plan(_printed(pg_database, text))
        assert other is not None and not other.operands, text
        assert built.top_ranked(other, 10, budget=1)[1] is None
    # a prefix operand scores a constant in tantivy: the row is restricted by its other terms
    text = f"{a[:4]}:* & {b}"
    mixed = built.plan(_printed(pg_database, text))
    assert mixed.operands == ((b,),) and mixed.prefixes == (a[:4],)
    every = dict(built.top(mixed.query, 100_000))
    hits, tier = built.top_ranked(mixed, 10, budget=1)
    assert tier is not None and len(hits) == 10
    assert all(i in every and every[i] == pytest.approx(x) for i, x in hits)
    assert {i for i, _ in hits} <= _postgres_ids(pg_database, text)


def test_an_index_of_the_older_layout_is_searched_exactly_until_rebuilt(
        pg_database: Any, tmp_path: Any) -> None:
    folder = tmp_path / "index"
    old = TopKIndex(folder)
    shutil.rmtree(folder / "tantivy")
    old.layout = 2
    old._open()  # an index made with the layout-2 schema: no tier fields
    old.add([(1, "'cystic':1 'fibrosis':2", 1, None), (2, "'cystic':1", 1, None)])
    old.commit()
    BuildState(schema=2, database="x", complete=True, documents=2).save(old.state_path)
    reopened = TopKIndex(folder)
    assert reopened.layout == 2 and reopened.tiers is None
    plan = reopened.plan("'cystic' & 'fibrosis'")
    assert reopened.top_ranked(plan, 5, budget=0) == (reopened.top(plan.query, 5), None)
    assert [i for i, _ in reopened.top(plan, 5)] == [1]
    state = build_index(pg_database, reopened, batch=5000, rebuild=True)
    assert state.schema == SCHEMA_VERSION and reopened.layout == SCHEMA_VERSION
    assert reopened.tiers is not None and reopened.tiers.thresholds
    assert BuildState.load(reopened.state_path).schema == SCHEMA_VERSION


_KILLED_BUILD = """
import sys
from kmds_desktop.config import LiteratureSettings
from kmds_desktop.literature.store.database import open_database
from kmds_desktop.literature.store.topk_build import build_index
from kmds_desktop.literature.store.topk_index import TopKIndex
db = open_database(sys.argv[1], settings=LiteratureSettings(statement_timeout_ms=30_000))
build_index(db, TopKIndex(sys.argv[2]), batch=200)
"""


def test_a_kill_between_a_batchs_commit_and_its_state_adds_nothing_twice(pg_empty_database: Any,
                                                                         tmp_path: Any,
                                                                         literature_data: Any) -> None:
    """``kill -9`` right after the third batch's commit, before ``state.json`` records it: the index
    holds 600 documents, the state says 400. Going on from there used to add the third batch again
    (1,439 documents for 1,239, every count too high); now the build drops what lies past the recorded
    id first, and each document is in the index once."""
    import os
    import subprocess
    import sys

    db = pg_empty_database
    db.import_files([literature_data / "cf" / "corpus.jsonl"])
    folder = tmp_path / "index"
    env = {**os.environ, "KMDS_CRASH_AT": "topk.batch-committed:3"}
    killed = subprocess.run([sys.executable, "-c", _KILLED_BUILD, str(db.dsn), str(folder)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    state = BuildState.load(folder / "state.json")
    assert state is not None and state.documents == 400 and not state.complete
    assert TopKIndex(folder).documents() == 600  # the third batch committed, unrecorded
    index = TopKIndex(folder)
    state = build_index(db, index, batch=200)
    ids = index.all_ids()
    expected = int(db.run(lambda c: c.execute("SELECT count(*) FROM document").fetchone()[0]))
    assert state.complete and len(ids) == len(set(ids)) == expected == state.documents == 1239
    cystic = index.translate(_printed(db, "cystic"))
    assert index.count(cystic) == len(_postgres_ids(db, "cystic"))


def _index_with_a_batch_twice(db: Any, folder: Any) -> TopKIndex:
    """A finished index that holds 150 documents twice and whose state agrees with it: what a kill
    between a batch's commit and ``state.json`` left with the older build."""
    index = TopKIndex(folder)
    build_index(db, index, batch=500)
    rows = db.run(lambda c: c.execute(
        "SELECT id, search_vector::text, source_id, publication_date FROM document ORDER BY id "
        "LIMIT 150 OFFSET 300").fetchall())
    index.add([(int(r[0]), str(r[1]), int(r[2]), r[3]) for r in rows])
    index.commit()
    state = BuildState.load(index.state_path)
    assert state is not None
    state.documents = index.documents()
    state.save(index.state_path)
    assert state.documents == 1239 + 150
    return index


def test_refresh_repairs_an_index_that_holds_documents_twice(pg_empty_database: Any, tmp_path: Any,
                                                             literature_data: Any) -> None:
    db = pg_empty_database
    db.import_files([literature_data / "cf" / "corpus.jsonl"])
    index = _index_with_a_batch_twice(db, tmp_path / "index")
    cystic = index.translate(_printed(db, "cystic"))
    assert index.count(cystic) > len(_postgres_ids(db, "cystic"))  # the counts the duplicates inflate
    result = refresh_index(db, index)
    ids = index.all_ids()
    assert len(ids) == len(set(ids)) == 1239 == index.documents()
    assert result.indexed == 150 and result.removed == 0
    assert index.count(cystic) == len(_postgres_ids(db, "cystic"))
    assert BuildState.load(index.state_path).documents == 1239  # type: ignore[union-attr]
    assert refresh_index(db, index).indexed == 0  # repaired: nothing left to do


def test_opening_a_small_index_whose_count_disagrees_repairs_it_before_it_counts(
        pg_empty_database: Any, tmp_path: Any, literature_data: Any) -> None:
    """The first search of a newly opened small database compares the index's count with the
    database's once: a damaged index is repaired before any count comes from it."""
    from kmds_desktop.literature.store.topk_build import in_step

    db = pg_empty_database
    db.import_files([literature_data / "cf" / "corpus.jsonl"])
    _index_with_a_batch_twice(db, tmp_path / "index")
    opened = TopKIndex(tmp_path / "index")
    assert opened.documents() == 1389
    assert in_step(db, opened)
    ids = opened.all_ids()
    assert len(ids) == len(set(ids)) == opened.documents() == 1239
    # the state file out of step with the index (a refresh killed before it saved) is noticed too
    state = BuildState.load(opened.state_path)
    assert state is not None
    state.documents = 1000
    state.save(opened.state_path)
    assert in_step(db, opened) and BuildState.load(opened.state_path).documents == 1239  # type: ignore[union-attr]
