"""``structgen bench fuzz``: generated constraints against the engine's promises, case by case.

Each case (``structgen.bench.fuzz_cases``) runs in a supervised worker (``bench.watchdog``), so a
crash or a hang is recorded with the input that caused it, saved as a reproducer.  For each case:

1. it compiles within a time and memory bound, or raises a structgen error (anything else is a
   *foreign* exception);
2. random walks through the tokens its masks allow: every sampled allowed token is accepted, and at a
   few reachable states the mask is compared with brute force (``accept_token`` on every token of
   the vocabulary: equal);
3. every output a walk completes validates (``jsonschema`` with format assertion, ``re.fullmatch``,
   lark's own Earley parser, and where lark's lexer misses a longer match of a terminal, the
   language reference of ``lark_language``);
4. for schemas, each instance (a mutated MaskBench schema's own, and up to five that
   hypothesis-jsonschema draws for any schema) is classified as ``jsonschema`` classifies it
   under the schema (where jsonschema's verdict is a reference: see
   :func:`_jsonschema_can_judge`): a valid one must be accepted to its end, an invalid one refused.

Outcomes: ``ok``, ``refused`` (a structgen error at compile: an unsupported or invalid input said
clearly) and ``refused_late`` (a structgen error while matching, e.g. an ambiguity limit) are not
failures; ``foreign``, ``crash``, ``hang``, ``mask_mismatch``, ``accept_mismatch``, ``invalid_output``,
``valid_rejected`` and ``invalid_accepted`` are failures.  Results go to ``results.jsonl`` (the run
resumes from it), failures to ``reproducers/<id>.json``.
"""
from __future__ import annotations

import copy
import json
import random
import re
import time
import traceback
from pathlib import Path
from typing import Any

from .fuzz_cases import KINDS, load_maskbench_rows, make_case
from .maskbench import default_data_path

__all__ = ["run_fuzz", "check_case", "format_fuzz_table", "FAILURES"]

FAILURES = ("foreign", "crash", "hang", "mask_mismatch", "accept_mismatch", "invalid_output", "valid_rejected",
            "invalid_accepted")
COMPILE_TIMEOUT_S = 20.0
CASE_TIMEOUT_S = 90.0


class _Checker:
    """The worker's side: one tokenizer and compiler, one case at a time."""

    def __init__(self, tokenizer: str = "smollm2") -> None:
        from ..compiler import GrammarCompiler
        from ..tokenizer import load_tokenizer_info

        self.info = load_tokenizer_info(tokenizer)
        self.compiler = GrammarCompiler(self.info, cache_size=4, compile_timeout=COMPILE_TIMEOUT_S,
                                        compile_max_memory=2 << 30)
        self.eos = set(self.info.eos_ids)

    def __call__(self, case: dict) -> dict:
        try:
            return check_case(case, self)
        except Exception:  # noqa: BLE001 - a foreign exception is a finding, with its traceback
            return {"status": "foreign", "detail": traceback.format_exc()[-2000:]}


class _Factory:
    """Picklable worker factory."""

    def __init__(self, tokenizer: str) -> None:
        self.tokenizer = tokenizer

    def __call__(self):
        checker = _Checker(self.tokenizer)
        return checker, {"vocab": checker.info.vocab_size}


def _compile(case: dict, checker: _Checker):
    kind, src = case["kind"], case["source"]
    c = checker.compiler
    if kind.startswith("schema"):
        return c.compile_json_schema(src, property_order="any")
    if kind == "regex":
        return c.compile_regex(src)
    return c.compile_lark(src)


