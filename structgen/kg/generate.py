"""``generate_sparql`` and ``generate_chain``: the two graph-constrained tasks on a model.

Both decode through the runtime's loop (``structgen.runtime.loop``) with a :class:`GraphMatcher`:
the grammar of the output format AND the graph's tracker.  The prompt is few-shot, its examples
drawn from the graph itself (so any graph works); the constraint, not the prompt, is what
guarantees a query that runs and facts that are true."""
from __future__ import annotations

import random
import re
import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..engine.matcher import Matcher
from ..errors import GenerationError
from ..shipped import grammar_file
from .chain_tracker import ChainTracker, chain_grammar
from .graph import KnowledgeGraph, KnowledgeGraphError
from .matcher import GraphMatcher
from .sparql_tracker import SparqlTracker
from .terms import Term

__all__ = ["SparqlResult", "ChainResult", "generate_sparql", "generate_chain", "sparql_matcher", "chain_matcher",
           "SPARQL_GRAMMAR", "FACT_PATTERN"]

SPARQL_GRAMMAR = grammar_file("sparql")  # package data: found the same way in a checkout and a wheel
_SPARQL_TRACKERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # graph -> its tracker
FACT_PATTERN = re.compile(r"\[([^\[\];\n]+); ([^\[\];\n]+); ([^\[\];\n]+)\]")


def _grammar_text() -> str:
    return SPARQL_GRAMMAR.read_text(encoding="utf-8")


@dataclass
class SparqlResult:
    """A generated query (``query``: the full text, PREFIX lines included; ``body``: what the model
    wrote), its rows on the graph (a bool for ASK) and the answer terms (the first variable's
    values)."""

    query: str
    body: str
    rows: list[dict[str, Term | None]] | bool
    answers: list[Term]
    generation: Any = None

    @property
    def answer_labels(self) -> list[str]:
        return [str(t.value) for t in self.answers]


@dataclass
class ChainResult:
    """A reasoning chain: ``facts`` (graph triples as Terms, in order), ``text``, and ``answer`` (the
    entity the last line names)."""

    text: str
    facts: list[tuple[Term, Term, Term]]
    answer: Term | None
    answer_label: str | None
    score: float = 0.0
    generation: Any = None
    beams: list["ChainResult"] = field(default_factory=list)


# -- matchers ---------------------------------------------------------------------------------------------
def _compiler(model_or_info):
    from ..compiler import compiler_for
    from ..compiler import GrammarCompiler

    if hasattr(model_or_info, "info"):
        return compiler_for(model_or_info)
    return GrammarCompiler(model_or_info)


def sparql_matcher(model_or_info: Any, kg: KnowledgeGraph, start: str = "query_body") -> GraphMatcher:
    """A matcher for a SPARQL query body (``SELECT``/``ASK`` ...; ``start="cued_query"``: after one
    space) whose triple patterns follow ``kg``."""
    grammar = _compiler(model_or_info).compile_lark(_grammar_text(), start=start)
    tracker = _SPARQL_TRACKERS.get(kg)
    if tracker is None:  # one per graph: its slot sets and masks serve every query
        tracker = _SPARQL_TRACKERS[kg] = SparqlTracker(kg.index, kg.prefixes)
    return GraphMatcher(Matcher(grammar), tracker)


def chain_matcher(model_or_info: Any, kg: KnowledgeGraph, start: Sequence[Any], max_hops: int = 3) -> GraphMatcher:
    """A matcher for a reasoning chain from the ``start`` entities (terms, SPARQL names or labels)."""
    ids = []
    for s in start:
        i = kg.term_id(s)
        if i is None:
            raise KnowledgeGraphError(f"start entity {s!r} is not in the graph {kg.name!r}")
        ids.append(i)
    tracker = ChainTracker(kg.index, ids)
    first = tracker.step(tracker.initial, ord("["))
    if not len(tracker.slot(first)):
        raise KnowledgeGraphError(f"no fact touches the start entities {list(start)!r} (names aside): "
                                  "a chain cannot begin")
    grammar = _compiler(model_or_info).compile_lark(chain_grammar(max_hops))
    return GraphMatcher(Matcher(grammar), tracker)


