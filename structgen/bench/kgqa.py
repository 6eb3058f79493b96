"""``structgen bench kgqa``: knowledge-graph question answering under three constraints, the
soundness experiment, and the scale of the graph index.

* ``soundness``: random constrained queries and chains (a random "model": uniform over the allowed
  tokens) -- parse, execute, every concrete pattern exists (ASK), every chain fact is a triple;
* ``sparql``: a seeded question set with gold answers made from the graph (one- and two-hop
  templates, several phrasings), each question answered by SmolLM2 writing SPARQL with no
  constraint, the grammar only, and the grammar and the graph: executable %, non-empty %, exact
  match and F1 of the answer set, seconds per question, mask time per token;
* ``chain``: the same questions as reasoning chains, with the format only and with the graph: facts
  that are triples %, well-formed chains %, answer accuracy;
* ``scale``: a seeded synthetic graph (10^6 triples, 10^5 entities by default): index time and
  memory, mask p50/p99 per token while writing entities and relations."""
from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..kg.graph import KnowledgeGraph, KnowledgeGraphError
from .report import format_text_table

__all__ = ["make_questions", "run_kgqa_bench"]

ONE_HOP = ("What is the {r} of {s}?", "Name the {r} of {s}.", "{s}: what is its {r}?")
TWO_HOP = ("What is the {r2} of the {r1} of {s}?", "Name the {r2} of the {r1} of {s}.")


def _relations(kg: KnowledgeGraph) -> list[int]:
    ix = kg.index
    skip = set(ix.label_relations)
    return [int(p) for p in ix.relations() if int(p) not in skip and not ix.terms[int(p)].value.endswith("#type")]


def make_questions(kg: KnowledgeGraph, n: int, seed: int = 0, two_hop_share: float = 0.4) -> list[dict]:
    """``n`` questions with gold answer sets (term values), one- and two-hop, seeded."""
    ix = kg.index
    rng = random.Random(seed)
    rels = _relations(kg)
    entity_rels = [p for p in rels if any(ix.terms[int(o)].kind == "iri" for o in ix.tails_of(p)[:50])]
    out, seen = [], set()
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        two = rng.random() < two_hop_share
        r1 = rng.choice(entity_rels if two else rels)
        heads = ix.heads_of(r1)
        s = int(heads[rng.randrange(len(heads))])
        mids = ix.objects_of(s, r1)
        if two:
            r2 = rng.choice(rels)
            gold = set()
            for m in mids.tolist():
                if ix.terms[m].kind == "iri":
                    gold |= {int(o) for o in ix.objects_of(m, r2)}
            text = rng.choice(TWO_HOP).format(r1=ix.labels[r1], r2=ix.labels[r2], s=ix.labels[s])
        else:
            gold = {int(o) for o in mids}
            text = rng.choice(ONE_HOP).format(r=ix.labels[r1], s=ix.labels[s])
        if not gold or len(gold) > 10 or text in seen:
            continue
        seen.add(text)
        out.append({"question": text, "start": ix.sparql[s], "hops": 2 if two else 1,
                    "gold": sorted(ix.terms[g].value for g in gold)})
    return out


# -- parts ------------------------------------------------------------------------------------------------
def soundness(kg: KnowledgeGraph, info, n: int, seed: int) -> dict:
    from tqdm import tqdm

    from ..kg.generate import chain_matcher, sparql_matcher
    from ..kg.soundness import check_chain, check_query, random_output

    rng = np.random.default_rng(seed)
    q_bad, c_bad, examples = 0, 0, []
    m = sparql_matcher(info, kg)
    t0 = time.perf_counter()
    for _ in tqdm(range(n), desc="random queries", leave=False):
        text = info.decode_bytes(random_output(m, rng)).decode("utf-8")
        problems = check_query(kg, text)
        if problems:
            q_bad += 1
            examples.append((text, problems))
    tq = time.perf_counter() - t0
    ix = kg.index
    subjects = ix.subjects()
    t0 = time.perf_counter()
    for _ in tqdm(range(n), desc="random chains", leave=False):
        while True:  # a random start a chain can begin from (a class with names only cannot)
            start = [ix.sparql[int(subjects[rng.integers(len(subjects))])]]
            try:
                cm = chain_matcher(info, kg, start, max_hops=3)
                break
            except KnowledgeGraphError:
                continue
        text = info.decode_bytes(random_output(cm, rng)).decode("utf-8")
        problems = check_chain(kg, start, text)
        if problems:
            c_bad += 1
            examples.append((text, problems))
    return {"queries": n, "queries_failing": q_bad, "chains": n, "chains_failing": c_bad,
            "query_seconds": tq, "chain_seconds": time.perf_counter() - t0, "examples": examples[:5]}