def _validator(case: dict, grammar):
    """A function output bytes -> error text (None when valid)."""
    kind, src = case["kind"], case["source"]
    if kind.startswith("schema"):
        import jsonschema

        v = grammar.validator
        if v is None:
            cls = jsonschema.validators.validator_for(src)
            v = cls(src, format_checker=cls.FORMAT_CHECKER)

        exact: list = []

        def check(out: bytes) -> str | None:
            try:
                value = json.loads(out.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                return f"not JSON: {e}"
            err = next(iter(v.iter_errors(value)), None)
            if err is None:
                return None
            # Python floats round JSON numbers (353665185143435180477.0 is a multiple of 7, its float is
            # not): ask again with every number exact, schema and output both read with Decimal
            from decimal import Decimal

            try:
                if not exact:
                    doc = json.loads(json.dumps(src), parse_float=Decimal)
                    cls = jsonschema.validators.validator_for(doc)
                    exact.append(cls(doc, format_checker=cls.FORMAT_CHECKER))
                def number(text: str):  # exact, and integral values as ints (1.0 is an integer in JSON Schema)
                    d = Decimal(text)
                    return int(d) if d.is_finite() and d == d.to_integral_value() else d

                if exact[0].is_valid(json.loads(out.decode("utf-8"), parse_float=number)):
                    return None
            except Exception:  # noqa: BLE001 - no exact verdict to be had: the float one stands
                pass
            return f"{err.message} at {list(err.path)}"
        return check
    if kind == "regex":
        import re

        if "\\p" in src or "\\P" in src:
            # ECMA-262's Unicode properties, which Python's re lacks: the `regex` package reads them
            # (its own tables: an oracle independent of structgen's rewrite)
            try:
                import regex as re  # noqa: F811
            except ImportError:  # pragma: no cover - transformers brings it
                from ..grammar.regex import python_regex

                src = python_regex(src)
        rx = re.compile(src)
        classes = _UNICODE_CLASS.search(src) is not None

        def check(out: bytes) -> str | None:
            try:
                text = out.decode("utf-8")
            except UnicodeDecodeError as e:
                return f"not UTF-8: {e}"
            if classes and any(ord(c) > 127 or 0x1c <= ord(c) <= 0x1f for c in text):
                # Python's \d \w \s \b are Unicode, structgen's (ECMA-262's) ASCII, with Unicode
                # spaces for \s: re has no verdict on such text (as _jsonschema_can_judge says for schemas)
                return None
            return None if rx.fullmatch(text) else "no re.fullmatch"
        return check
    import lark

    from .lark_language import LanguageRecognizer

    # dynamic_complete: a regex terminal matches every string of its language (greedy or lazy), the
    # language semantics structgen gives terminals (lark's "dynamic" lexer takes one match per position)
    parser = lark.Lark(src, parser="earley", lexer="dynamic_complete", start="start")

    language = LanguageRecognizer(parser)

    def check(out: bytes) -> str | None:
        try:
            text = out.decode("utf-8")
            parser.parse(text)
            return None
        except UnicodeDecodeError as e:
            return f"not UTF-8: {e}"
        except lark.exceptions.LarkError as e:
            # lark's lexer tries one regex match per position (and its prefixes): a text whose lexeme
            # is a longer match of a terminal is in the language all the same (``lark_language``)
            if language.accepts(text):
                return None
            return f"lark refuses it, and it is not in the grammar's language: {str(e)[:200]}"
        except Exception:  # noqa: BLE001 - lark's own internal error ("please report this bug"): no verdict
            return None
    return check


def mask_ids(m, vocab: int):
    """The token ids ``m``'s mask allows."""
    import numpy as np

    words = np.ascontiguousarray(m.next_token_mask(), dtype=np.uint32)
    return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab])


def _brute_force(m, info) -> set[int]:
    out = set()
    for t in range(info.vocab_size):
        if m.accept_token(t):
            out.add(t)
            m.rollback(1)
    return out


def _leads_into_dead_end(m, info, t: int) -> bool:
    """After token ``t`` nothing is accepted and the output may not end (the mask leaves such tokens
    out: ``structgen.engine.exact_masks.dead_after``)."""
    if not m.accept_token(t):
        return False
    try:
        return not m.is_accepting() and not _brute_force(m, info)
    finally:
        m.rollback(1)


