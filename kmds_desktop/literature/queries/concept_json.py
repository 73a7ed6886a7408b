"""Models name concepts, the app writes the queries: an LLM's concept list compiled into tsqueries.

Why: a small model knows a librarian's thesaurus (synonyms, abbreviations, spelling variants, narrower
terms) and gets tsquery syntax wrong. Measured with Qwen2.5-Coder-1.5B on held-out CF questions, its
own tsqueries reached recall@100 0.18-0.21 against the built-in generator's 0.50: it ANDed every word
of the question, invented terms no paper uses, and adding its rows to the built-in's made the merged
search worse. So the model is asked only for ``{"concepts": [{"name": ..., "terms": [...]}]}`` and the
queries are written by the built-in strategy's own machinery (:mod:`.concept_blocks`):

- the blocks are the question's own concepts, found as ``builtin:keywords`` finds them (the
  question's words, the corpus's phrases, abbreviations and spellings): a model can add variants to a
  block, never remove the question's words or add a block of its own, so it cannot over-AND a query;
- each model term joins the block of the question's concept it shares a word stem with, as one more
  OR variant; a concept of the model's that matches none of the question's concepts (a broader or
  related idea) only widens the broad query;
- every term is checked against the corpus: a term no document has is dropped, an abbreviation whose
  documents mostly do not use the concept's long form is dropped (as the built-in checks the ones it
  finds), a term far more common than its concept is a broader term and goes to the broad query only,
  and each drop is said in the row's note, which the review table shows;
- the three queries are then :func:`~.concept_blocks.write_strategy`'s: precise (every block, blocks
  left out while too few documents match), medium (any k of the n blocks) and broad (every word and
  variant OR-ed, ranked by rarity); no prefixes (``word:*``), as the built-in writes none (the search
  vector stems words already).

Parsing is bounded: the reply is refused above :data:`~kmds_desktop.limits.MAX_REPLY_CHARS`, its
nesting is measured by one iterative scan before any decoding (never recursion on depth), and the
concepts, terms per concept and characters per term are capped.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

from kmds_desktop.limits import too_long_reason
from kmds_desktop.literature.queries.abstract_words import abstract_words
from kmds_desktop.literature.queries.concept_blocks import (
    _ABBREVIATION,
    ABBREVIATION_SHARE,
    Concept,
    CorpusLookups,
    term_operand,
    write_strategy,
)
from kmds_desktop.literature.queries.keyword_queries import BROAD_TERMS, KeywordQueryBuilder, content_words

#: The system prompt of the concept mode: static, so the server's prompt cache keeps it between
#: questions (the question comes last, in the user message). Its example is on a topic no judged
#: corpus asks about (a model copies examples).
CONCEPT_SYSTEM_PROMPT = """\
You help a librarian search the titles and abstracts of biomedical papers.
For a research question, list its main concepts (2 to 4: diseases, organisms, drugs, genes, proteins, \
cells, treatments, outcomes) and, for each concept, the words papers use for it: the question's own \
words first, then synonyms, abbreviations, other spellings and narrower terms (at most 5 terms).
Leave out words that are not a subject: effect, role, increase, patients, study, risk, level.
Terms are plain words or short phrases: no operators, no quotes, no explanations.

Reply with JSON only, in this form:
{"concepts": [{"name": "<concept>", "terms": ["<term>", "<term>"]}]}

Example
Question: Does aspirin reduce the risk of heart attack in diabetic patients?
{"concepts": [{"name": "aspirin", "terms": ["aspirin", "acetylsalicylic acid", "ASA"]}, \
{"name": "heart attack", "terms": ["heart attack", "myocardial infarction", "MI"]}, \
{"name": "diabetes", "terms": ["diabetes", "diabetic", "diabetes mellitus", "type 2 diabetes"]}]}
"""

#: The other way to ask (:data:`CONCEPT_REQUEST` ``"expansion"``), as a librarian uses a thesaurus:
#: the built-in's own concepts of the question are given, and the model lists other words for each
#: (static part first, the concepts and the question last). Measured on the dev split (8 CF and 8
#: SciFact questions, Qwen2.5-Coder-1.5B): it named 24 and 32 terms the corpora have, mostly generic
#: words ("element" for calcium, "fluid" for mucus, "attributes" for physical properties), and merged
#: with the built-in's rows CF recall@100 fell from 0.577 to 0.547 (SciFact 0.875 both; nDCG@10 rose,
#: 0.421 -> 0.455 and 0.631 -> 0.669). So it is not the default.
EXPANSION_SYSTEM_PROMPT = """\
You help a librarian search the titles and abstracts of biomedical papers.
You get a research question and its concepts. For EACH concept, list other words papers use for it: \
synonyms, abbreviations, other spellings, related technical terms, and narrower terms (at most 6 terms \
per concept, each term once). Use the concept exactly as given as its name.
Terms are plain words or short phrases: no operators, no quotes, no explanations.

