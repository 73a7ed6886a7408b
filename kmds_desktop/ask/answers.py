"""Writing the answer: the synthesis prompt for an LLM, and extractive answers when there is none.

Records are numbered in the order of ``results`` so that ``[n]`` in any answer, LLM-written or
extractive, always means ``results[n-1]`` — the GUI turns each ``[n]`` into a link to that IRI.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kmds_desktop.ask.relevance import content_stems, workflow_label

#: Records the answer prompt carries at most: the best of them by relevance (a listing's too, where its
#: records' relevance was worked out; else taken in turn from each workflow, see :func:`prompt_records`).
#: Reading the prompt is what the answer's first token waits for (a 1.5B model on 2 cores reads about
#: 50 tokens a second), and each record costs 40-300 tokens: 7 records took 16 s before the first
#: token. Every record is still listed and citable in the view.
PROMPT_RECORDS = 3
#: Characters of each finding shown to the LLM, cut at the end of a sentence (the demo KB's findings
#: are 45-250 characters; a few KBs hold findings of 800-1,400 that would crowd out the others).
PROMPT_FINDING_CHARS = 300
#: Characters of findings the prompt carries in all: fewer records each get more of theirs (one record
#: of 800 characters cut to 300 lost what answered "why were some products dropped?"), while the
#: prompt stays as short as three cut findings.
PROMPT_FINDINGS_BUDGET = 900
#: Characters of each finding quoted in an extractive answer.
EXTRACT_CHARS = 240

#: A citation marker, ``[3]``; the group is the record's number as the view shows it.
CITATION = re.compile(r"\[(\d{1,6})\]")


def record_label(result: dict[str, Any], *, intent: bool = True) -> str:
    """Type, workflow(s), sequence number and intent of a record, as the reader sees it (the LLM's
    prompt leaves the intent out: it names a step of the workflow, not a fact, and costs tokens)."""
    parts = [str(result.get("obs_type") or result.get("category") or "observation")]
    parts.append(f"workflow {workflow_label(result)}")
    if result.get("finding_seq") is not None:
        parts.append(f"finding {result['finding_seq']}")
    if intent and result.get("intent"):
        parts.append(f"intent {result['intent']}")
    also = _also(result)
    if also:
        parts.append(f"also recorded as {also}")
    return ", ".join(parts)


def _also(result: dict[str, Any]) -> str:
    """The other places an identical finding was recorded (merged duplicates)."""
    places = []
    for copy in result.get("also") or []:
        where = copy.get("workflow_name") or "no workflow"
        seq = f" finding {copy['finding_seq']}" if copy.get("finding_seq") is not None else ""
        places.append(f"{where}{seq}")
    return "; ".join(places)


def prompt_records(results: Sequence[dict[str, Any]], limit: int = PROMPT_RECORDS) -> list[int]:
    """The record numbers (1-based, as the view numbers them) the answer prompt carries, ascending.

    At most ``limit``: the first by ``rank`` where the search ranked them with more than similarity
    (a question about results puts the records stating figures first; one about what was chosen puts
    the best of the model selection and of the modelling choice records first: by ``score``, the
    similarity alone, "which classifier was chosen?" gave the model three modelling choice records
    and not the statement of the selection); otherwise the most relevant by ``score`` (ties and
    unscored records in view order). A
    listing has no scores (it is every match, in order): where each record's ``relevance`` (its
    similarity to the question) is known, the most relevant by it, so "which model was selected and
    why" or "what did we find out about sex differences", routed as a listing of 11-14 records, still
    shows the model the records that answer it (taken in turn per workflow, the sex-differences record
    was left out for two weak ones of the other workflow), but the last place goes to the record with the
    largest share of the question's distinctive words (``word_share``) among the rest: a listing's
    records share its topic, so similarity alone gave "why were some penguins dropped from the body mass
    analysis?" three body mass records and not "Rows without sex (11) are dropped …"; otherwise in turn
    from each workflow in view order. The numbers stay the view's, so ``[n]`` in the answer is always
    ``results[n-1]``."""
    n = len(results)
    if n <= limit:
        return list(range(1, n + 1))
    key = _ranking_key(results)
    if key is not None:
        best = _best_first(results, key)
        if key == "relevance" and limit > 1 and any(r.get("word_share") for r in results):
            return sorted([*best[: limit - 1], _most_words(results, best[limit - 1:])])
        return sorted(best[:limit])
    groups: dict[str, list[int]] = {}
    for i, result in enumerate(results, start=1):
        groups.setdefault(workflow_label(result), []).append(i)
    queues = list(groups.values())
    picked: list[int] = []
    while len(picked) < limit:
        for queue in queues:
            if queue and len(picked) < limit:
                picked.append(queue.pop(0))
    return sorted(picked)


def prompt_records_said(results: Sequence[dict[str, Any]], given: Sequence[int]) -> str:
    """How the answer prompt's records were picked, for the note under the answer ("" when it carried
    every record): said, so a reader does not take the answer for a summary of every record, nor a record
    picked by its words for one picked by its meaning."""
    n, k = len(results), len(given)
    if k >= n:
        return ""
    key = _ranking_key(results)
    if key is None:
        return f"{k} of the {n} records, taken in turn from each workflow"
    if key == "relevance" and k > 1 and sorted(given) != sorted(_best_first(results, key)[:k]):
        return (f"the {k - 1} most relevant of the {n} records and the one holding most of the question's "
                "distinctive words")
    return f"the {k} most relevant of the {n} records"


def _ranking_key(results: Sequence[dict[str, Any]]) -> str | None:
    """What orders the records for the prompt: the search's ``rank`` (more than similarity), its
    ``score`` (similarity), a listing's ``relevance`` (similarity worked out for the prompt), or none."""
    for key in ("rank", "score", "relevance"):
        if any(isinstance(r.get(key), int | float) for r in results):
            return key
    return None