def check_case(case: dict, checker: _Checker) -> dict:
    """The checks of the module docstring on one case."""
    from ..errors import StructgenError

    t0 = time.perf_counter()
    try:
        grammar = _compile(case, checker)
    except StructgenError as e:
        return {"status": "refused", "detail": f"{type(e).__name__}: {str(e)[:300]}",
                "seconds": time.perf_counter() - t0}
    validate = _validator(case, grammar)
    try:
        return _walks_and_instances(case, checker, grammar, validate, t0)
    except StructgenError as e:  # a clear error while matching (e.g. an ambiguity limit): said, not silent
        return {"status": "refused_late", "detail": f"{type(e).__name__}: {str(e)[:300]}",
                "seconds": time.perf_counter() - t0}


def _walks_and_instances(case: dict, checker: _Checker, grammar, validate, t0: float) -> dict:
    from ..engine.matcher import Matcher

    rng = random.Random(case["id"])
    info, eos = checker.info, checker.eos
    stats = {"walks": 0, "completed": 0, "brute_forced": 0, "steps": 0}
    for walk in range(3):
        m = Matcher(grammar)
        stats["walks"] += 1
        out = bytearray()
        for step in range(48):
            allowed = mask_ids(m, info.vocab_size)
            if walk == 0 and step in (0, 3) or (walk == 1 and step == 7):
                brute = _brute_force(m, info)
                stats["brute_forced"] += 1
                masked = set(int(t) for t in allowed)
                extra, missing = brute - masked, masked - brute
                extra = {t for t in extra if not _leads_into_dead_end(m, info, t)}  # the mask's lookahead
                if extra or missing:
                    return {"status": "mask_mismatch", "detail": f"step {step} after {bytes(out)[-80:]!r}: accepted but "
                            f"masked out {sorted(extra)[:10]}, allowed but refused {sorted(missing)[:10]}", **stats}
            if not len(allowed):
                break
            stats["steps"] += 1
            ids = [int(t) for t in allowed]
            can_end = any(t in eos for t in ids)
            if can_end and (rng.random() < 0.15 + step / 60 or len(ids) == 1):
                err = validate(bytes(out))
                if err is not None:
                    return {"status": "invalid_output", "detail": f"{bytes(out)[:300]!r}: {err}", **stats}
                stats["completed"] += 1
                break
            pool = [t for t in ids if t not in eos] or ids
            candidates = rng.sample(pool, min(8, len(pool)))
            taken = None
            best = None
            for t in candidates:
                if t in eos:
                    continue
                if not m.accept_token(t):
                    return {"status": "accept_mismatch", "detail": f"token {t} ({info.token_bytes[t]!r}) allowed "
                            f"by the mask but refused after {bytes(out)[-80:]!r}", **stats}
                need = m.min_completion_bytes()
                m.rollback(1)
                if best is None or need < best[0]:
                    best = (need, t)
                if taken is None:
                    taken = t
            if taken is None:
                break
            t = best[1] if step > 16 and rng.random() < 0.7 else taken  # steer late walks towards the end
            m.accept_token(t)
            out += info.token_bytes[t]
    result = {"status": "ok", **stats}
    if case["kind"].startswith("schema"):
        drawn = hypothesis_instances(case["source"], seed=rng.randrange(1 << 32))
        result["hypothesis_instances"] = len(drawn)
        case = {**case, "instances": list(case.get("instances") or []) + drawn}
    if case.get("instances") and _jsonschema_can_judge(case["source"]):
        import jsonschema

        cls = jsonschema.validators.validator_for(case["source"])
        try:
            v = cls(case["source"], format_checker=cls.FORMAT_CHECKER)
        except Exception:  # noqa: BLE001 - a mutated schema jsonschema itself cannot use: nothing to compare
            v = None
        for data in case["instances"] if v is not None else []:
            spelled = positional_json(data)
            try:
                # judged as the value the text spells: a float's shortest digits written positionally are
                # another number (5.439717815225837e16 is 54397178152258368, a multiple of 7; the text
                # 54397178152258370 is not), and the engine reads the text
                valid = v.is_valid(json.loads(spelled))
            except Exception:  # noqa: BLE001 - e.g. a pattern Python's re cannot compile
                continue
            m = Matcher(grammar)
            text = spelled.encode("utf-8")
            took = m.accept_bytes(text) and m.is_accepting()
            if valid and not took:
                return {"status": "valid_rejected", "detail": f"{text[:300]!r}", **stats}
            if not valid and took:
                return {"status": "invalid_accepted", "detail": f"{text[:300]!r}", **stats}
        result["instances"] = len(case["instances"])
    result["seconds"] = time.perf_counter() - t0
    return result