Reply with JSON only, in this form:
{"concepts": [{"name": "<concept as given>", "terms": ["<term>", "<term>"]}]}

Example
Concepts: aspirin; heart attack; diabetic
Question: Does aspirin reduce the risk of heart attack in diabetic patients?
{"concepts": [{"name": "aspirin", "terms": ["acetylsalicylic acid", "ASA", "antiplatelet", "salicylate"]}, \
{"name": "heart attack", "terms": ["myocardial infarction", "MI", "acute coronary syndrome", "coronary"]}, \
{"name": "diabetic", "terms": ["diabetes", "diabetes mellitus", "type 2 diabetes", "hyperglycemia"]}]}
"""
#: How the model is asked: ``"question"`` (it names the question's concepts and their terms:
#: :data:`CONCEPT_SYSTEM_PROMPT`, the default) or ``"expansion"`` (it widens the built-in's concepts:
#: :data:`EXPANSION_SYSTEM_PROMPT`). ``bench/llm_quality.py --concept-request`` measures either.
CONCEPT_REQUEST = "question"
#: Concept names in an expansion request (the built-in's blocks; a longer question's rarest come first).
MAX_EXPANSION_CONCEPTS = 6

#: Concepts, terms per concept and characters per term read from a reply; the rest is ignored.
MAX_MODEL_CONCEPTS = 8
MAX_TERMS_PER_CONCEPT = 10
MAX_TERM_CHARS = 60
#: Words of one term (a longer "term" is a sentence, not a name).
MAX_TERM_WORDS = 4
#: Brackets deeper than this are not a concept list: the reply is refused before decoding.
MAX_JSON_DEPTH = 6
#: Model terms added to one block (each one widens every query the block is in).
MAX_MODEL_VARIANTS = 4
#: A term matching more than this many times its concept's documents (and more than
#: :data:`WIDER_MIN_DOCS`) is a broader term: it widens the broad query only.
VARIANT_WIDER = 5.0
WIDER_MIN_DOCS = 20

#: Terms per concept a schema-capable server may write. Why: at a low temperature and without a
#: repetition penalty (llama.cpp's default), Qwen2.5-Coder-1.5B repeated one term until the token
#: limit ("calcium ions", "calcium ions", ...): 78 s for a reply that kept one concept. With the
#: terms bounded the same request took 38 s and every concept was named (the expansion request on
#: the first CF dev question; the question request's concept lists then took 32-38 s, median).
SCHEMA_MAX_TERMS = 5

#: The reply a schema-capable server is held to. One bound only, on the terms: llama.cpp writes each
#: bound out as repeated optional grammar rules, and nested bounds (concepts x terms) made the grammar
#: large and the constrained decoding slow; the other caps are applied when the reply is read.
CONCEPT_SCHEMA: dict[str, Any] = {
    "title": "concepts",
    "type": "object",
    "properties": {
        "concepts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"},
                               "terms": {"type": "array", "items": {"type": "string"},
                                         "maxItems": SCHEMA_MAX_TERMS}},
                "required": ["name", "terms"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["concepts"],
    "additionalProperties": False,
}


def concept_prompt(question: str) -> str:
    """The user message: the question last, so everything before it is the same for every question."""
    return f"Question: {question.strip()}\nJSON:"


def expansion_prompt(question: str, concepts: list[str]) -> str:
    """The user message of an expansion request: the built-in's concepts, then the question last."""
    return f"Concepts: {'; '.join(concepts)}\nQuestion: {question.strip()}\nJSON:"


def expansion_schema(concepts: list[str]) -> dict[str, Any]:
    """:data:`CONCEPT_SCHEMA` with each name held to one of the given ``concepts`` (a schema-capable
    server then cannot rename a concept, so every term reaches the block it was asked for)."""
    schema = copy.deepcopy(CONCEPT_SCHEMA)
    if concepts:
        schema["properties"]["concepts"]["items"]["properties"]["name"]["enum"] = list(concepts)
    return schema


