"""Recognising a record seen in an earlier run: by identity, DOI, PMID or normalised title.

Why more than the (source, external id) key: an update re-runs the strategy on a database that may have
been rebuilt, re-imported from another file, or given the same paper under a second source (a PubMed
update file beside a JSONL export). The review must never offer a paper twice, so a record is known when
any of its identities, its DOI, its PMID or its normalised title (the known-papers check's
:func:`~kmds_desktop.literature.store.identities.normalize_title`) matches a record the review holds or
an identity an earlier run brought. Titles shorter than :data:`MIN_TITLE_CHARS` once normalised ("Editorial",
"Letter") are not compared: they name many papers.
"""

from __future__ import annotations

from collections.abc import Iterable

from kmds_desktop.literature.screening.decisions import Key
from kmds_desktop.literature.screening.records import ScreeningRecord
from kmds_desktop.literature.store.identities import normalize_title

#: Normalised titles shorter than this are not used to recognise a record.
MIN_TITLE_CHARS = 24


def title_key(title: str) -> str:
    """The normalised title used for matching, or "" when too short to tell papers apart."""
    norm = normalize_title(title or "")
    return norm if len(norm) >= MIN_TITLE_CHARS else ""


class RecordMatcher:
    """An index of the records a review holds (and identities earlier runs brought), to recognise them."""

    def __init__(self, records: Iterable[ScreeningRecord] = (), identities: Iterable[Key] = ()) -> None:
        self._by: dict[tuple[str, str], Key] = {}
        for rec in records:
            self.add(rec)
        for key in identities:
            self._by.setdefault(("id", f"{key[0]}\0{key[1]}"), (str(key[0]), str(key[1])))

    @staticmethod
    def probes(rec: ScreeningRecord) -> list[tuple[str, str]]:
        out = [("id", f"{rec.source}\0{rec.external_id}")]
        out += [("id", f"{a[0]}\0{a[1]}") for a in rec.aliases]
        if rec.doi:
            out.append(("doi", rec.doi))
        if rec.pmid:
            out.append(("pmid", rec.pmid))
        title = title_key(rec.title)
        if title:
            out.append(("title", title))
        return out

    def add(self, rec: ScreeningRecord) -> None:
        for probe in self.probes(rec):
            self._by.setdefault(probe, rec.key)

    def match(self, rec: ScreeningRecord) -> Key | None:
        """The key of the record ``rec`` is (by identity, DOI, PMID or title), or None when new."""
        for probe in self.probes(rec):
            found = self._by.get(probe)
            if found is not None:
                return found
        return None


def repeats(records: Iterable[ScreeningRecord]) -> list[tuple[Key, Key]]:
    """Pairs (later record, earlier record) of a review that are the same paper: records shown twice.
    A review kept by this package has none; the bench and the tests count them."""
    matcher = RecordMatcher()
    out = []
    for rec in records:
        same = matcher.match(rec)
        if same is not None and same != rec.key:
            out.append((rec.key, same))
        matcher.add(rec)
    return out