# -- prompts ------------------------------------------------------------------------------------------------
def _relations(kg: KnowledgeGraph) -> list[int]:
    ix = kg.index
    return [int(p) for p in ix.relations() if int(p) not in ix.label_relations and ix.sparql[int(p)]]


def _examples(kg: KnowledgeGraph, n: int, seed: int) -> list[tuple[int, int, int]]:
    """``n`` triples of distinct relations with entity objects, drawn from the graph (seeded)."""
    ix = kg.index
    rng = random.Random(seed)
    rels = _relations(kg)
    rng.shuffle(rels)
    out = []
    for p in rels:
        heads = ix.heads_of(p)
        s = int(heads[rng.randrange(len(heads))])
        objs = ix.objects_of(s, p)
        o = int(objs[rng.randrange(len(objs))])
        if ix.sparql[s] and ix.sparql[o]:
            out.append((s, p, o))
        if len(out) == n:
            break
    return out


def sparql_prompt(kg: KnowledgeGraph, question: str, *, shots: int = 3, seed: int = 0) -> str:
    ix = kg.index
    rels = ", ".join(ix.sparql[p] for p in _relations(kg)[:40])
    lines = [f"Write a SPARQL query over the knowledge graph {kg.name!r} that answers the question.",
             f"Relations: {rels}.", "Entities are written like the examples show.", ""]
    for s, p, o in _examples(kg, shots, seed):
        lines += [f"Question: What is the {ix.labels[p]} of {ix.labels[s]}?",
                  f"Query: SELECT ?x WHERE {{ {ix.sparql[s]} {ix.sparql[p]} ?x . }}", ""]
    lines += [f"Question: {question}", "Query:"]
    return "\n".join(lines)


def chain_prompt(kg: KnowledgeGraph, question: str, start_labels: list[str], *, seed: int = 0) -> str:
    ix = kg.index
    ex = _examples(kg, 2, seed)
    lines = ["Answer the question by reasoning over facts of a knowledge graph. Write each fact as "
             "[subject; relation; object], then a last line 'Answer: ' and the answer.", ""]
    for s, p, o in ex[:1]:
        lines += [f"Question: What is the {ix.labels[p]} of {ix.labels[s]}?", f"Entities: {ix.labels[s]}",
                  f"The graph says [{ix.labels[s]}; {ix.labels[p]}; {ix.labels[o]}].", f"Answer: {ix.labels[o]}", ""]
    lines += [f"Question: {question}", f"Entities: {', '.join(start_labels)}"]
    return "\n".join(lines)


# -- generation -------------------------------------------------------------------------------------------
def _decode(model, prompt_text: str, matcher: Any, *, max_tokens: int, temperature: float,
            seed: int | None):
    from ..runtime.budget import BudgetGuard
    from ..runtime.loop import generate_constrained

    return generate_constrained(model, model.encode(prompt_text), matcher, max_tokens=max_tokens,
                                temperature=temperature, seed=seed, budget_guard=BudgetGuard(matcher),
                                speculative=True)


def generate_sparql(model: Any, question: str, kg: KnowledgeGraph, *, max_tokens: int = 128,
                    temperature: float = 0.0, seed: int | None = None, shots: int = 3,
                    constrain: str = "graph") -> SparqlResult:
    """A SPARQL query answering ``question`` on ``kg``, executed there.

    ``constrain``: ``"graph"`` (default; the grammar and the graph: every concrete subject exists,
    every relation leaves it, every object is reached), ``"grammar"`` (syntax only) or ``"none"``
    (free text up to a line break: the benchmark's baseline).  Raises ``GenerationError`` when
    no query finishes within ``max_tokens``, and a constrained query that the graph refuses is a
    bug, raised as ``KnowledgeGraphError``."""
    from ..models import resolve_model

    model = resolve_model(model)
    prompt = sparql_prompt(kg, question, shots=shots)
    if constrain == "graph":
        matcher = sparql_matcher(model, kg, start="cued_query")
    elif constrain == "grammar":
        matcher = Matcher(_compiler(model).compile_lark(_grammar_text(), start="cued_query"))
    elif constrain == "none":  # the model's own text up to the line's end
        matcher = Matcher(_compiler(model).compile_regex(r"[^\n]{1,400}\n"))
    else:
        raise ValueError(f"constrain must be 'graph', 'grammar' or 'none', got {constrain!r}")
    gen = _decode(model, prompt, matcher, max_tokens=max_tokens, temperature=temperature, seed=seed)
    body = gen.text.strip()
    query = kg.prologue() + body
    try:
        rows = kg.query(query)
    except KnowledgeGraphError:
        if constrain != "none":
            raise
        rows = None
    answers: list[Term] = []
    if isinstance(rows, list):
        for r in rows:
            v = next(iter(r.values()), None) if r else None
            if v is not None and v not in answers:
                answers.append(v)
    return SparqlResult(query, body, rows if rows is not None else [], answers, gen)