def concept_request(question: str, builder: KeywordQueryBuilder, system_prompt: str | None = None,
                    request: str | None = None) -> tuple[str, str, dict[str, Any]]:
    """``(system prompt, user message, schema)`` of one concept call, as :data:`CONCEPT_REQUEST`
    (or ``request``) says; ``system_prompt`` replaces the question mode's prompt (a caller's own)."""
    if (request or CONCEPT_REQUEST) != "expansion":
        return system_prompt or CONCEPT_SYSTEM_PROMPT, concept_prompt(question), CONCEPT_SCHEMA
    labels = list(dict.fromkeys(c.label for c in builder.plan(question).concepts))[:MAX_EXPANSION_CONCEPTS]
    return EXPANSION_SYSTEM_PROMPT, expansion_prompt(question, labels), expansion_schema(labels)


@dataclass
class ModelConcept:
    """One concept as the model named it: its name and the terms papers use for it."""

    name: str
    terms: list[str]


@dataclass
class CompiledQueries:
    """The three queries written from the model's concepts, a note per query, and what was dropped."""

    queries: list[str]
    notes: list[str]
    #: Terms the compiled queries use, as ``'term' (the question's concept)``.
    added: list[str] = field(default_factory=list)
    #: Terms left out, as ``'term' (why)``.
    dropped: list[str] = field(default_factory=list)
    #: Terms that only widen the broad query (broader terms, concepts not in the question).
    broad_only: list[str] = field(default_factory=list)
    #: Words of the model's abstract the broad query carries (:mod:`.abstract_words`).
    from_abstract: list[str] = field(default_factory=list)


class ConceptReplyError(ValueError):
    """The reply holds no concept list; the message says why in one line."""


# --------------------------------------------------------------------------- parsing

