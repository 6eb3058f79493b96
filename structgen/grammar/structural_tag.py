"""Structural tags: free text with triggered segments, compiled to one :class:`GrammarIR`.

The spec follows XGrammar's structural-tag JSON format, so vLLM's STRUCTURAL_TAG requests can be
served: ``{"type": "structural_tag", "format": {...}}`` (format types ``const_string``,
``json_schema``, ``regex``, ``grammar`` (Lark), ``any_text``, ``sequence``, ``or``, ``tag``,
``triggered_tags``, ``tags_with_separator``, ``dispatch``, ``optional``, ``plus``, ``star``,
``repeat``), and the legacy ``{"structures": [{"begin", "schema", "end"}], "triggers": [...]}``.
A bare format object is accepted too.  Token-level formats (``token``, ``any_tokens``,
``token_triggered_tags``, ...), non-JSON ``style`` s, ``excludes`` of a JSON schema and
``max_tokens`` budgets are refused with :class:`UnsupportedFeature` naming the spec's JSON path.

**Free text.**  The engine's lexer is maximal munch (a lexeme ends where the next byte cannot extend
it), so free text cannot be a lexeme that simply stops before a trigger: it would swallow the
trigger's first bytes.  Instead free text and the string that ends it are *one* lexeme: ``F·t``
where ``F`` is every UTF-8 text containing none of the strings that may end it (the triggers, what
follows the free text, the spec's ``excludes``) and ``t`` one of those strings.  ``F·t`` reads
"text with no trigger inside, followed by a trigger", exactly; the rest of a tag's begin string
follows as a literal.  Free text at the end of the output is ``F`` itself (non-empty; "no text" is
an alternative in the rules, terminals never match the empty string).  A length budget
(``max_chars``, XGrammar's; ``max_bytes``, structgen's) bounds ``F``.  When the strings overlap so
that one ``F·t`` lexeme could be extended into another, longest-match reading would differ from the
language, and the spec is refused (``GrammarError``).

**Semantics** follow XGrammar's where the lexer allows: ``at_least_one`` makes the output open with
a tag (structgen's ``"text_before_first": true`` lets free text come first), ``stop_after_first``
ends the format after the first tag.  Two differences, both from reading the longest match: free
text and regex contents stop at the *first* occurrence of what follows them, and an ``or`` with an
alternative that begins with free text is refused.  ``any_text`` / ``triggered_tags`` /
``dispatch`` must be followed by a constant, a tag or the end of the output (or be a tag's content).

**Contents.**  A JSON Schema or Lark content is compiled by its own front end and embedded under a
unique prefix (:meth:`GrammarIR.embed`); a regex content, like free text, is merged with the string
that ends it (it stops at that string's first occurrence).  A JSON Schema needing checks at value
boundaries (``uniqueItems``, ``not`` ...) is refused unless ``lenient=True`` (the engine locates
values in the whole output, free text included, so those checks cannot run inside free text; the
caller validates the segments afterwards).
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GrammarError, SchemaError, StructgenError, UnsupportedFeature
from ..automata.fsa import DFA, concat_dfas, counted_repeat, difference, difference_literals, intersect, literal_dfa, union
from .ir import EPSILON, Alt, Expr, GrammarIR, Graph, Repeat, Seq, Sym, alt, seq

__all__ = ["StructuralTagOptions", "load_structural_tag", "spec_key", "structural_tag_to_ir", "tag_nodes",
           "FORMAT_TYPES"]

#: the format types compiled here
FORMAT_TYPES = ("const_string", "json_schema", "regex", "grammar", "any_text", "sequence", "or", "tag",
                "triggered_tags", "tags_with_separator", "dispatch", "optional", "plus", "star", "repeat")
#: XGrammar's formats over token ids: a byte-level grammar cannot express them
TOKEN_FORMATS = ("token", "exclude_token", "any_tokens", "token_triggered_tags", "token_dispatch")
_KEYS = {
    "const_string": {"value"},
    "json_schema": {"json_schema", "style", "any_order", "max_whitespace_cnt", "excludes"},
    "regex": {"pattern"},
    "grammar": {"grammar"},
    "any_text": {"excludes", "max_tokens", "max_chars", "max_bytes"},
    "sequence": {"elements"},
    "or": {"elements"},
    "tag": {"begin", "content", "end"},
    "triggered_tags": {"triggers", "tags", "at_least_one", "stop_after_first", "excludes", "max_chars", "max_bytes",
                       "text_before_first"},
    "tags_with_separator": {"tags", "separator", "at_least_one", "stop_after_first"},
    "dispatch": {"rules", "loop", "excludes"},
    "optional": {"content"},
    "plus": {"content"},
    "star": {"content"},
    "repeat": {"content", "min", "max"},
}


@dataclass(frozen=True)
class StructuralTagOptions:
    """How embedded JSON Schemas are compiled (``structgen.grammar.json_schema.SchemaOptions``);
    ``lenient``: schemas that need checks at value boundaries are compiled without them (validate
    the segments after generation)."""

    whitespace: str = "flexible"
    strict: bool = False
    lenient: bool = False
    #: generation policies (``SchemaOptions``): which members objects hold, integers without ``.0``
    members: str = "any"
    plain_integers: bool = False


@dataclass(frozen=True)
class _Piece:
    """A format compiled *together with what follows it* (continuation-passing: free text must
    swallow the string that ends it).  ``expr``: the whole language; ``lead``: when not None, that
    language as alternatives ``literal · rest`` (plus the empty output when ``empty``);
    ``free_start``: the language begins with free text."""

    expr: Expr
    lead: tuple[tuple[str, Expr], ...] | None
    empty: bool
    free_start: bool = False


#: the end of the output
_END = _Piece(EPSILON, (), True)
#: "the caller appends what follows" (unknown here)
_OPEN = _Piece(EPSILON, None, False)


# -- byte automata of free text ----------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _utf8_text() -> DFA:
    from .regex import compile_regex

    return compile_regex(r"(?s:.*)")


@functools.lru_cache(maxsize=None)
def _one_char() -> DFA:
    from .regex import compile_regex

    return compile_regex(r"(?s:.)")


@functools.lru_cache(maxsize=None)
def _one_byte() -> DFA:
    return DFA(np.array([[1], [-1]], dtype=np.int32), np.array([False, True]), np.zeros(256, dtype=np.int32), 0)


@functools.lru_cache(maxsize=256)
def _containing(strings: tuple[str, ...]) -> DFA:
    """UTF-8 texts containing one of ``strings``."""
    from .regex import compile_regex

    return compile_regex("(?:" + "|".join(re.escape(s) for s in strings) + ")", search=True)


def _minimal(lits) -> list[str]:
    """The strings of ``lits`` that no other of them begins (in first-seen order)."""
    uniq = list(dict.fromkeys(lits))
    return [m for m in uniq if not any(o != m and m.startswith(o) for o in uniq)]


def _prefix_free(dfa: DFA) -> bool:
    """No accepted string is a proper prefix of another (the automaton is trimmed)."""
    acc = np.nonzero(dfa.accept)[0]
    return not bool((dfa.trans[acc] >= 0).any())


# -- the IR's last symbols (for the content / end-string check) ---------------------------------
def _nullable(e: Expr, rules_nullable: set) -> bool:
    if isinstance(e, Sym):
        return e.name in rules_nullable
    if isinstance(e, Seq):
        return all(_nullable(i, rules_nullable) for i in e.items)
    if isinstance(e, Alt):
        return any(_nullable(i, rules_nullable) for i in e.items)
    if isinstance(e, Repeat):
        return e.lo == 0 or _nullable(e.item, rules_nullable)
    if isinstance(e, Graph):
        seen, todo = {e.start}, [e.start]
        while todo:
            s = todo.pop()
            if s in e.finals:
                return True
            for a, x, b in e.edges:
                if a == s and b not in seen and (x is None or _nullable(x, rules_nullable)):
                    seen.add(b)
                    todo.append(b)
        return False
    return False


def _last(e: Expr, nullable: set) -> set[str]:
    """Symbols that can be the last one of ``e``."""
    if isinstance(e, Sym):
        return {e.name}
    if isinstance(e, Seq):
        out: set[str] = set()
        for i in reversed(e.items):
            out |= _last(i, nullable)
            if not _nullable(i, nullable):
                break
        return out
    if isinstance(e, Alt):
        return set().union(*(_last(i, nullable) for i in e.items))
    if isinstance(e, Repeat):
        return _last(e.item, nullable) if e.hi != 0 else set()
    if isinstance(e, Graph):
        tail = set(e.finals)
        changed = True
        while changed:
            changed = False
            for a, x, b in e.edges:
                if b in tail and a not in tail and (x is None or _nullable(x, nullable)):
                    tail.add(a)
                    changed = True
        return set().union(*(_last(x, nullable) for a, x, b in e.edges if b in tail and x is not None))
    return set()


def _nullable_rules(ir: GrammarIR) -> set[str]:
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n, body in ir.rules.items():
            if n not in nullable and _nullable(body, nullable):
                nullable.add(n)
                changed = True
    return nullable


def _last_terminals(ir: GrammarIR, rule: str) -> set[str]:
    """The terminals whose lexeme can end a string of ``rule`` (parts of split terminals included)."""
    nullable = _nullable_rules(ir)
    out: set[str] = set()
    seen: set[str] = set()
    todo = [rule]
    while todo:
        r = todo.pop()
        for s in _last(ir.rules[r], nullable):
            if s in ir.rules:
                if s not in seen:
                    seen.add(s)
                    todo.append(s)
            elif s in ir.terminals:
                out.add(s)
    out |= {n for n, t in ir.terminals.items() if t.lexeme_of in out}
    return out


# -- spec input ----------------------------------------------------------------------------------
def load_structural_tag(spec: Any) -> dict:
    """The spec as a dict: a dict as is, JSON text parsed (``GrammarError`` when it is not JSON)."""
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise GrammarError(f"the structural tag is not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise GrammarError(f"a structural tag must be a JSON object, not {type(spec).__name__}")
    return spec


def _key_default(o: Any) -> Any:
    if isinstance(o, type) and hasattr(o, "model_json_schema"):
        return o.model_json_schema()
    return repr(o)


def spec_key(spec: dict) -> str:
    """A cache key for a loaded spec (Pydantic classes given as schemas by their JSON Schema)."""
    return json.dumps(spec, sort_keys=True, default=_key_default)


def tag_nodes(spec: Any) -> list[dict]:
    """Every tag of a spec, as ``{"begin", "end" (a list), "content"}`` (the legacy format's
    structures as tags with a ``json_schema`` content), in document order.  For reading outputs
    back (``structgen.structural_output``); the spec is assumed valid (compiled already)."""
    spec = load_structural_tag(spec)
    out: list[dict] = []
    if "structures" in spec:
        for s in spec.get("structures") or []:
            schema = s.get("schema")
            if isinstance(schema, str):
                schema = json.loads(schema)
            out.append({"begin": s["begin"], "end": [s["end"]],
                        "content": {"type": "json_schema", "json_schema": schema}})
        return out

    def walk(node: Any, is_tag: bool = False) -> None:
        if isinstance(node, dict):
            if is_tag or node.get("type") == "tag":
                end = node.get("end", "")
                out.append({"begin": node.get("begin", ""), "end": end if isinstance(end, list) else [end],
                            "content": node.get("content")})
            for k, v in node.items():
                if k in ("json_schema", "schema"):
                    continue
                walk(v, k == "tags")
        elif isinstance(node, list):
            for v in node:
                walk(v, is_tag)

    walk(spec.get("format", spec))
    return out


# -- the compiler ---------------------------------------------------------------------------------
class _Builder:
    def __init__(self, opts: StructuralTagOptions):
        self.opts = opts
        self.ir = GrammarIR(rules={}, terminals={}, start="start", source="structural-tag")
        self._terms: dict[tuple, Sym] = {}
        self._embedded: dict[tuple, str] = {}
        self._paths: dict[int, str] = {}  # node id -> its JSON path (the legacy format's nodes)
        self._schema_paths: dict[int, str] = {}
        self._n = 0
        self.where = ""

    # -- names --------------------------------------------------------------------------------
    def _name(self, hint: str) -> str:
        self._n += 1
        return f"st_{hint}{self._n}"

    def literal(self, text: str) -> Sym:
        key = ("lit", text)
        sym = self._terms.get(key)
        if sym is None:
            sym = self._terms[key] = self.ir.add_terminal(self._name("LIT"), literal_dfa(text.encode("utf-8")))
        return sym

    def terminal(self, dfa: DFA, hint: str) -> Sym:
        key = ("dfa", dfa.uid)
        sym = self._terms.get(key)
        if sym is None:
            sym = self._terms[key] = self.ir.add_terminal(self._name(hint), dfa)
        return sym

    def share(self, k: _Piece) -> _Piece:
        """``k`` with its expression behind one rule (a continuation several alternatives end with)."""
        if isinstance(k.expr, Sym) or k.expr == EPSILON:
            return k
        name = self._name("k")
        self.ir.rules[name] = k.expr
        return _Piece(Sym(name), k.lead, k.empty, k.free_start)

    # -- field access -------------------------------------------------------------------------
    @staticmethod
    def keys(node: dict, path: str, allowed: set[str]) -> None:
        for key in node:
            if key != "type" and key not in allowed:
                raise UnsupportedFeature(f"unknown field {key!r} (this format takes {sorted(allowed)})",
                                         pointer=f"{path}/{key}", keyword=key)

    @staticmethod
    def text(node: dict, key: str, path: str, *, default: Any = ..., nonempty: bool = False) -> str:
        if key not in node:
            if default is ...:
                raise GrammarError(f"{path}: missing field {key!r}")
            return default
        v = node[key]
        if not isinstance(v, str):
            raise GrammarError(f"{path}/{key}: expected a string, got {type(v).__name__}")
        if nonempty and not v:
            raise GrammarError(f"{path}/{key}: must not be empty")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise GrammarError(f"{path}/{key}: not encodable as UTF-8 ({e.reason})") from None
        return v

    def texts(self, node: dict, key: str, path: str, *, nonempty: bool = True) -> list[str]:
        v = node.get(key, [])
        if not isinstance(v, list):
            raise GrammarError(f"{path}/{key}: expected a list of strings, got {type(v).__name__}")
        return [self.text({str(i): s}, str(i), f"{path}/{key}", nonempty=nonempty) for i, s in enumerate(v)]

    @staticmethod
    def flag(node: dict, key: str, path: str, default: bool = False) -> bool:
        v = node.get(key, default)
        if not isinstance(v, bool):
            raise GrammarError(f"{path}/{key}: expected true or false, got {v!r}")
        return v

    @staticmethod
    def count(node: dict, key: str, path: str, *, minimum: int = 0) -> int | None:
        v = node.get(key)
        if v is None:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            raise GrammarError(f"{path}/{key}: expected an integer >= {minimum}, got {v!r}")
        return v

    @staticmethod
    def items(node: dict, key: str, path: str, *, nonempty: bool = True) -> list:
        if key not in node:
            raise GrammarError(f"{path}: missing field {key!r}")
        v = node[key]
        if not isinstance(v, list):
            raise GrammarError(f"{path}/{key}: expected a list, got {type(v).__name__}")
        if nonempty and not v:
            raise GrammarError(f"{path}/{key}: must not be empty")
        return v

    # -- free text --------------------------------------------------------------------------
    def free_body(self, node: dict, path: str) -> DFA:
        """Free text under ``node``'s ``excludes``, ``max_chars`` and ``max_bytes``."""
        if node.get("max_tokens") is not None:
            raise UnsupportedFeature("a budget in tokens cannot be enforced by a byte-level grammar; use "
                                     "max_chars or max_bytes", pointer=f"{path}/max_tokens", keyword="max_tokens")
        excludes = self.texts(node, "excludes", path)
        max_chars = self.count(node, "max_chars", path)
        max_bytes = self.count(node, "max_bytes", path)
        try:
            body = _utf8_text()
            if max_chars is not None:
                body = counted_repeat(_one_char(), 0, max_chars)
            if max_bytes is not None:
                body = intersect(body, counted_repeat(_one_byte(), 0, max_bytes))
            if excludes:
                body = difference(body, _containing(tuple(sorted(set(excludes)))))
        except GrammarError as e:
            raise GrammarError(f"{path}: free text budget too large to compile: {e}") from None
        return body

    def then(self, body: DFA, k: _Piece, path: str, what: str) -> _Piece:
        """``body`` (free text, or a regex content) followed by ``k``, each string of ``k.lead`` merged
        with the text before it into one lexeme (the text stops at its first occurrence)."""
        assert k.lead is not None
        lits = [lit for lit, _ in k.lead]
        alts: list[Expr] = []
        B = body
        if lits:
            terms, B = self.stops(body, lits, path, what)
            alts += self.route(terms, k.lead)
        if k.empty:
            tail = difference_literals(B, [b""])
            if not tail.is_empty():
                alts.append(self.terminal(tail, "TEXT"))
            if B.accepts_empty():
                alts.append(EPSILON)
        if not alts:
            raise GrammarError(f"{path}: no text can come here")
        return _Piece(alt(*alts), None, k.empty and B.accepts_empty(), True)

    def stops(self, body: DFA, lits: list[str], path: str, what: str) -> tuple[dict[str, DFA], DFA]:
        """For the strings that may end a run of ``body``: the automaton ``B·m`` of each minimal one
        (``B``: ``body`` without any of them inside), and ``B``."""
        M = _minimal(lits)
        try:
            B = difference(body, _containing(tuple(sorted(M))))
            dfas = {m: concat_dfas([B, literal_dfa(m.encode("utf-8"))]) for m in M}
        except GrammarError as e:
            raise GrammarError(f"{path}: {what} before {M} too large to compile: {e}") from None
        if B.is_empty() and not any(not d.is_empty() for d in dfas.values()):
            raise GrammarError(f"{path}: no {what} can come here")
        both = None
        for d in dfas.values():
            both = d if both is None else union(both, d)
        if both is not None and not _prefix_free(both):
            raise GrammarError(f"{path}: the {what} before {M} cannot be read unambiguously: a text ending in "
                               "one of these strings can be continued into another (overlapping triggers or end "
                               "strings); structgen reads each such text as its longest match")
        return dfas, B

    def route(self, stops: dict[str, DFA], entries) -> list[Expr]:
        """One alternative per minimal stop string: its ``B·m`` lexeme, then the rest of each entry
        ``(literal, rest)`` that begins with it."""
        groups: dict[str, list[Expr]] = {}
        for lit, rest in entries:
            m = next(m for m in stops if lit.startswith(m))
            rem = lit[len(m):]
            groups.setdefault(m, []).append(seq(self.literal(rem), rest) if rem else rest)
        return [seq(self.terminal(stops[m], "TEXT"), alt(*alts)) for m, alts in groups.items()]

    # -- embedded grammars ------------------------------------------------------------------
    def embed(self, ir: GrammarIR, key: tuple) -> str:
        hit = self._embedded.get(key)
        if hit is None:
            hit = self._embedded[key] = self.ir.embed(ir, self._name("g") + "_")
        return hit

    def check_last(self, start: str, k: _Piece, path: str) -> None:
        """The content's last lexeme must not be able to run on into the string that follows it."""
        if not k.lead:
            return
        firsts = {lit.encode("utf-8")[0]: lit for lit, _ in k.lead}
        for name in sorted(_last_terminals(self.ir, start)):
            d = self.ir.terminals[name].dfa
            acc = np.nonzero(d.accept)[0]
            for b, lit in firsts.items():
                if (d.trans[acc, d.classmap[b]] >= 0).any():
                    raise GrammarError(f"{path}: the content's last token can continue with {chr(b)!r}, so it "
                                       f"would run on into the {lit!r} that follows it (the lexer reads the longest "
                                       "match); choose another end string")

    # -- formats ----------------------------------------------------------------------------
    def fmt(self, node: Any, path: str, k: _Piece) -> _Piece:
        path = self._paths.get(id(node), path)
        self.where = path
        if not isinstance(node, dict):
            raise GrammarError(f"{path}: a format must be a JSON object, not {type(node).__name__}")
        t = node.get("type")
        if t in TOKEN_FORMATS:
            raise UnsupportedFeature(f"format type {t!r} works on token ids, which a byte-level grammar cannot "
                                     "express", pointer=f"{path}/type", keyword=t)
        if t == "qwen_xml_parameter":
            raise UnsupportedFeature("the qwen_xml_parameter format is not supported", pointer=f"{path}/type",
                                     keyword=t)
        if t not in FORMAT_TYPES:
            raise GrammarError(f"{path}/type: unknown format type {t!r} (one of {', '.join(FORMAT_TYPES)})")
        self.keys(node, path, _KEYS[t])
        return getattr(self, "f_" + t)(node, path, k)

    def f_const_string(self, node, path, k):
        v = self.text(node, "value", path)
        if not v:
            return k
        return _Piece(seq(self.literal(v), k.expr), ((v, k.expr),), False)

    def f_json_schema(self, node, path, k):
        from .json_schema import SchemaOptions, normalize_schema_input, schema_to_ir

        spath = self._schema_paths.get(id(node), f"{path}/json_schema")
        if "json_schema" not in node:
            raise GrammarError(f"{path}: missing field 'json_schema'")
        style = node.get("style", "json")
        if style != "json":
            raise UnsupportedFeature(f"style {style!r}: only 'json' contents are supported", pointer=f"{path}/style",
                                     keyword="style")
        if node.get("excludes"):
            raise UnsupportedFeature("excludes inside a JSON schema's strings are not supported",
                                     pointer=f"{path}/excludes", keyword="excludes")
        any_order = self.flag(node, "any_order", path)
        ws = self.count(node, "max_whitespace_cnt", path)
        o = self.opts
        whitespace, max_ws = o.whitespace, None
        if ws is not None:
            whitespace, max_ws = ("compact", None) if ws == 0 else ("flexible", ws)
        opts = SchemaOptions(whitespace=whitespace, strict=o.strict, lenient=o.lenient, max_whitespace=max_ws,
                             property_order="any" if any_order else "schema", members=o.members,
                             plain_integers=o.plain_integers)
        try:
            schema = normalize_schema_input(node["json_schema"])
            ir, _ = schema_to_ir(schema, opts)
        except SchemaError as e:
            raise SchemaError(_message(e), pointer=spath + e.pointer.lstrip("#")) from None
        except UnsupportedFeature as e:
            raise UnsupportedFeature(_message(e), pointer=spath + e.pointer.lstrip("#"), keyword=e.keyword) from None
        except GrammarError as e:
            raise GrammarError(f"{spath}: {e}") from None
        if ir.checks:
            if not o.lenient:
                raise UnsupportedFeature(
                    "this schema needs checks at value boundaries (uniqueItems, not, overlapping oneOf, any_order "
                    "objects ...), which cannot run inside free text; "
                    "pass lenient=True to compile it without them and validate the segments after generation",
                    pointer=spath)
            ir.checks = []
        start = self.embed(ir, ("json", spec_key({"s": node["json_schema"]}), opts))
        self.check_last(start, k, path)
        return _Piece(seq(Sym(start), k.expr), None, False)

    def f_grammar(self, node, path, k):
        from .lark import lark_to_ir

        text = self.text(node, "grammar", path, nonempty=True)
        try:
            ir = lark_to_ir(text, source=f"{path}/grammar")
        except (GrammarError, UnsupportedFeature) as e:
            hint = " (grammars are read as Lark; EBNF/GBNF is not supported)" if "::=" in text else ""
            raise GrammarError(f"{path}/grammar: {e}{hint}") from None
        start = self.embed(ir, ("lark", text))
        self.check_last(start, k, path)
        return _Piece(seq(Sym(start), k.expr), None, start in _nullable_rules(self.ir) and k.empty)

    def f_regex(self, node, path, k):
        from .regex import compile_regex

        pattern = self.text(node, "pattern", path)
        try:
            dfa = compile_regex(pattern)
        except (GrammarError, UnsupportedFeature) as e:
            raise GrammarError(f"{path}/pattern: {e}") from None
        if dfa.is_empty():
            raise GrammarError(f"{path}/pattern: the regex matches nothing")
        if k.lead:
            return self.then(dfa, k, path, "regex content")
        nonempty = difference_literals(dfa, [b""])
        parts: list[Expr] = []
        if not nonempty.is_empty():
            parts.append(self.terminal(nonempty, "RE"))
        if dfa.accepts_empty():
            parts.append(EPSILON)
        return _Piece(seq(alt(*parts), k.expr), None, dfa.accepts_empty() and k.empty)

    def f_any_text(self, node, path, k):
        body = self.free_body(node, path)
        if k.lead is None:
            raise UnsupportedFeature("any_text must be followed by a constant string, a tag or the end of the "
                                     "output (or be a tag's content)", pointer=path, keyword="any_text")
        return self.then(body, k, path, "free text")

    def f_sequence(self, node, path, k):
        elements = self.items(node, "elements", path, nonempty=False)
        piece = k
        for i in reversed(range(len(elements))):
            piece = self.fmt(elements[i], f"{path}/elements/{i}", piece)
        return piece

    def f_or(self, node, path, k):
        elements = self.items(node, "elements", path)
        k = self.share(k)
        pieces = [self.fmt(e, f"{path}/elements/{i}", k) for i, e in enumerate(elements)]
        if len(pieces) > 1 and any(p.free_start for p in pieces):
            raise UnsupportedFeature("an alternative that begins with free text (any_text, triggered_tags, "
                                     "dispatch) would read every other alternative as free text too",
                                     pointer=path, keyword="or")
        lead = None if any(p.lead is None for p in pieces) else tuple(x for p in pieces for x in p.lead)
        return _Piece(alt(*(p.expr for p in pieces)), lead, any(p.empty for p in pieces),
                      any(p.free_start for p in pieces))

    def f_tag(self, node, path, k):
        return self.tag(node, path, k)

    def tag(self, node: Any, path: str, k: _Piece) -> _Piece:
        path = self._paths.get(id(node), path)
        self.where = path
        if not isinstance(node, dict):
            raise GrammarError(f"{path}: a tag must be a JSON object, not {type(node).__name__}")
        if node.get("type", "tag") != "tag":
            raise GrammarError(f"{path}/type: expected a tag, got {node.get('type')!r}")
        self.keys(node, path, _KEYS["tag"])
        if isinstance(node.get("begin"), dict):
            raise UnsupportedFeature("a token begin works on token ids; use a string", pointer=f"{path}/begin",
                                     keyword="begin")
        begin = self.text(node, "begin", path)
        end = node.get("end")
        if isinstance(end, dict):
            raise UnsupportedFeature("a token end works on token ids; use a string", pointer=f"{path}/end",
                                     keyword="end")
        if isinstance(end, list):
            if not end:
                raise GrammarError(f"{path}/end: must not be an empty list")
            ends = self.texts(node, "end", path, nonempty=False)
        else:
            ends = [self.text(node, "end", path)]
        if "content" not in node:
            raise GrammarError(f"{path}: missing field 'content'")
        k = self.share(k)
        ends = list(dict.fromkeys(ends))
        lead: list | None = [(e, k.expr) for e in ends if e]
        if "" in ends:
            lead = None if k.lead is None else lead + list(k.lead)
        end_expr = alt(*[self.literal(e) if e else EPSILON for e in ends])
        kc = _Piece(seq(end_expr, k.expr), None if lead is None else tuple(lead), "" in ends and k.empty)
        cp = self.fmt(node["content"], f"{path}/content", kc)
        if begin:
            return _Piece(seq(self.literal(begin), cp.expr), ((begin, cp.expr),), False)
        return cp

    def tag_list(self, node: dict, path: str, k: _Piece) -> list[_Piece]:
        return [self.tag(t, f"{path}/tags/{i}", k) for i, t in enumerate(self.items(node, "tags", path))]

    def f_triggered_tags(self, node, path, k):
        triggers = self.texts(node, "triggers", path)
        if not triggers:
            raise GrammarError(f"{path}/triggers: at least one trigger is needed")
        at_least_one = self.flag(node, "at_least_one", path)
        stop_after_first = self.flag(node, "stop_after_first", path)
        body = self.free_body(node, path)
        if k.lead is None:
            raise UnsupportedFeature("triggered_tags must be followed by a constant string, a tag or the end of "
                                     "the output (or be a tag's content)", pointer=path, keyword="triggered_tags")
        k = self.share(k)
        entries = []
        for i, p in enumerate(self.tag_list(node, path, _OPEN)):
            begin = p.lead[0][0] if p.lead and len(p.lead) == 1 else ""
            if not any(begin.startswith(t) for t in triggers):
                tpath = self._paths.get(id(node["tags"][i]), f"{path}/tags/{i}")
                raise GrammarError(f"{tpath}/begin: {begin!r} does not start with any of the triggers {triggers}")
            entries.append(p.lead[0])
        return self.loop(body, entries, k, path, at_least_one=at_least_one, once=stop_after_first,
                         stops=triggers, text_first=self.flag(node, "text_before_first", path))

    def loop(self, body: DFA, entries: list, k: _Piece, path: str, *, at_least_one: bool, once: bool,
             stops: list[str], text_first: bool = True) -> _Piece:
        """Free text with segments: each ``(literal, rest)`` entry is a segment introduced by its
        literal (which begins with one of ``stops``); ``once``: what follows comes right after the
        first segment; the free text ends where ``k`` begins.  ``at_least_one`` without
        ``text_first``: the first segment comes first (no free text before it)."""
        lits = stops + [lit for lit, _ in k.lead] + [lit for lit, _ in entries]
        terms, B = self.stops(body, lits, path, "free text")
        trail = self.route(terms, k.lead) if k.lead else []
        if k.empty:
            tail = difference_literals(B, [b""])
            if not tail.is_empty():
                trail.append(self.terminal(tail, "TEXT"))
            trail.append(EPSILON)
        if at_least_one and not text_first:
            # XGrammar's at_least_one: the output starts with a segment, free text may follow it
            after = self.share(_Piece(k.expr if once else seq(Repeat(alt(*self.route(terms, entries)), 0, None),
                                                              alt(*trail)), None, False)).expr
            lead = tuple((lit, seq(rest, after)) for lit, rest in entries)
            return _Piece(alt(*(seq(self.literal(lit), r) for lit, r in lead)), lead, False)
        if once:
            first = self.route(terms, [(lit, seq(rest, k.expr)) for lit, rest in entries])
            expr = alt(*first) if at_least_one else alt(*first, *trail)
        else:
            item = alt(*self.route(terms, entries))
            expr = seq(Repeat(item, 1 if at_least_one else 0, None), alt(*trail))
        return _Piece(expr, None, k.empty and not at_least_one, True)

    def f_dispatch(self, node, path, k):
        rules = self.items(node, "rules", path)
        loop = self.flag(node, "loop", path, True)
        body = self.free_body(node, path)
        if k.lead is None:
            raise UnsupportedFeature("dispatch must be followed by a constant string, a tag or the end of the "
                                     "output (or be a tag's content)", pointer=path, keyword="dispatch")
        k = self.share(k)
        entries, patterns = [], []
        for i, r in enumerate(rules):
            rpath = f"{path}/rules/{i}"
            if not isinstance(r, (list, tuple)) or len(r) != 2:
                raise GrammarError(f"{rpath}: expected a [pattern, format] pair")
            pattern = self.text({"0": r[0]}, "0", rpath, nonempty=True)
            rest = self.fmt(r[1], f"{rpath}/1", _OPEN if loop else k)
            patterns.append(pattern)
            entries.append((pattern, rest.expr))
        if loop:
            return self.loop(body, entries, k, path, at_least_one=False, once=False, stops=patterns)
        # without the loop, each rule's format is compiled with what follows already
        lits = patterns + [lit for lit, _ in k.lead]
        terms, B = self.stops(body, lits, path, "free text")
        alts = self.route(terms, entries + list(k.lead))
        if k.empty:
            tail = difference_literals(B, [b""])
            if not tail.is_empty():
                alts.append(self.terminal(tail, "TEXT"))
            alts.append(EPSILON)
        return _Piece(alt(*alts), None, k.empty, True)

    def f_tags_with_separator(self, node, path, k):
        sep = self.text(node, "separator", path)
        at_least_one = self.flag(node, "at_least_one", path)
        once = self.flag(node, "stop_after_first", path)
        k = self.share(k)
        pieces = self.tag_list(node, path, _OPEN)
        tags = alt(*(p.expr for p in pieces))
        tail = EPSILON if once else Repeat(seq(self.literal(sep), tags) if sep else tags, 0, None)
        expr = seq(tags, tail, k.expr)
        lead = None
        if all(p.lead for p in pieces):
            lead = [(b, seq(rest, tail, k.expr)) for p in pieces for b, rest in p.lead]
        if not at_least_one:
            expr = alt(expr, k.expr)
            lead = None if lead is None or k.lead is None else lead + list(k.lead)
        return _Piece(expr, None if lead is None else tuple(lead), not at_least_one and k.empty,
                      not at_least_one and k.free_start)

    def f_optional(self, node, path, k):
        return self.repeat(node, path, k, 0, 1)

    def f_plus(self, node, path, k):
        return self.repeat(node, path, k, 1, None)

    def f_star(self, node, path, k):
        return self.repeat(node, path, k, 0, None)

    def f_repeat(self, node, path, k):
        lo = self.count(node, "min", path)
        if lo is None:
            raise GrammarError(f"{path}: missing field 'min'")
        hi = node.get("max")
        if not isinstance(hi, int) or isinstance(hi, bool) or (hi != -1 and hi < lo):
            raise GrammarError(f"{path}/max: expected -1 (no bound) or an integer >= min, got {hi!r}")
        return self.repeat(node, path, k, lo, None if hi == -1 else hi)

    def repeat(self, node: dict, path: str, k: _Piece, lo: int, hi: int | None) -> _Piece:
        if "content" not in node:
            raise GrammarError(f"{path}: missing field 'content'")
        cpath = f"{path}/content"
        if hi == 0:
            return k
        k = self.share(k)
        item = self.fmt(node["content"], cpath, _OPEN).expr
        if hi == 1:
            more = k
        else:
            more = _Piece(seq(Repeat(item, max(lo - 1, 0), None if hi is None else hi - 1), k.expr), None,
                          k.empty and lo <= 1)
        first = self.fmt(node["content"], cpath, more)
        if lo >= 1:
            return first
        lead = None if first.lead is None or k.lead is None else first.lead + k.lead
        return _Piece(alt(first.expr, k.expr), lead, first.empty or k.empty, first.free_start or k.free_start)

    # -- the legacy format ------------------------------------------------------------------
    def legacy(self, spec: dict) -> _Piece:
        for key in spec:
            if key not in ("type", "structures", "triggers"):
                raise UnsupportedFeature(f"unknown field {key!r} of the legacy format (structures, triggers)",
                                         pointer=f"/{key}", keyword=key)
        structures = self.items(spec, "structures", "")
        tags = []
        for i, s in enumerate(structures):
            p = f"/structures/{i}"
            if not isinstance(s, dict):
                raise GrammarError(f"{p}: expected an object with begin, schema and end")
            for key in s:
                if key not in ("begin", "schema", "end"):
                    raise UnsupportedFeature(f"unknown field {key!r} (begin, schema, end)", pointer=f"{p}/{key}",
                                             keyword=key)
            schema = s.get("schema")
            if schema is None:  # vLLM's request model writes an omitted schema as null: any JSON value
                schema = {}
            if isinstance(schema, str):
                try:
                    schema = json.loads(schema)
                except json.JSONDecodeError as e:
                    raise SchemaError(f"the schema is not valid JSON: {e}", pointer=f"{p}/schema") from None
            content = {"type": "json_schema", "json_schema": schema}
            tag = {"type": "tag", "begin": s.get("begin"), "content": content, "end": s.get("end")}
            if "begin" not in s:
                del tag["begin"]
            if "end" not in s:
                del tag["end"]
            self._paths[id(tag)] = p
            self._paths[id(content)] = p
            self._schema_paths[id(content)] = f"{p}/schema"
            tags.append(tag)
        node = {"type": "triggered_tags", "triggers": spec.get("triggers"), "tags": tags}
        if not isinstance(node["triggers"], list):
            raise GrammarError("/triggers: expected a list of strings")
        self._keep = (tags, node)  # the ids above stay valid while compiling
        return self.f_triggered_tags(node, "", _END)


