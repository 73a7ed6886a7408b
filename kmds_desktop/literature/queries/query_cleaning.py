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

from kmds_desktop.limits import too_long_reason

_FENCE = re.compile(r"```[ \t]*[\w+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_TO_TSQUERY = re.compile(
    r"(?:to_tsquery|websearch_to_tsquery|plainto_tsquery)\s*\(\s*(?:'[a-z_]+'\s*,\s*)?'", re.IGNORECASE)
#: The quoted argument after the call's opening quote, matched possessively (no backtracking).
_TSQUERY_ARGUMENT = re.compile(r"((?:[^']++|'')*+)'\s*\)")
_LABEL = re.compile(
    r"^\s*(?:[-*•>]+\s*|\d+[.)]\s*)?(?:\*\*)?\s*"
    r"(?:(?:final\s+|postgresql\s+|full[- ]text\s+|search\s+|ts)?(?:query|queries|tsquery|answer|output)"
    r"(?:\s*\d+)?)?\s*(?:\*\*)?\s*[:=]?\s*(?:\*\*)?\s*",
    re.IGNORECASE,
)
#: An attempt's label a model writes around its query ("(attempt 2)", "Attempt 2:", "Broader variant:"),
#: echoing the numbering or the hint of a later attempt: read as a label, never as query words (it
#: became "(attempt & 2) & ..." and the row read as if "(attempt 2)" were its name). Only with its
#: number or its colon: "variant" alone is a word a genetics query may use.
_ATTEMPT_LABEL = re.compile(
    r"^\s*(?:\(\s*attempt\s*#?\s*\d+\s*\)|attempt\s*#?\s*\d+\s*[:=.\-\u2013]"
    r"|(?:a\s+)?(?:broader|more\s+specific|narrower|specific)\s+variant\s*(?:\(\s*attempt\s*#?\s*\d+\s*\))?\s*:)"
    r"\s*[:=]?\s*",
    re.IGNORECASE,
)
_ATTEMPT_SUFFIX = re.compile(r"\s*\(\s*attempt\s*#?\s*\d+\s*\)\s*$", re.IGNORECASE)
#: The opening of the ``{"queries": ["...`` format, left when a reply was cut off (a model that ran to
#: its token limit) and so is no JSON to decode: the query is what follows it.
_JSON_OPENING = re.compile(r'^\s*\{\s*"quer(?:y|ies)"\s*:\s*\[?\s*"')
_FOLLOW_HINT = re.compile(r"<->|<\d+>")
_NOT_HINT = re.compile(r"(?:^|[\s(])!\s*[\w(]")
_WORD_OPERATOR_HINT = re.compile(r"\b(?:AND|OR|NOT)\b")
_POSSESSIVE = re.compile(r"['’]s$")
_WORD_OPERATOR_TOKENS = {"and": ("and", "&"), "or": ("or", "|"), "not": ("not", "!")}
_CANONICAL_TOKENS = {"andop": ("and", "&"), "orop": ("or", "|"), "notop": ("not", "!"),
                     "lpar": ("lpar", "("), "rpar": ("rpar", ")")}
_MAX_BARE_WORDS = 6  # a reply line with more words and no operator is prose, not a query
#: Lines of a reply looked at for the query (a model's reply has a handful).
MAX_REPLY_LINES = 1000
#: The longest query kept: far above any real one (a few hundred characters), and it bounds the
#: token-level repair of a hostile reply (thousands of nested parentheses) to a millisecond or two.
MAX_QUERY_CHARS = 1000
#: The longest distance ``<N>`` PostgreSQL accepts between two words of a phrase (MAXENTRYPOS).
MAX_PHRASE_DISTANCE = 16384
#: Characters of reply lines looked at for the query (after any ``<think>`` part): a query reply is
#: short, and this bounds the work on a hostile one.
MAX_SCAN_CHARS = 16 * 1024

