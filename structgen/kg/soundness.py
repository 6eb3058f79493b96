"""Independent checks of graph-constrained outputs, and random outputs to check.

The checks read an output without the tracker: a query is parsed by lark itself with
``grammars/sparql.lark``, run on the store, and every triple pattern with a concrete subject and
relation is asked of the store (``ASK``); a chain's facts are looked up one by one and its chain
property re-derived.  ``random_output`` draws a constrained output token by token, uniformly
among the allowed tokens (a random "model"), steering to the shortest completion past a soft
length -- the soundness experiment of ``docs/algorithms.md`` section 4."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from .generate import FACT_PATTERN, SPARQL_GRAMMAR
from .graph import KnowledgeGraph, KnowledgeGraphError

__all__ = ["random_output", "check_query", "check_chain"]


def random_output(matcher: Any, rng: np.random.Generator, *, soft_tokens: int = 40, max_tokens: int = 200) -> list[int]:
    """Token ids of one output the matcher accepts whole (EOS excluded); the matcher is reset."""
    eos = sorted(matcher.grammar.eos_ids)
    out: list[int] = []
    matcher.reset()
    for step in range(max_tokens):
        words = matcher.next_token_mask()
        ids = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[: matcher.vocab_size])
        if len(ids) == 0:
            raise KnowledgeGraphError(f"dead end after {matcher.output_bytes()!r}")
        ends = [t for t in ids.tolist() if t in eos]
        if ends and (step >= soft_tokens or rng.random() < 0.1):
            return out
        if step < soft_tokens:
            choice = int(rng.choice(ids))
        else:  # steer to the end: of a few candidates, the one leaving the shortest completion
            tb = matcher.grammar.tokenizer.token_bytes
            short = [t for t in ids.tolist() if len(tb[t]) == 1]  # punctuation that closes things
            cands = short + rng.choice(ids, size=min(32, len(ids)), replace=False).tolist()
            best, choice = None, cands[0]
            for t in cands:
                if t in eos or not matcher.accept_token(t):
                    continue
                need = matcher.min_completion_bytes()
                matcher.rollback(1)
                if best is None or need < best or (need == best and rng.random() < 0.3):
                    best, choice = need, t
        if choice in eos:
            return out
        if not matcher.accept_token(choice):
            raise KnowledgeGraphError(f"the matcher refused token {choice} its mask allowed")
        out.append(choice)
    raise KnowledgeGraphError(f"no end within {max_tokens} tokens: {matcher.output_bytes()!r}")


@lru_cache(maxsize=None)
def _parser():
    import lark

    return lark.Lark(SPARQL_GRAMMAR.read_text(encoding="utf-8"), start="query_body", parser="earley")


def _patterns(tree) -> list[list[str]]:
    """(subject, relation, object) texts of every triple pattern of a parsed query."""
    out = []
    for node in tree.iter_subtrees():
        if node.data != "triples":
            continue
        kids = [str(k) if not hasattr(k, "data") else k for k in node.children]
        subj, i = kids[0], 1
        while i < len(kids):
            rel, objs = kids[i], kids[i + 1]
            for o in objs.children:
                out.append([subj, rel, str(o)])
            i += 2
    return out


def check_query(kg: KnowledgeGraph, body: str) -> list[str]:
    """Problems of one generated query body (an empty list when it parses, runs and every
    concrete pattern exists in the graph)."""
    import lark

    try:
        tree = _parser().parse(body)
    except lark.exceptions.LarkError as e:
        return [f"does not parse: {e}"]
    try:
        kg.query(kg.prologue() + body)
    except KnowledgeGraphError as e:
        return [f"does not run: {e}"]
    problems = []
    for s, p, o in _patterns(tree):
        if s.startswith("?") or p.startswith("?"):
            if not p.startswith("?") and not kg.query(f"ASK {{ ?s {p} ?o . }}"):
                problems.append(f"relation {p} has no triple")
            continue
        pattern = f"{s} {p} {o}" if not o.startswith("?") else f"{s} {p} ?o"
        if not kg.query(f"ASK {{ {pattern} . }}"):
            problems.append(f"no triple matches {pattern}")
    return problems


def check_chain(kg: KnowledgeGraph, start: Sequence[Any], text: str) -> list[str]:
    """Problems of one generated chain: a fact that is not a triple, a fact that does not touch
    the entities reached before it, an answer that was not reached."""
    ix = kg.index
    reached = {kg.term_id(s) for s in start}
    problems = []
    facts = FACT_PATTERN.findall(text)
    if not facts:
        problems.append("no fact")
    for s, p, o in facts:
        ids = [ix.by_label.get(x) for x in (s, p, o)]
        if None in ids:
            problems.append(f"[{s}; {p}; {o}] names a term the graph lacks")
            continue
        if not ix.contains(*ids):
            problems.append(f"[{s}; {p}; {o}] is not a triple")
        if ids[0] not in reached and ids[2] not in reached:
            problems.append(f"[{s}; {p}; {o}] does not touch the chain")
        reached |= {ids[0], ids[2]}  # a literal value reached may be the answer
    if "\nAnswer: " not in text:
        problems.append("no answer line")
    else:
        label = text.rsplit("\nAnswer: ", 1)[1]
        if ix.by_label.get(label) not in reached:
            problems.append(f"answer {label!r} was not reached")
    return problems