def _best_first(results: Sequence[dict[str, Any]], key: str) -> list[int]:
    """Every record number, best by ``key`` first (ties and records without it in view order)."""
    sign = 1.0 if key == "rank" else -1.0  # a rank is best when lowest, a similarity when highest

    def order(number: int) -> tuple[float, int]:
        value = results[number - 1].get(key)
        return (sign * float(value) if isinstance(value, int | float) else float("inf"), number)

    return sorted(range(1, len(results) + 1), key=order)


def _most_words(results: Sequence[dict[str, Any]], numbers: Sequence[int]) -> int:
    """Of ``numbers`` (best first), the record holding the largest share of the question's distinctive
    words (``word_share``); the first of them on a tie or where none holds any (``max`` keeps the first)."""
    return max(numbers, key=lambda number: float(results[number - 1].get("word_share") or 0.0))


_SENTENCE_STOP = re.compile(r"[.!?](?=\s|$)")


def prompt_finding(text: str, limit: int = PROMPT_FINDING_CHARS) -> str:
    """A finding on one line, cut to ``limit`` characters at the end of its last whole sentence that
    ends past a third of the limit; where none does (a long first sentence), at a word, with "…"."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    ends = [m.end() for m in _SENTENCE_STOP.finditer(cut)]
    if ends and ends[-1] >= limit // 3:
        return cut[: ends[-1]]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut[: limit - 1]).rstrip(" ,;:") + "…"


def synthesis_prompt(question: str, results: Sequence[dict[str, Any]],
                     given: Sequence[int] | None = None) -> str:
    """Ask for a concise answer that uses only the numbered records and cites them as [n].

    ``given``: the record numbers to carry (default :func:`prompt_records`), each finding cut by
    :func:`prompt_finding` to its share of :data:`PROMPT_FINDINGS_BUDGET` (at least
    :data:`PROMPT_FINDING_CHARS`). The instructions come first and are the same for every question, so a
    server's prompt cache keeps them; only the records and the question are read anew. "Use every record
    that bears on the question": without it the 1.5B model cited more than one record in 3 of 38 dev
    answers, also where it read several findings of a listing (with it, 10 of 38; answers citing an
    expected record 25 of 30 either way)."""
    numbers = prompt_records(results) if given is None else list(given)
    lines = [
        "Answer the question using ONLY the numbered records from a knowledge base of data-science "
        "observations below.",
        "Be concise (a few sentences or a short list). Use every record that bears on the question, and "
        "cite each record you use by its number in brackets, such as [2], right after the statement it "
        "supports. The records come from one or more workflows: when they come from more than one, group "
        "the answer by workflow and name each workflow. If the records do not answer the question, say so "
        "plainly. Do not invent facts or cite numbers that are not listed.",
        "",
        "Records:",
    ]
    each = max(PROMPT_FINDING_CHARS, PROMPT_FINDINGS_BUDGET // max(1, len(numbers)))
    for number in numbers:
        result = results[number - 1]
        lines.append(f"[{number}] ({record_label(result, intent=False)}) "
                     f"{prompt_finding(str(result.get('finding', '')), each)}")
    lines += ["", f"Question: {question}", "Answer:"]
    return "\n".join(lines)


def clean_citations(answer: str, n_results: int) -> str:
    """Drop citation markers that point at no record (``[7]`` when there are 5 results)."""
    def keep(match: re.Match[str]) -> str:
        n = int(match.group(1))
        return match.group(0) if 1 <= n <= n_results else ""

    return CITATION.sub(keep, answer).strip()


#: A marker with the spaces before it (dropped together). The look-behind starts a match only at the first
#: space of a run, so a long run of spaces before no marker is scanned once, not once per space.
_MARKER_WITH_SPACE = re.compile(r"(?<![ \t])[ \t]*\[(\d{1,6})\]")
#: A citation group that opens a sentence ("[3] Some quantities ...", "[2] and [3] indicate that two rows
#: ..."): it belongs to that sentence, and a verb that only reports the records ("states that") goes with it.
#: The group's spaces are possessive (``\s*+``): a marker before a long run of spaces took seconds otherwise.
_LEADING = re.compile(
    r"^((?:\[\d{1,6}\](?:\s*(?:,|and|&)(?=\s*\[))?\s*+)+)"
    r"(?:(?:also\s+)?(?:state|indicate|show|mention|say|note|report|confirm|suggest)s?\s+that\s+)?"
    r"[:;,\-\u2013\u2014]?\s*(\S.*)$", re.DOTALL | re.IGNORECASE)
#: Where one sentence ends and the next begins (the answer check and the citation repair split alike).
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
#: A list item's marker ("- ", "2. "): it numbers the list, it is neither a claim nor a figure.
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
#: A sentence with fewer words than this (a heading, "Workflow A:") is not a claim that needs a source.
CLAIM_WORDS = 4


def claim_words(text: str) -> int:
    """How many words a sentence states, its citation markers aside: a heading or a bare ``[1]``
    states little or nothing (see :data:`CLAIM_WORDS`)."""
    return len(re.findall(r"[A-Za-z]{2,}", CITATION.sub(" ", text)))


def _move_leading_citations(sentence: str) -> str:
    """``[3] Some quantities are not numbers.`` -> ``Some quantities are not numbers [3].``: a model
    that writes the citation first would otherwise seem to cite the sentence before it. A group of
    them and a reporting verb go together: ``[2] and [3] indicate that two rows were dropped.`` ->
    ``Two rows were dropped [2] [3].`` (moving ``[2]`` alone left "and [3] indicate that …"), and so does
    a colon or dash after them (``[1]: The data …``). Where
    the records are the subject (``[4] shows the largest gap.``) the sentence is cited as it stands."""
    match = _LEADING.match(sentence)
    if not match:
        return sentence
    marks = " ".join(f"[{n}]" for n in CITATION.findall(match.group(1)))
    rest = match.group(2).rstrip()
    if not CITATION.sub("", rest).strip(" .!?;:,-\u2013\u2014"):  # only markers ("[2] and [3].")
        return sentence
    if match.end(1) != match.start(2):  # a reporting verb or a colon went: the claim now opens the sentence
        rest = rest[:1].upper() + rest[1:]
    elif rest[:1].islower():  # the records are its subject ("[4] shows the largest gap."): it is cited
        return sentence
    return _with_citation(rest, marks)


def _attach_trailing_markers(sentences: list[str]) -> list[str]:
    """``Model A won. [1]`` -> ``Model A won [1].``: markers written after a sentence's full stop, with
    nothing after them, cite that sentence (the 1.5B model often ends an answer so, and the claim was
    counted as uncited)."""
    out: list[str] = []
    for sentence in sentences:
        if out and CITATION.search(sentence) and not CITATION.sub("", sentence).strip(" .!?;:,"):
            out[-1] = _with_citation(out[-1], " ".join(f"[{n}]" for n in CITATION.findall(sentence)))
        else:
            out.append(sentence)
    return out


#: An uncited claim is attributed to a record when at least this share of its content words (and
#: :data:`ATTRIBUTE_MIN_WORDS`) are the record's: a claim that restates a finding shares most of its
#: words with it, one the model made up shares few.
ATTRIBUTE_SHARE = 0.5
ATTRIBUTE_MIN_WORDS = 3


def _attribute(sentence: str, sources: Sequence[str]) -> int | None:
    """The record (1-based) an uncited claim restates, by shared content words, or None."""
    words = content_stems(CITATION.sub("", sentence))
    if len(words) < ATTRIBUTE_MIN_WORDS:
        return None
    best, best_shared = None, 0
    for number, source in enumerate(sources, start=1):
        shared = len(words & content_stems(source))
        if shared > best_shared:
            best, best_shared = number, shared
    if best is None or best_shared < ATTRIBUTE_MIN_WORDS or best_shared < ATTRIBUTE_SHARE * len(words):
        return None
    return best


def _with_citation(sentence: str, marks: str) -> str:
    """``Model A won.`` and ``[1]`` -> ``Model A won [1].``: the markers before the sentence's end."""
    body = sentence.rstrip()
    end = body[-1] if body[-1:] in ".!?;:" else ""
    body = body[:-1].rstrip() if end else body
    return f"{body} {marks}{end}"