# One token of a tsquery: an operator, a parenthesis, a quoted phrase or a term (optionally ``:*``).
_TOKEN = re.compile(
    r"""
    (?P<phrase>"[^"]*"|“[^“”]*”)
    | (?P<follow><->|<\d{1,6}>)
    | (?P<andop>&&?)
    | (?P<orop>\|\|?)
    | (?P<notop>!)
    | (?P<lpar>[(\[{])
    | (?P<rpar>[)\]}])
    | (?P<term>[\w][\w\-.+/'’]*(?::\*?[ABCDabcd]*\*?(?!\w))?)
    | (?P<skip>\s+|.)
    """,
    re.VERBOSE | re.UNICODE,
)


def extract_query_text(reply: str) -> str:
    """Pick the line of a model reply that holds the query (before token-level repair).

    Order of preference: a ``to_tsquery('...')`` call's argument, the first code fence's content,
    the first line that contains a tsquery operator, otherwise a single short line. A reply that is
    only prose (a refusal, an explanation) yields ``""``.
    """
    return _extract(reply)[0]


def _extract(reply: str) -> tuple[str, str | None]:
    """:func:`extract_query_text`, and why nothing was found when a limit was the cause.

    A reasoning model's ``<think>...</think>`` is dropped first. Then only the first
    :data:`MAX_REPLY_LINES` lines, and of those only :data:`MAX_SCAN_CHARS` characters, are looked
    at, and a line over :data:`MAX_QUERY_CHARS` is no candidate: the per-line patterns never run on
    more than a few kilobytes, whatever the reply holds.
    """
    text = (reply or "").strip()
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    end_of_thinking = text.rfind("</think>")
    if end_of_thinking >= 0:
        text = text[end_of_thinking + len("</think>"):].strip()
    if not text:
        return "", None
    argument = _tsquery_call_argument(text)
    if argument is not None:
        return argument, None
    opening = _JSON_OPENING.match(text)
    if opening:  # a cut-off JSON reply: its first string, up to its closing quote if it has one
        text = text[opening.end():].split('"', 1)[0].strip()
    fence = _FENCE.search(text)
    if fence and fence.group(1).strip():
        text = fence.group(1).strip()
    lines: list[str] = []
    budget = MAX_SCAN_CHARS
    limit_reason: str | None = None
    raw_lines = text.split("\n", MAX_REPLY_LINES)
    if len(raw_lines) > MAX_REPLY_LINES:
        limit_reason = f"no query in the first {MAX_REPLY_LINES:,} lines of the reply"
    for raw_line in raw_lines[:MAX_REPLY_LINES]:
        # a far longer line is passed over unstripped (stripping would copy it for nothing)
        line = raw_line if len(raw_line) > MAX_QUERY_CHARS + 64 else raw_line.strip()
        if len(line) > MAX_QUERY_CHARS:
            limit_reason = (f"the reply has lines too long to be a query ({len(line):,} characters; "
                            f"a query has at most {MAX_QUERY_CHARS:,})")
            continue
        budget -= len(line)
        if budget < 0:
            limit_reason = f"no query in the first {MAX_SCAN_CHARS:,} characters of the reply"
            break
        if line and line != "```":
            lines.append(line)
    candidates = []
    for line in lines:
        if line.endswith(":") and not _has_operator(line.rsplit(":", 1)[0]):
            continue  # "Here is the query:" — a preamble, the query follows
        # an attempt label before "Query:" ("(attempt 2) Query: ...") or after it ("Query (attempt 2): ...")
        stripped = _ATTEMPT_LABEL.sub("", line, count=1)
        stripped = _ATTEMPT_LABEL.sub("", _LABEL.sub("", stripped, count=1), count=1)
        stripped = _ATTEMPT_SUFFIX.sub("", stripped).strip().strip("`").strip()
        if stripped:
            candidates.append(stripped)
    for line in candidates:
        if _has_operator(line):
            return line, None
    if len(candidates) == 1 and len(candidates[0].split()) <= _MAX_BARE_WORDS:
        return candidates[0], None
    # Several lines without operators: take a short one if the rest is prose around it.
    short = [c for c in candidates if len(c.split()) <= 3]
    return (short[0], None) if len(short) == 1 else ("", limit_reason)