def hypothesis_instances(schema: Any, *, seed: int, n: int = 5, budget_s: float = 5.0) -> list:
    """Up to ``n`` instances hypothesis-jsonschema draws for ``schema`` (seeded), or none when it cannot
    handle the schema or takes longer than ``budget_s`` (its time is not the engine's).  They are
    classified by jsonschema with the other instances: hypothesis-jsonschema means them to be valid."""
    import signal
    import threading

    try:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hseed
        from hypothesis_jsonschema import from_schema
    except ImportError:  # the dev extra is not installed: nothing drawn
        return []
    drawn: list = []

    class _OutOfTime(Exception):
        pass

    armed = [True]

    def _alarm(signum, frame):
        if armed[0]:
            raise _OutOfTime

    timed = threading.current_thread() is threading.main_thread()
    if timed:
        previous = signal.signal(signal.SIGALRM, _alarm)
        # past the budget the alarm fires again every 0.25 s: hypothesis may catch the first one (as the
        # example's failure, which it then replays), and a one-shot alarm would leave it running unbounded
        signal.setitimer(signal.ITIMER_REAL, budget_s, 0.25)
    try:
        try:
            @hseed(seed)
            @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
                      suppress_health_check=list(HealthCheck))
            # a copy: hypothesis-jsonschema rewrites the schema it is given in place (it merged a draft-04
            # $ref's ignored siblings into the reference, and jsonschema then judged the case by that)
            @given(from_schema(copy.deepcopy(schema)))
            def draw(value: Any) -> None:
                drawn.append(value)

            draw()
        finally:  # disarmed before anything else: a late alarm lands in the except below, not the caller
            armed[0] = False
            if timed:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except _OutOfTime:
        pass
    except Exception:  # noqa: BLE001 - hypothesis-jsonschema refuses or trips on the schema: no instances
        pass
    finally:
        if timed:
            signal.signal(signal.SIGALRM, previous)
    return drawn[:n]