def repair_citations(answer: str, n_results: int, sources: Sequence[str] | None = None,
                     given: Sequence[int] | None = None) -> tuple[str, str, int]:
    """An LLM's answer with its citations checked: ``(answer, note, uncited claims)``.

    Markers that point at no record are dropped; a citation that opens a sentence moves to that
    sentence's end; sentences that state something (``CLAIM_WORDS`` words or more) without a citation
    are counted. With ``sources`` (the records' texts, numbered as in the view), an uncited claim
    that restates one record (most of its content words are that record's) gets that record's
    citation, and the note says the app added it: a small model often writes the right facts without
    the markers. The note, added under the answer, says which records it drew on, and flags an
    answer that cites nothing or leaves claims uncited, so an uncited answer is never shown as if
    cited.

    ``given``: the record numbers the model was shown (the prompt carries the most relevant few, see
    :func:`prompt_records`); a marker for a record it never saw is dropped like one out of range
    (the model cannot have drawn on it), and only those records' words attribute uncited claims.
    """
    allowed = set(range(1, n_results + 1)) if given is None else {n for n in given if 1 <= n <= n_results}

    def keep(match: re.Match[str]) -> str:  # a dropped marker takes the space before it along
        return match.group(0) if int(match.group(1)) in allowed else ""

    markers = {int(n) for n in CITATION.findall(answer)}
    text = (_MARKER_WITH_SPACE.sub(keep, answer) if markers - allowed else answer).strip()
    # the records' texts the model saw, by number ("" for one it was not shown: never attributed)
    shown = [src if i in allowed else "" for i, src in enumerate(sources[:n_results], start=1)] \
        if sources else []
    lines_out: list[str] = []
    claims = uncited = 0
    added: list[int] = []
    for line in text.splitlines():
        prefix = LIST_ITEM.match(line)
        head = prefix.group(0) if prefix else ""
        sentences = _attach_trailing_markers(
            [_move_leading_citations(s) for s in SENTENCE_BREAK.split(line[len(head):]) if s])
        for i, sentence in enumerate(sentences):
            if claim_words(sentence) >= CLAIM_WORDS and not sentence.rstrip().endswith(":"):
                claims += 1
                if not CITATION.search(sentence):
                    number = _attribute(sentence, shown) if shown else None
                    if number is None:
                        uncited += 1
                    else:
                        sentences[i] = _with_citation(sentence, f"[{number}]")
                        added.append(number)
        lines_out.append(head + " ".join(sentences))
    repaired = "\n".join(lines_out).strip()
    cited = cited_numbers(repaired)
    if not cited:
        shown_marks = ", ".join(f"[{i}]" for i in sorted(allowed))
        note = ("The model cited no record, so nothing above is marked as coming from one"
                + (f"; it was given {shown_marks}." if allowed else "."))
    else:
        note = "Drawn from " + ", ".join(f"[{n}]" for n in cited) + "."
        if added:
            marks = ", ".join(f"[{n}]" for n in sorted(set(added)))
            note += (f" The app added {marks} where the model cited nothing: those statements restate "
                     "that record's words.")
        if uncited:
            note += f" {uncited} of {claims} statements cite no record."
    return repaired, note, uncited