def _tsquery_call_argument(text: str) -> str | None:
    """The argument of the first ``to_tsquery('...')`` call in ``text``, or None.

    The call pattern runs only around the first few places where the word ``tsquery`` occurs
    (plain substring search), and the argument is read at most :data:`MAX_QUERY_CHARS` far, so a
    reply full of half-written calls costs no more than one without any.
    """
    pos = 0
    for _ in range(8):
        found = [i for i in (text.find("tsquery", pos), text.find("TSQUERY", pos)) if i >= 0]
        if not found:
            return None
        at = min(found)
        call = _TO_TSQUERY.search(text, max(0, at - len("websearch_to_")), at + 64)
        if call:
            argument = _TSQUERY_ARGUMENT.match(text, call.end(), call.end() + MAX_QUERY_CHARS + 16)
            return argument.group(1).replace("''", "'") if argument else None
        pos = at + 1
    return None


def _has_operator(line: str) -> bool:
    """Whether ``line`` holds a tsquery operator (``&``, ``|``, ``<->``, ``:*``, ``!``, AND/OR/NOT).

    Plain substring tests go first and each pattern runs only when its character is there, so a
    long line of prose or of one repeated character costs a few fast scans, not a regex
    alternation tried at every position.
    """
    if "&" in line or "|" in line or ":*" in line:
        return True
    if "<" in line and _FOLLOW_HINT.search(line):
        return True
    if "!" in line and _NOT_HINT.search(line):
        return True
    return ("AND" in line or "OR" in line or "NOT" in line) and bool(_WORD_OPERATOR_HINT.search(line))


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
            word_op = _WORD_OPERATOR_TOKENS.get(value.lower()) if len(value) <= 3 else None
            if word_op is not None:
                out.append(word_op)
                continue
            term = _clean_term(value)
            if term:
                out.append(("term", term))
            continue
        canonical = _CANONICAL_TOKENS.get(kind or "")
        if canonical is None and value != "<->" and int(value[1:-1]) > MAX_PHRASE_DISTANCE:
            value = f"<{MAX_PHRASE_DISTANCE}>"  # PostgreSQL refuses a longer distance; this one is "anywhere"
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
    if "'" in value or "’" in value:
        value = _POSSESSIVE.sub("", value).replace("'", "").replace("’", "")
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
    """``(a | b)`` -> ``a | b`` (and ``((a))`` -> ``a``) when outer pairs enclose the whole query.

    One pass pairs every parenthesis; the k outermost pairs go when the i-th ``(`` from the left
    closes at the i-th ``)`` from the right. Linear, where stripping one pair at a time and
    rescanning was quadratic in the nesting depth. (Rendered text has no space inside a parenthesis,
    so the pairs are adjacent to the ends.)
    """
    closing_of: dict[int, int] = {}
    open_at: list[int] = []
    for i, ch in enumerate(text):
        if ch == "(":
            open_at.append(i)
        elif ch == ")" and open_at:
            closing_of[open_at.pop()] = i
    k, last = 0, len(text) - 1
    while k < last - k and text[k] == "(" and closing_of.get(k) == last - k:
        k += 1
    return text[k : len(text) - k].strip() if k else text


def clean_query(reply: str) -> str:
    """Clean one model reply into a canonical tsquery string (``""`` when there is no query in it)."""
    return clean_query_with_reason(reply)[0]


def clean_query_with_reason(reply: str) -> tuple[str, str | None]:
    """The cleaned query and, when it is ``""`` because of a size limit, why (else None).

    Bounded: a reply over :data:`~kmds_desktop.limits.MAX_REPLY_CHARS` is refused before any
    parsing, only the first :data:`MAX_REPLY_LINES` lines are looked at, and a query line over
    :data:`MAX_QUERY_CHARS` is refused before the token-level repair.
    """
    too_long = too_long_reason(reply or "", "reply")
    if too_long:
        return "", too_long
    line, limit_reason = _extract(reply)
    if not line:
        return "", limit_reason
    line = line.strip().strip("`").strip()
    too_long = too_long_reason(line, "query in the reply", MAX_QUERY_CHARS)
    if too_long:
        return "", too_long
    if len(line) >= 2 and line[0] == line[-1] and line[0] in "'\"":
        line = line[1:-1]
    return _render(_repair(_tokens(line))), None


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