def positional_json(value: Any) -> str:
    """``value`` as JSON with every number written positionally (``25647756318427548``, not
    ``2.5647756318427548e+16``): an instance is a value, and bounded numbers are generated in
    positional spelling by design (``structgen.grammar.numbers``), so the check asks whether the
    value can be written, not whether Python's float repr can."""
    from decimal import Decimal

    if isinstance(value, float):
        text = repr(value)
        return format(Decimal(text), "f") if "e" in text or "E" in text else text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {positional_json(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(positional_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


_UNICODE_CLASS = re.compile(r"(?<!\\)(?:\\\\)*\\[dDwWsSbB]")  # \d \w \s \b, not \\d


def _jsonschema_can_judge(schema: Any) -> bool:
    r"""Whether ``jsonschema``'s verdict on instances is a reference for this schema: not when it uses a
    ``format`` jsonschema cannot check here (it then passes anything, where structgen asserts the
    format) or a fractional ``multipleOf`` (jsonschema divides in floating point: 2000 is no multiple
    of 1e-09 for it; structgen's decimal arithmetic is exact), nor when a ``pattern`` or a
    ``patternProperties`` key uses ``\d``, ``\w``, ``\s`` or ``\b``: jsonschema runs Python's ``re``,
    whose classes are Unicode (``\d`` matches the Telugu digit four, ``\s`` the NEL control), where
    JSON Schema's ECMA-262 classes (structgen's) are ASCII, or Unicode spaces for ``\s``."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema) if isinstance(schema, dict) else None
    known = set(cls.FORMAT_CHECKER.checkers) if cls is not None else set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            f = node.get("format")
            if isinstance(f, str) and f not in known:
                return False
            mo = node.get("multipleOf")
            if isinstance(mo, (int, float)) and not isinstance(mo, bool) and mo != int(mo):
                return False
            pp = node.get("patternProperties")
            patterns = [node.get("pattern"), *(pp if isinstance(pp, dict) else ())]
            if any(isinstance(p, str) and _UNICODE_CLASS.search(p) for p in patterns):
                return False
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return True


def run_fuzz(*, n: int, seed: int = 0, kinds: tuple[str, ...] = KINDS, output: str | Path = "bench-out/fuzz",
             tokenizer: str = "smollm2", data: str | Path | None = None, timeout: float = CASE_TIMEOUT_S,
             progress: bool = True, in_process: bool = False) -> dict:
    """Run cases ``0..n-1`` of campaign ``seed`` (those already in ``results.jsonl`` are skipped)."""
    from tqdm import tqdm

    out = Path(output)
    (out / "reproducers").mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    done: dict[str, dict] = {}
    if results_path.exists():
        for line in results_path.read_text().splitlines():
            try:
                r = json.loads(line)
                done[r["id"]] = r
            except (ValueError, KeyError):
                continue
    rows = None
    if "schema-mutation" in kinds:
        path = Path(data) if data else default_data_path()
        rows = load_maskbench_rows(path) if path.exists() else None
    worker = None
    checker = None
    if in_process:
        checker = _Checker(tokenizer)
    else:
        from .watchdog import Worker

        worker = Worker(_Factory(tokenizer), mem_limit_gb=8, log_path=str(out / "worker.log"))
    bar = tqdm(total=n, desc="fuzz", disable=not progress, unit="case")
    counts: dict[str, int] = {}
    by_kind: dict[str, dict[str, int]] = {}
    try:
        with open(results_path, "a") as f:
            for i in range(n):
                case = make_case(seed, i, kinds, rows)
                r = done.get(case["id"])
                if r is None:
                    if checker is not None:
                        r = checker(case)
                    else:
                        call = worker.call(case, timeout)
                        if call.status == "ok":
                            r = call.value
                        elif call.status == "timeout":
                            r = {"status": "hang", "detail": call.error}
                        elif call.status == "crash":
                            r = {"status": "crash", "detail": call.error}
                        else:
                            r = {"status": "foreign", "detail": call.error}
                    r = {"id": case["id"], "kind": case["kind"], **r}
                    f.write(json.dumps(r) + "\n")
                    f.flush()
                    if r["status"] in FAILURES:
                        (out / "reproducers" / f"{case['id']}.json").write_text(json.dumps({**case, "result": r}, indent=1))
                counts[r["status"]] = counts.get(r["status"], 0) + 1
                k = by_kind.setdefault(r["kind"], {})
                k[r["status"]] = k.get(r["status"], 0) + 1
                bar.update(1)
                bar.set_postfix({s: c for s, c in counts.items() if s in FAILURES} or {"failures": 0})
    finally:
        bar.close()
        if worker is not None:
            worker.stop()
    summary = {"n": n, "seed": seed, "kinds": list(kinds), "counts": counts, "by_kind": by_kind,
               "failures": sum(c for s, c in counts.items() if s in FAILURES)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def format_fuzz_table(summary: dict) -> str:
    statuses = ["ok", "refused", "refused_late", *FAILURES]
    lines = ["| kind | cases | " + " | ".join(statuses) + " |", "|---|---:|" + "---:|" * len(statuses)]
    for kind, c in sorted(summary["by_kind"].items()):
        lines.append(f"| {kind} | {sum(c.values())} | " + " | ".join(str(c.get(s, 0)) for s in statuses) + " |")
    tot = summary["counts"]
    lines.append(f"| all | {sum(tot.values())} | " + " | ".join(str(tot.get(s, 0)) for s in statuses) + " |")
    lines.append(f"\nfailures: {summary['failures']}")
    return "\n".join(lines)