def _ask_all(questions: Sequence[dict], modes: Sequence[str], desc: str, answer, failed: dict) -> dict:
    """``answer(question, gold, mode)`` -> a record for each question and mode, timed; a question
    whose generation raises counts as ``failed`` (with the reason)."""
    from tqdm import tqdm

    rows = {m: [] for m in modes}
    for q in tqdm(questions, desc=desc):
        gold = set(q["gold"])
        for mode in modes:
            t0 = time.perf_counter()
            rec = {"question": q["question"]}
            try:
                rec.update(answer(q, gold, mode))
            except Exception as e:  # noqa: BLE001 - a failed question counts as failed, with its reason
                rec.update(failed, error=f"{type(e).__name__}: {e}")
            rec["seconds"] = time.perf_counter() - t0
            rows[mode].append(rec)
    return rows


def _mask_ms(gen) -> float:
    return 1000 * gen.mask_seconds / max(1, gen.steps)


def sparql_part(model, kg: KnowledgeGraph, questions: Sequence[dict], modes: Sequence[str]) -> dict:
    from ..kg.generate import f1, generate_sparql

    def answer(q: dict, gold: set, mode: str) -> dict:
        r = generate_sparql(model, q["question"], kg, constrain=mode)
        runs = True
        try:
            rows = kg.query(kg.prologue() + r.body)
        except KnowledgeGraphError:
            runs, rows = False, []
        pred = {a.value for a in r.answers}
        return dict(query=r.body, executable=runs, nonempty=bool(rows), em=pred == gold, f1=f1(pred, gold),
                    mask_ms_per_token=_mask_ms(r.generation), tokens=r.generation.num_tokens)

    return _ask_all(questions, modes, "sparql questions", answer,
                    dict(executable=False, nonempty=False, em=False, f1=0.0))


def chain_part(model, kg: KnowledgeGraph, questions: Sequence[dict], modes: Sequence[str]) -> dict:
    from ..kg.generate import FACT_PATTERN, generate_chain
    from ..kg.soundness import check_chain

    ix = kg.index

    def answer(q: dict, gold: set, mode: str) -> dict:
        r = generate_chain(model, q["question"], kg, [q["start"]], max_hops=q["hops"] + 1, constrain=mode)
        facts = FACT_PATTERN.findall(r.text)
        true = sum(1 for f in facts if None not in (ids := [ix.by_label.get(x) for x in f]) and ix.contains(*ids))
        return dict(text=r.text, facts=len(facts), true_facts=true,
                    well_formed=bool(facts) and check_chain(kg, [q["start"]], r.text) == [],
                    correct=r.answer is not None and r.answer.value in gold, mask_ms_per_token=_mask_ms(r.generation))

    return _ask_all(questions, modes, "chain questions", answer,
                    dict(facts=0, true_facts=0, well_formed=False, correct=False))


def _encoder():
    from ..models import load_default_tokenizer

    tok = load_default_tokenizer()
    return lambda text: tok.encode(text, add_special_tokens=False)