def _message(e: Exception) -> str:
    """The message of a pointer-carrying error without its ``pointer: `` prefix."""
    s = str(e)
    p = getattr(e, "pointer", "") or "#"
    return s[len(p) + 2:] if s.startswith(p + ": ") else s


def structural_tag_to_ir(spec: Any, options: StructuralTagOptions | None = None) -> GrammarIR:
    """Compile a structural tag (dict or JSON text; see the module's docstring) to IR.

    Errors are ``GrammarError`` / ``UnsupportedFeature`` / ``SchemaError`` naming the JSON path in
    the spec (``/format/tags/0/content``) and why; nothing else escapes for a bad spec."""
    opts = options or StructuralTagOptions()
    doc = load_structural_tag(spec)
    b = _Builder(opts)
    try:
        if "structures" in doc:
            piece = b.legacy(doc)
        elif doc.get("type") == "structural_tag":
            for key in doc:
                if key not in ("type", "format"):
                    raise UnsupportedFeature(f"unknown field {key!r} (a structural tag has type and format)",
                                             pointer=f"/{key}", keyword=key)
            if "format" not in doc:
                raise GrammarError("/: missing field 'format'")
            piece = b.fmt(doc["format"], "/format", _END)
        elif doc.get("type") in FORMAT_TYPES or doc.get("type") in TOKEN_FORMATS:
            piece = b.fmt(doc, "", _END)
        else:
            raise GrammarError(f"/type: expected 'structural_tag' (with a format), a format type, or the legacy "
                               f"{{structures, triggers}} object; got type {doc.get('type')!r}")
    except StructgenError:
        raise
    except RecursionError:
        raise GrammarError(f"{b.where}: the structural tag is nested too deeply") from None
    except Exception as e:  # noqa: BLE001 - a malformed spec must fail as a structgen error
        raise GrammarError(f"{b.where or '/'}: invalid structural tag ({type(e).__name__}: {e})") from None
    b.ir.rules["start"] = piece.expr
    return b.ir
