"""Turn what a model replied into one PostgreSQL ``tsquery`` string, and de-duplicate queries.

Local models rarely answer with the bare query the prompt asks for: they add a preamble ("Here is
the query:"), wrap it in a code fence or quotes, write ``AND``/``OR``/``NOT`` instead of ``&``/``|``/
``!``, leave two words side by side without an operator, or forget a parenthesis. Each of those
makes ``to_tsquery`` fail or makes two equal queries look different. Cleaning repairs them at the
token level and re-spaces the result canonically, so ``a & b`` and ``A&b`` clean to strings that
differ only in case, and :func:`deduplicate_queries` (case-insensitive, first spelling kept) treats
them as one query. Cleaning never invents search terms: it only drops noise and fixes syntax.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_FENCE = re.compile(r"```[ \t]*[\w+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_TO_TSQUERY = re.compile(
    r"(?:to_tsquery|websearch_to_tsquery|plainto_tsquery)\s*\(\s*(?:'[a-z_]+'\s*,\s*)?'((?:[^']|'')*)'\s*\)",
    re.IGNORECASE,
)
_LABEL = re.compile(
    r"^\s*(?:[-*•>]+\s*|\d+[.)]\s*)?(?:\*\*)?\s*"
    r"(?:(?:final\s+|postgresql\s+|full[- ]text\s+|search\s+|ts)?(?:query|tsquery|answer|output)"
    r"(?:\s*\d+)?)?\s*(?:\*\*)?\s*[:=]?\s*(?:\*\*)?\s*",
    re.IGNORECASE,
)
_OPERATOR_HINT = re.compile(r"[&|]|<->|<\d+>|:\*|(?:^|[\s(])!\s*[\w(]|\b(?:AND|OR|NOT)\b")
_PREAMBLE_END = re.compile(r":\s*$")
_WORD_OPERATORS = {"and": "&", "or": "|", "not": "!"}
_MAX_BARE_WORDS = 6  # a reply line with more words and no operator is prose, not a query

# One token of a tsquery: an operator, a parenthesis, a quoted phrase or a term (optionally ``:*``).
_TOKEN = re.compile(
    r"""
    (?P<phrase>"[^"]*"|“[^”]*”)
    | (?P<follow><->|<\d+>)
    | (?P<andop>&&?)
    | (?P<orop>\|\|?)
    | (?P<notop>!)
    | (?P<lpar>[(\[{])
    | (?P<rpar>[)\]}])
    | (?P<term>[\w][\w\-.+/'’]*(?::\*?[ABCDabcd]*\*?)?)
    | (?P<skip>.)
    """,
    re.VERBOSE | re.UNICODE,
)


def extract_query_text(reply: str) -> str:
    """Pick the line of a model reply that holds the query (before token-level repair).

    Order of preference: a ``to_tsquery('...')`` call's argument, the first code fence's content,
    the first line that contains a tsquery operator, otherwise a single short line. A reply that is
    only prose (a refusal, an explanation) yields ``""``.
    """
    text = (reply or "").replace("\r\n", "\n").strip()
    if not text:
        return ""
    call = _TO_TSQUERY.search(text)
    if call:
        return call.group(1).replace("''", "'")
    fence = _FENCE.search(text)
    if fence and fence.group(1).strip():
        text = fence.group(1).strip()
    lines = [line.strip() for line in text.split("\n") if line.strip() and line.strip() != "```"]
    candidates = []
    for line in lines:
        if _PREAMBLE_END.search(line) and not _OPERATOR_HINT.search(line.rsplit(":", 1)[0]):
            continue  # "Here is the query:" — a preamble, the query follows
        stripped = _LABEL.sub("", line, count=1).strip().strip("`").strip()
        if stripped:
            candidates.append(stripped)
    for line in candidates:
        if _OPERATOR_HINT.search(line):
            return line
    if len(candidates) == 1 and len(candidates[0].split()) <= _MAX_BARE_WORDS:
        return candidates[0]
    # Several lines without operators: take a short one if the rest is prose around it.
    short = [c for c in candidates if len(c.split()) <= 3]
    return short[0] if len(short) == 1 else ""


def _tokens(text: str) -> list[tuple[str, str]]:
    """Split into ``(kind, value)`` tokens; kinds: term, and, or, not, follow, lpar, rpar."""
    out: list[tuple[str, str]] = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        value = match.group()
        if kind == "skip":
            continue
        if kind == "phrase":
            words = _terms_of(value.strip('"“”'))
            if not words:
                continue
            if len(words) > 1:
                out.append(("lpar", "("))
            for i, word in enumerate(words):
                if i:
                    out.append(("follow", "<->"))
                out.append(("term", word))
            if len(words) > 1:
                out.append(("rpar", ")"))
            continue
        if kind == "term":
            word_op = _WORD_OPERATORS.get(value.lower())
            if word_op is not None:
                out.append(({"&": "and", "|": "or", "!": "not"}[word_op], word_op))
                continue
            term = _clean_term(value)
            if term:
                out.append(("term", term))
            continue
        canonical = {"andop": ("and", "&"), "orop": ("or", "|"), "notop": ("not", "!"),
                     "lpar": ("lpar", "("), "rpar": ("rpar", ")")}.get(kind or "")
        out.append(canonical if canonical else ("follow", value))
    return out


def _terms_of(text: str) -> list[str]:
    words = []
    for match in _TOKEN.finditer(text):
        if match.lastgroup == "term":
            term = _clean_term(match.group())
            if term:
                words.append(term)
    return words


def _clean_term(value: str) -> str:
    """Drop possessives and stray punctuation that ``to_tsquery`` would reject."""
    weight = ""
    if ":" in value:
        value, weight = value.split(":", 1)
        weight = ":" + weight.upper().replace("*", "") + ("*" if "*" in weight else "")
        if weight == ":":
            weight = ""
    value = re.sub(r"['’]s$", "", value).replace("'", "").replace("’", "")
    value = value.strip("-.+/_")
    return f"{value}{weight}" if value else ""


def _repair(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Fix operator placement and parentheses so the token list is a valid tsquery."""
    binary = {"and", "or", "follow"}
    out: list[tuple[str, str]] = []
    depth = 0
    for kind, value in tokens:
        prev = out[-1][0] if out else None
        if kind in binary:
            if prev in (None, "lpar", "not") or prev in binary:
                continue  # nothing on its left, or a doubled operator: drop it
            out.append((kind, value))
        elif kind == "not":
            if prev in ("term", "rpar"):
                out.append(("and", "&"))  # "a NOT b" means a & !b
            if prev == "not":
                out.pop()  # "!!a" is a
                continue
            out.append((kind, value))
        elif kind == "lpar":
            if prev in ("term", "rpar"):
                out.append(("and", "&"))
            out.append((kind, value))
            depth += 1
        elif kind == "rpar":
            if depth == 0:
                continue  # unmatched
            while out and out[-1][0] in binary | {"not"}:
                out.pop()
            if out and out[-1][0] == "lpar":
                out.pop()  # "()" is nothing
                depth -= 1
                continue
            out.append((kind, value))
            depth -= 1
        else:  # term
            if prev in ("term", "rpar"):
                out.append(("and", "&"))  # two words side by side: both must match
            out.append((kind, value))
    while out and out[-1][0] in binary | {"not", "lpar"}:
        if out[-1][0] == "lpar":
            depth -= 1
        out.pop()
    out.extend([("rpar", ")")] * max(depth, 0))
    return _require_term(out)


def _require_term(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Operators and parentheses without a single term are no query."""
    return tokens if any(kind == "term" for kind, _ in tokens) else []


def _render(tokens: list[tuple[str, str]]) -> str:
    parts: list[str] = []
    for kind, value in tokens:
        if kind in ("and", "or", "follow"):
            parts.append(f" {value} ")
        else:
            parts.append(value)
    text = "".join(parts)
    return _strip_outer_parens(text.strip())


def _strip_outer_parens(text: str) -> str:
    """``(a | b)`` -> ``a | b`` when the outer pair encloses the whole query."""
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        text = text[1:-1].strip()
    return text


def clean_query(reply: str) -> str:
    """Clean one model reply into a canonical tsquery string (``""`` when there is no query in it)."""
    line = extract_query_text(reply)
    if not line:
        return ""
    line = line.strip().strip("`").strip()
    if len(line) >= 2 and line[0] == line[-1] and line[0] in "'\"":
        line = line[1:-1]
    return _render(_repair(_tokens(line)))


def query_key(query: str) -> str:
    """Identity used for de-duplication: case- and spacing-insensitive."""
    return re.sub(r"\s+", "", query).lower()


def deduplicate_queries(queries: Iterable[str]) -> list[str]:
    """Drop empty queries and repeats (case/spacing-insensitive), keeping each first spelling in order."""
    seen: set[str] = set()
    unique: list[str] = []
    for query in queries:
        text = (query or "").strip()
        if not text:
            continue
        key = query_key(text)
        if key in seen:
            continue
        seen.add(key)
        unique.append(text)
    return unique