_THINK_PAIR = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def strip_reasoning(answer: str) -> str:
    """Drop a reasoning model's ``<think>...</think>`` preamble: the user asked for the answer only.

    The pattern runs only up to the last ``</think>``: there every ``<think>`` has a closing tag
    after it, so each match ends at the next one and the scan is linear. Run over the whole text,
    it rescanned the rest of the reply from every unclosed ``<think>`` (quadratic: 8,000 of them
    took 5 s, a megabyte hours). An unclosed ``<think>`` stays as text, as before.
    """
    end = answer.lower().rfind("</think>")
    if end < 0:
        return answer.strip()
    end += len("</think>")
    return (_THINK_PAIR.sub("", answer[:end]) + answer[end:]).strip()


def cited_numbers(answer: str) -> list[int]:
    """The distinct record numbers an answer cites, in order of first use."""
    return list(dict.fromkeys(int(n) for n in CITATION.findall(answer)))


def _excerpt(text: str, limit: int = EXTRACT_CHARS) -> str:
    """The first sentence(s) of a finding, up to ``limit`` characters, Markdown flattened to one line."""
    flat = " ".join(re.sub(r"[#*_`>|]+", " ", text).split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    stop = max(cut.rfind(". "), cut.rfind("; "))
    return (cut[: stop + 1] if stop > limit // 2 else cut.rstrip() + "…").strip()


def extractive_answer(results: Sequence[dict[str, Any]], heading: str,
                      numbers: Sequence[int] | None = None) -> str:
    """The records themselves, grouped by workflow (named), each line saying the record's type and
    sequence number, with its ``[n]`` citation; a merged duplicate names its other places too.
    ``numbers``: the view's numbers of ``results`` when they are some of the view's records (default
    1, 2, ...)."""
    if not results:
        return f"{heading}\n\nNo matching observations were found in this knowledge base."
    groups: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, result in zip(numbers or range(1, len(results) + 1), results, strict=True):
        groups.setdefault(workflow_label(result), []).append((i, result))
    lines = [heading]
    for workflow, items in groups.items():
        lines += ["", f"Workflow {workflow}:" if workflow != "no workflow" else "Not linked to a workflow:"]
        for i, result in items:
            kind = str(result.get("obs_type") or result.get("category") or "Observation")
            seq = f" {result['finding_seq']}" if result.get("finding_seq") is not None else ""
            also = _also(result)
            also_text = f" (also recorded in {also})" if also else ""
            lines.append(f"- {kind}{seq}: {_excerpt(str(result.get('finding', '')))} [{i}]{also_text}")
    return "\n".join(lines)


def _records(n: int, listing: bool, total: int | None) -> str:
    if listing:
        if total is not None and total > n:
            return f"the first {n} of the {total} matching observations (raise the limit to see the rest)"
        if n <= 2:  # "all 2 matching" reads oddly: one, both, then all n
            return "the one matching observation" if n == 1 else "both matching observations"
        return f"all {n} matching observations"
    if total is not None and total > n:
        return f"the {n} most relevant of {total} relevant observations (raise the limit to see the rest)"
    return "the one relevant observation" if n == 1 else f"the {n} relevant observations"


def offline_heading(n: int, listing: bool = False, total: int | None = None) -> str:
    """Heading of an offline (extractive) answer: how many records, and which kind of answer."""
    order = "in workflow and sequence order" if listing else "best first, grouped by workflow"
    return (f"No LLM was used (offline mode): here {'is' if n == 1 else 'are'} "
            f"{_records(n, listing, total)}, {order}." if n else "No LLM was used (offline mode).")


def fallback_heading(n: int, listing: bool = False, total: int | None = None) -> str:
    """Heading of the extractive answer given when the LLM failed. Its reason is not repeated here: the
    window's line under the answer and the CLI's Fallback/Backend line say it, once (a dead server's
    message was shown three times: heading, route and status line)."""
    return (f"The LLM could not write an answer, so this is an extractive summary of "
            f"{_records(n, listing, total)}, grouped by workflow.")