def _triple_mask_ms(m, encode, rows: np.ndarray, ix) -> np.ndarray:
    """Write each triple of ``rows`` as a query, token by token; the mask times (ms) inside the
    triple pattern (subject, relation, object)."""
    times = []
    for s, p, o in rows.tolist():
        text = f"SELECT ?x WHERE {{ {ix.sparql[s]} {ix.sparql[p]} {ix.sparql[o]} . }}"
        m.reset()
        for t in encode(text):
            st = m.state
            if st[0] == 1 and st[2] < 3:
                t1 = time.perf_counter()
                m.next_token_mask()
                times.append(time.perf_counter() - t1)
            if not m.accept_token(t):
                raise KnowledgeGraphError(f"a true triple was refused: {text}")
    return np.array(times) * 1000


def scale_part(info, n_triples: int, n_entities: int, seed: int, steps: int = 300) -> dict:
    """Index a synthetic graph and time the masks while ``steps`` of its triples are written."""
    import resource

    from ..kg.datasets import synthetic_graph
    from ..kg.generate import sparql_matcher
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    kg = KnowledgeGraph.from_text(synthetic_graph(n_triples, n_entities, seed=seed), format="ntriples",
                                  prefixes={"s": "http://structgen.dev/kg/synthetic/"}, name="synthetic", cache=False)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ix = kg.index
    index_s = time.perf_counter() - t0
    m = sparql_matcher(info, kg)
    encode = _encoder()
    rng = np.random.default_rng(seed)
    rows = ix.spo[rng.choice(ix.n_triples, size=min(steps, ix.n_triples), replace=False)]
    ms = _triple_mask_ms(m, encode, rows, ix)
    remote = _remote_scale(kg, info, encode, rows)
    return {"remote": remote, "triples": ix.n_triples, "entities": int(len(ix.subjects())), "load_seconds": load_s,
            "index_seconds": index_s, "index_mb": ix.nbytes / 2**20,
            "peak_rss_growth_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024,
            "mask_ms_p50": float(np.percentile(ms, 50)), "mask_ms_p99": float(np.percentile(ms, 99)),
            "mask_ms_max": float(ms.max()), "masks": len(ms), "slot_sets_built": m.tracker.slots.built}


def _remote_scale(kg: KnowledgeGraph, info, encode, rows: np.ndarray) -> dict:
    """The same triples written against the graph served over HTTP: masks and index queries."""
    from ..kg.generate import sparql_matcher
    from ..kg.serve import serve_graph

    ix = kg.index
    with serve_graph(kg) as server:
        remote = KnowledgeGraph.from_endpoint(server.url, prefixes=kg.prefixes, name="synthetic@endpoint")
        m = sparql_matcher(info, remote)
        t0 = time.perf_counter()
        ms = _triple_mask_ms(m, encode, rows, ix)
        return {"seconds": time.perf_counter() - t0, "index_queries": remote.index.queries,
                "queries_per_triple": remote.index.queries / max(1, len(rows)),
                "mask_ms_p50": float(np.percentile(ms, 50)), "mask_ms_p99": float(np.percentile(ms, 99)),
                "masks": len(ms)}


# -- the run ------------------------------------------------------------------------------------------------
def _mean(rows: list[dict], key: str) -> float:
    vals = [float(r.get(key, 0) or 0) for r in rows]
    return float(np.mean(vals)) if vals else float("nan")