def parse_chain(kg: KnowledgeGraph, text: str, *, strict: bool = True
                ) -> tuple[list[tuple[Term, Term, Term]], Term | None, str | None]:
    """The facts and the answer a chain's text states (labels mapped to graph terms); a fact naming
    a term the graph lacks raises ``KnowledgeGraphError``, or is left out when not ``strict``."""
    ix = kg.index
    facts = []
    for m in FACT_PATTERN.finditer(text):
        ids = [ix.by_label.get(x) for x in m.groups()]
        if None in ids:
            if not strict:
                continue
            raise KnowledgeGraphError(f"the fact {m.group(0)!r} names a term the graph lacks")
        facts.append(tuple(ix.terms[i] for i in ids))
    ans = text.rsplit("\nAnswer: ", 1)
    label = ans[1].strip() if len(ans) == 2 else None
    answer = ix.terms[ix.by_label[label]] if label in ix.by_label else None
    return facts, answer, label


def generate_chain(model: Any, question: str, kg: KnowledgeGraph, start: Sequence[Any], *, max_hops: int = 3,
                   beams: int = 1, max_tokens: int = 160, temperature: float = 0.0, seed: int | None = None,
                   constrain: str = "graph") -> ChainResult:
    """A reasoning chain for ``question`` from the ``start`` entities: free text, facts
    ``[subject; relation; object]`` that are triples of ``kg`` adjacent to the entities reached so far
    (1..``max_hops`` of them), and ``Answer: <a reached entity>``.

    ``beams`` > 1 runs beam search under the constraint (a beam's score sums the model's
    log-probabilities of its tokens) and returns the best finished beam, the others in ``.beams``.
    ``constrain="format"`` keeps the format only (the benchmark's baseline: facts may be false)."""
    from ..models import resolve_model

    if constrain not in ("graph", "format"):
        raise ValueError(f"constrain must be 'graph' or 'format', got {constrain!r}")
    model = resolve_model(model)
    ix = kg.index
    matcher = chain_matcher(model, kg, start, max_hops=max_hops)
    labels = [ix.labels[i] for i in sorted(matcher.tracker.initial[5])]  # the start entities
    if constrain == "format":
        matcher = matcher.base
    prompt = chain_prompt(kg, question, labels) + "\n"
    if beams <= 1:
        gen = _decode(model, prompt, matcher, max_tokens=max_tokens, temperature=temperature, seed=seed)
        facts, answer, label = parse_chain(kg, gen.text, strict=constrain == "graph")
        return ChainResult(gen.text, facts, answer, label, generation=gen)
    from .beam import beam_search

    found = beam_search(model, model.encode(prompt), matcher, beams=beams, max_tokens=max_tokens)
    if not found:
        raise GenerationError(f"no beam finished a chain within max_tokens={max_tokens}", reason="max_tokens")
    results = []
    for text, score in found:
        facts, answer, label = parse_chain(kg, text, strict=constrain == "graph")
        results.append(ChainResult(text, facts, answer, label, score))
    best = results[0]
    best.beams = results
    return best


def f1(pred: set, gold: set) -> float:
    """F1 of a predicted answer set against the gold one (1.0 when both are empty)."""
    if not pred and not gold:
        return 1.0
    tp = len(pred & gold)
    if tp == 0:
        return 0.0
    p, r = tp / len(pred), tp / len(gold)
    return 2 * p * r / (p + r)