def json_depth_within(text: str, limit: int) -> bool:
    """True when no bracket in ``text`` (outside strings) nests deeper than ``limit``: one iterative
    pass, so a reply of a million ``[`` costs a loop, not the decoder's recursion."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return False
        elif char in "]}":
            depth = max(0, depth - 1)
    return True


def complete_prefix(text: str) -> str:
    """``text`` (JSON cut off mid-way) up to its last complete array element or closed bracket,
    with the brackets still open closed: ``{"concepts": [{"name": "a", "terms": ["x", "y`` ->
    ``{"concepts": [{"name": "a", "terms": ["x"]}]}``. One iterative pass; "" when nothing is
    complete. Strings are only cut after a whole element of an array (never after a key)."""
    stack: list[str] = []
    in_string = escaped = False
    string_in_array = False
    # where the best cut ends and the brackets open there: the text is built once, at the end (building
    # it at every element made a long cut-off reply quadratic: 2 MB took 17 s)
    best_end, best_open = -1, ""
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                if string_in_array:
                    best_end, best_open = index + 1, "".join(stack)
        elif char == '"':
            in_string = True
            string_in_array = bool(stack) and stack[-1] == "["
        elif char in "[{":
            stack.append(char)
            if len(stack) > MAX_JSON_DEPTH:
                return ""
        elif char in "]}":
            if not stack:
                break
            stack.pop()
            best_end, best_open = index + 1, "".join(stack)
            if not stack:
                break
    if best_end < 0:
        return ""
    return text[:best_end] + "".join("]" if b == "[" else "}" for b in reversed(best_open))


def _json_start(text: str) -> int:
    """Where the reply's JSON begins (a model may write a code fence or a sentence first), or -1."""
    positions = [p for p in (text.find("{"), text.find("[")) if p >= 0]
    return min(positions) if positions else -1


def parse_concepts(reply: str) -> list[ModelConcept]:
    """The concepts of a reply (``{"concepts": [...]}``, a bare list of them, or a list of plain
    strings); raises :class:`ConceptReplyError` with a one-line reason when there are none."""
    text = (reply or "").strip()
    if not text:
        raise ConceptReplyError("the reply was empty")
    too_long = too_long_reason(text)
    if too_long:
        raise ConceptReplyError(too_long)
    start = _json_start(text)
    if start < 0:
        raise ConceptReplyError(f"the reply is not JSON (it begins {text[:40]!r})")
    if not json_depth_within(text[start:], MAX_JSON_DEPTH):
        raise ConceptReplyError(f"the reply nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        data, _end = json.JSONDecoder().raw_decode(text[start:])
    except (ValueError, RecursionError) as err:
        # A reply cut off by the token limit (a model that lists terms until it is stopped): the
        # concepts and terms complete before the cut are read; nothing else is guessed.
        salvaged = complete_prefix(text[start:])
        try:
            data = json.loads(salvaged) if salvaged else None
        except (ValueError, RecursionError):
            data = None
        if data is None:
            raise ConceptReplyError(f"the reply is not valid JSON ({str(err).split(':')[0]})") from None
    if isinstance(data, dict):
        data = next((data[k] for k in ("concepts", "Concepts", "concept") if k in data), None)
    if not isinstance(data, list):
        raise ConceptReplyError('the reply has no "concepts" list')
    concepts: list[ModelConcept] = []
    for item in data[:MAX_MODEL_CONCEPTS * 2]:
        concept = _concept_of(item)
        if concept is not None:
            concepts.append(concept)
        if len(concepts) >= MAX_MODEL_CONCEPTS:
            break
    if not concepts:
        raise ConceptReplyError('the "concepts" list names no concept with a term')
    return concepts


def _text(value: Any) -> str:
    return " ".join(value.split())[:MAX_TERM_CHARS] if isinstance(value, str) else ""


def _concept_of(item: Any) -> ModelConcept | None:
    """One listed concept: an object with a name and terms (common other keys accepted), or a string."""
    if isinstance(item, str):
        name = _text(item)
        return ModelConcept(name, [name]) if name else None
    if not isinstance(item, dict):
        return None
    name = _text(item.get("name") or item.get("concept") or "")
    raw_terms: Any = next((item[k] for k in ("terms", "synonyms", "variants") if k in item), [])
    if isinstance(raw_terms, str):
        raw_terms = [raw_terms]
    if not isinstance(raw_terms, list):  # null, a number, an object: no terms (the name may still stand)
        raw_terms = []
    terms = [t for t in (_text(v) for v in raw_terms[:MAX_TERMS_PER_CONCEPT * 2]) if t]
    terms = list(dict.fromkeys(([name] if name else []) + terms))[:MAX_TERMS_PER_CONCEPT + 1]
    if not terms:
        return None
    return ModelConcept(name or terms[0], terms)


# --------------------------------------------------------------------------- compiling

_TERM_WORD = re.compile(r"[\w][\w\-]*")


def term_words(term: str) -> list[str]:
    """The words of a model term, operators and punctuation gone (``vaccin:*`` -> ``vaccin``,
    ``"heart attack"`` -> heart, attack); empty for a term longer than :data:`MAX_TERM_WORDS` words."""
    words = [w.strip("-_") for w in _TERM_WORD.findall(term.replace(":*", " ").replace("<->", " "))]
    words = [w for w in words if w]
    return words if len(words) <= MAX_TERM_WORDS else []


def compile_concepts(question: str, concepts: list[ModelConcept],
                     builder: KeywordQueryBuilder, abstract: str = "") -> CompiledQueries:
    """Write the three queries for ``question`` from the built-in's blocks widened by the model's
    ``concepts`` (see the module docstring). ``builder`` is the ``builtin:keywords`` builder of the
    same database: its plan of the question (cached) gives the blocks and the feedback words.
    ``abstract``: the model's hypothetical abstract, whose rarest words the corpus has widen the broad
    query (:mod:`.abstract_words`)."""
    plan = builder.plan(question)
    blocks: list[Concept] = copy.deepcopy(plan.concepts)
    database = builder.database
    counted = database is not None and builder._total() not in (None, 0)  # noqa: SLF001 - the builder's own cached counts
    lookups = CorpusLookups(database if counted else None)
    # the blocks' variants are stemmed as the model's terms are, so "Pulmonary function" meets the
    # neighbour variant "pulmonary <-> function" and is not added again (using up a model-term place)
    words = sorted({w for c in concepts for t in c.terms for w in term_words(t)}
                   | {w for b in blocks for w in b.label.split()}
                   | {w for b in blocks for v in b.variants for w in term_words(v.replace(" <-> ", " "))})
    found = lookups.stems(words) if counted else {}

    def stems_of(text_words: list[str]) -> set[str]:
        out: set[str] = set()
        for word in text_words:
            stem = found.get(word, word.lower()) if counted else word.lower()
            out.update(stem.split())
        return out

    block_stems = [stems_of(b.label.split()) for b in blocks]
    variant_stems = [[stems_of(term_words(v.replace(" <-> ", " "))) for v in b.variants] for b in blocks]
    added: list[str] = []
    dropped: list[str] = []
    broad_only: list[str] = []
    extra_broad: list[str] = []
    per_block: dict[int, int] = {}
    for concept in concepts:
        concept_stems = stems_of([w for t in concept.terms for w in term_words(t)])
        name_stems = stems_of(term_words(concept.name))
        named = [i for i, s in enumerate(block_stems) if name_stems and s == name_stems]
        overlap = [len(concept_stems & s) for s in block_stems]
        target = max(range(len(blocks)), key=lambda i: (overlap[i], -i)) if blocks else -1
        if named:
            # named as one of the question's concepts (an expansion reply names them so): its terms
            # join that block, even where another block shares more of their words ("scarring" of
            # "cirrhosis" went to "liver disease" by shared words)
            target = named[0]
        elif target < 0 or overlap[target] == 0:
            target = -1
        for term in concept.terms:
            words_of_term = term_words(term)
            term_stems = stems_of(words_of_term)
            if not words_of_term or not term_stems:
                dropped.append(f"'{term}' (only common words)")
                continue
            if target >= 0 and any(term_stems == s for s in variant_stems[target]):
                continue  # already a variant of its block (the question's own word, for one)
            if any(term_stems == s for group in variant_stems for s in group):
                continue  # another block's variant: it is in the queries already
            if target >= 0 and (term_stems < block_stems[target] or block_stems[target] < term_stems
                                or any(s and s < term_stems for s in variant_stems[target])):
                # a part of the question's concept (its words are in the broad row already) or a
                # narrower phrase containing it or one of its variants ("cystic fibrosis disease" for
                # "CF | cystic fibrosis": adds nothing to an OR): the built-in's rule too
                continue
            operand = " <-> ".join(term_operand(w) for w in words_of_term)
            matches = lookups.count(operand) if counted else None
            if counted and not matches:
                dropped.append(f"'{term}' (no document has it)")
                continue
            block = blocks[target] if target >= 0 else None
            if (counted and block is not None and len(words_of_term) == 1
                    and _ABBREVIATION.match(words_of_term[0])
                    and block.label.lower() != words_of_term[0].lower()):
                # as the built-in accepts an abbreviation: most documents using it use the long form
                together = lookups.count(f"{operand} & {block.variants[0]}")
                if together is None or together < ABBREVIATION_SHARE * (matches or 0):
                    dropped.append(f"'{term}' (most documents with it do not say '{block.label}')")
                    continue
            if block is None:
                if operand not in extra_broad:
                    extra_broad.append(operand)
                    broad_only.append(f"'{term}' (not a concept of the question)" if term == concept.name
                                      else f"'{term}' (of '{concept.name}', not a concept of the question)")
                continue
            wider = (counted and block.matches and (matches or 0) > VARIANT_WIDER * block.matches
                     and (matches or 0) > WIDER_MIN_DOCS)
            if wider or per_block.get(target, 0) >= MAX_MODEL_VARIANTS:
                if operand not in extra_broad:
                    extra_broad.append(operand)
                    why = (f"far more common than '{block.label}'" if wider
                           else f"'{block.label}' has {MAX_MODEL_VARIANTS} of the model's terms already")
                    broad_only.append(f"'{term}' ({why})")
                continue
            block.variants.append(operand)
            block.notes.append(f"'{term}': the model's term" + ("" if counted else
                                                                 " (not checked: no corpus counts)"))
            variant_stems[target].append(term_stems)
            per_block[target] = per_block.get(target, 0) + 1
            added.append(f"'{term}' ({block.label})")
    for index in per_block:
        blocks[index].matches = lookups.count(blocks[index].block) if counted else None
    from_abstract: list[str] = []
    if abstract and counted:
        stemmed = lookups.stems([w.lower() for w in content_words(question)])
        known = {part for stem in stemmed.values() for part in stem.split()}
        known |= {part for group in variant_stems for stems in group for part in stems}
        for word in abstract_words(abstract, known, lookups):  # words the queries lack
            if term_operand(word) not in extra_broad:
                extra_broad.append(term_operand(word))
                from_abstract.append(word)
    first = list(plan.feedback)
    broad_words = list(dict.fromkeys([*builder.terms(question)[:BROAD_TERMS], *extra_broad]))
    strategy = write_strategy(blocks, lookups, (lambda _query: list(first)) if counted else None,
                              broad_words, builder._flood_limit())  # noqa: SLF001 - the builder's own limit
    model_note = "the model's concepts: " + ("added " + ", ".join(added) if added
                                             else "no term beyond the question's own")
    if broad_only:
        model_note += " · broad query only: " + ", ".join(broad_only)
    if dropped:
        model_note += " · dropped: " + ", ".join(dropped)
    if from_abstract:
        model_note += " · broad query: words of its abstract " + ", ".join(f"'{w}'" for w in from_abstract)
    notes = [f"{note} · {model_note}" for note in strategy.notes]
    return CompiledQueries(strategy.queries, notes, added, dropped, broad_only, from_abstract)
