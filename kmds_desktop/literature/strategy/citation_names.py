"""Author names and citation keys in the forms reference managers read.

The databases hold authors as MEDLINE writes them (``"Jorgensen BA"``: surname, then initials
without dots), sometimes as ``"Last, First"`` or ``"First Last"``, and group authors as a plain
name (``"CF Study Group"``). RIS and BibTeX readers (Zotero, EndNote, JabRef, biber) split a
person's name at the comma, so exports write ``"Last, F. M."``; a group's name is kept whole (and
braced in BibTeX, so ``"Food and Drug Administration"`` is not read as two people).

Citation keys are plain ASCII because classic BibTeX and many LaTeX setups reject anything else:
``"Müller"`` becomes ``"Muller"`` (decomposed, accents dropped) with a small table for letters that
do not decompose (``ß``, ``ø``, ``ł``...).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

#: Words that mark a group author rather than a person.
_GROUP_WORDS = frozenset(
    """group groups consortium committee collaboration collaborative collaborators investigators
    study studies society association foundation trial trials network team council organization
    organisation institute institutes centre center program programme working panel board agency
    department ministry university hospital registry alliance initiative project""".split()
)
#: Lower-case name particles that belong to the surname ("van der Berg", "de la Cruz").
_PARTICLES = frozenset("van von der den de del della di da dos das du la le ter ten zu".split())
#: MEDLINE initials: one to four capitals of any script, a hyphen allowed between them ("JA", "J-P",
#: "Ł", "ŞÖ", Cyrillic "АВ"). ``[^\W\d_]`` is "a letter" in Python's Unicode ``re``; :func:`_is_initials`
#: adds "upper case", which ``re`` cannot say (an ASCII-only class flipped "Szumowski Ł" round).
_LETTERS = re.compile(r"^[^\W\d_](?:-?[^\W\d_]){0,3}$")
#: Letters that Unicode decomposition leaves as they are.
_ASCII_EXTRA = str.maketrans(
    {"ß": "ss", "ø": "o", "Ø": "O", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ł": "l", "Ł": "L",
     "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th", "Þ": "Th", "ı": "i", "ħ": "h", "Ħ": "H"}
)


@dataclass(frozen=True)
class AuthorName:
    """One author: a person (``family`` and ``given``) or a group (``group`` set, the others empty)."""

    family: str = ""
    given: str = ""
    group: str = ""

    @property
    def display(self) -> str:
        """``"Last, F. M."`` for a person (``"Last"`` without given names), the name for a group."""
        if self.group:
            return self.group
        return f"{self.family}, {self.given}" if self.given else self.family


def _is_initials(token: str) -> bool:
    """Whether ``token`` is MEDLINE initials: 1 to 4 upper-case letters of any script, hyphens between."""
    return bool(_LETTERS.match(token)) and all(ch.isupper() for ch in token if ch != "-")


def _dotted_initials(token: str) -> str:
    """``"BA"`` -> ``"B. A."``, ``"J-P"`` -> ``"J.-P."``, ``"ŁM"`` -> ``"Ł. M."``."""
    out = ""
    hyphen = False
    for ch in token:
        if ch == "-":
            hyphen = True
            continue
        out += f"-{ch}." if hyphen else (" " if out else "") + f"{ch}."
        hyphen = False
    return out


def _given(text: str) -> str:
    """Given names as written, except bare MEDLINE initials which get their dots."""
    text = text.strip()
    return _dotted_initials(text) if _is_initials(text) else text


def _is_group(tokens: list[str]) -> bool:
    words = {t.lower().strip(".,;:()") for t in tokens}
    return (
        bool(words & _GROUP_WORDS)
        or len(tokens) > 4
        or any(ch.isdigit() for ch in "".join(tokens))
        or bool(words & {"and", "&", "of", "for", "on", "the"})
    )


def parse_author(name: str) -> AuthorName:
    """Read one author string in any of the forms the importers store (see the module doc)."""
    name = " ".join(name.split())
    if not name:
        return AuthorName()
    tokens = name.split(" ")
    if "," in name and not _is_group(tokens):
        family, given = name.split(",", 1)
        return AuthorName(family=family.strip(), given=_given(given))
    if len(tokens) >= 2 and _is_initials(tokens[-1]):
        return AuthorName(family=" ".join(tokens[:-1]), given=_dotted_initials(tokens[-1]))
    if len(tokens) == 1 or _is_group(tokens):
        return AuthorName(group=name)
    # "First [Middle] [particles] Last": the surname starts at the first particle, else is the last word.
    start = next((i for i, t in enumerate(tokens[1:-1], start=1) if t in _PARTICLES), len(tokens) - 1)
    return AuthorName(family=" ".join(tokens[start:]), given=" ".join(tokens[:start]))


def to_ascii(text: str) -> str:
    """Transliterate to ASCII: accents dropped (``"Müller"`` -> ``"Muller"``), ``"ß"`` -> ``"ss"``."""
    decomposed = unicodedata.normalize("NFKD", text.translate(_ASCII_EXTRA))
    return decomposed.encode("ascii", "ignore").decode("ascii")


def key_stem(authors: list[str]) -> str:
    """The first author's surname (or group name) as letters and digits only, ``"anon"`` if none."""
    first = parse_author(authors[0]) if authors else AuthorName()
    name = first.family or first.group
    return re.sub(r"[^A-Za-z0-9]", "", to_ascii(name)) or "anon"