def run_kgqa_bench(*, graph: str = "countries", parts: Sequence[str] = ("soundness", "sparql", "chain", "scale"),
                   questions: int = 300, limit: int | None = None, soundness_n: int = 1000,
                   scale_triples: int = 1_000_000, scale_entities: int = 100_000, seed: int = 0,
                   out_dir: str | Path = "bench-out/kgqa", model: Any = None) -> dict:
    from ..kg import load_kg
    from ..tokenizer import load_tokenizer_info

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kg = load_kg(graph)
    result: dict = {"graph": graph, "triples": kg.index.n_triples}
    qs = make_questions(kg, questions, seed)
    (out / "questions.json").write_text(json.dumps(qs, indent=1))
    asked = qs[:limit] if limit else qs
    result["questions"] = {"made": len(qs), "asked": len(asked), "two_hop": sum(q["hops"] == 2 for q in asked)}
    if "soundness" in parts:
        info = load_tokenizer_info("smollm2")
        s = soundness(kg, info, soundness_n, seed)
        result["soundness"] = s
        print(f"soundness: {s['queries'] - s['queries_failing']}/{s['queries']} random queries parse, run and "
              f"match the graph ({s['query_seconds']:.0f} s); {s['chains'] - s['chains_failing']}/{s['chains']} "
              f"random chains state only true, chained facts ({s['chain_seconds']:.0f} s)")
    if "sparql" in parts or "chain" in parts:
        from ..models import resolve_model

        model = resolve_model(model)
    if "sparql" in parts:
        rows = sparql_part(model, kg, asked, ("none", "grammar", "graph"))
        result["sparql"] = {m: {"executable": _mean(r, "executable"), "nonempty": _mean(r, "nonempty"),
                                "exact_match": _mean(r, "em"), "f1": _mean(r, "f1"),
                                "seconds_per_question": _mean(r, "seconds"),
                                "mask_ms_per_token": _mean(r, "mask_ms_per_token")} for m, r in rows.items()}
        (out / "sparql.json").write_text(json.dumps(rows, indent=1, default=str))
        head = ["constraint", "executable %", "non-empty %", "exact match %", "F1 %", "s/question", "mask ms/token"]
        table = [[m, f"{100 * v['executable']:.1f}", f"{100 * v['nonempty']:.1f}", f"{100 * v['exact_match']:.1f}",
                  f"{100 * v['f1']:.1f}", f"{v['seconds_per_question']:.2f}", f"{v['mask_ms_per_token']:.3f}"]
                 for m, v in result["sparql"].items()]
        print(format_text_table(head, table))
    if "chain" in parts:
        rows = chain_part(model, kg, asked, ("format", "graph"))
        summary = {}
        for m, r in rows.items():
            facts = sum(x["facts"] for x in r)
            summary[m] = {"true_facts": sum(x["true_facts"] for x in r) / max(1, facts), "facts": facts,
                          "well_formed": _mean(r, "well_formed"), "accuracy": _mean(r, "correct"),
                          "seconds_per_question": _mean(r, "seconds"), "mask_ms_per_token": _mean(r, "mask_ms_per_token")}
        result["chain"] = summary
        (out / "chains.json").write_text(json.dumps(rows, indent=1, default=str))
        head = ["constraint", "facts", "true facts %", "well-formed %", "accuracy %", "s/question", "mask ms/token"]
        print(format_text_table(head, [[m, str(v["facts"]), f"{100 * v['true_facts']:.1f}",
                                        f"{100 * v['well_formed']:.1f}", f"{100 * v['accuracy']:.1f}",
                                        f"{v['seconds_per_question']:.2f}", f"{v['mask_ms_per_token']:.3f}"]
                                       for m, v in summary.items()]))
    if "scale" in parts:
        info = load_tokenizer_info("smollm2")
        sc = scale_part(info, scale_triples, scale_entities, seed)
        result["scale"] = sc
        print(f"scale: {sc['triples']:,} triples, {sc['entities']:,} subjects: load {sc['load_seconds']:.1f} s, "
              f"index {sc['index_seconds']:.1f} s ({sc['index_mb']:.0f} MB arrays, peak RSS +{sc['peak_rss_growth_mb']:.0f} MB); "
              f"mask p50 {sc['mask_ms_p50']:.2f} ms, p99 {sc['mask_ms_p99']:.2f} ms over {sc['masks']} masks")
        r = sc["remote"]
        print(f"scale, over HTTP: {r['index_queries']} index queries ({r['queries_per_triple']:.1f} a triple written); "
              f"mask p50 {r['mask_ms_p50']:.2f} ms, p99 {r['mask_ms_p99']:.2f} ms over {r['masks']} masks")
    (out / "kgqa.json").write_text(json.dumps(result, indent=1, default=str))
    return result
