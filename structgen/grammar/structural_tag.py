"""Structural tags: free text with triggered segments, compiled to one :class:`GrammarIR`.

Reading the spec (XGrammar's structural-tag JSON format, its format types, checked fields) is
:mod:`structgen.grammar.structural_tag_spec`; the byte automata of free text are
:mod:`structgen.grammar.structural_tag_lexemes`; this module builds the grammar.  Its names
(``load_structural_tag``, ``spec_key``, ``tag_nodes``, ``FORMAT_TYPES``) are importable from here too.
Token-level formats (``token``, ``any_tokens``, ``token_triggered_tags``, ...), non-JSON ``style`` s,
``excludes`` of a JSON schema and ``max_tokens`` budgets are refused with
:class:`UnsupportedFeature` naming the spec's JSON path.  What is left here is one algorithm, the
continuation-passing compile of the format tree (``_Builder``, one method per format type), which
is what makes the module about 600 lines.

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

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GrammarError, SchemaError, StructgenError, UnsupportedFeature
from ..automata.fsa import DFA, concat_dfas, counted_repeat, difference, difference_literals, intersect, literal_dfa, union
from .ir import EPSILON, Expr, GrammarIR, Repeat, Sym, alt, seq
from .structural_tag_lexemes import (containing, last_terminals, minimal, nullable_rules, one_byte, one_char,
                                     prefix_free, utf8_text)
from .structural_tag_spec import (FORMAT_KEYS, FORMAT_TYPES, TOKEN_FORMATS, SpecFields, load_structural_tag,
                                  spec_key, tag_nodes)

__all__ = ["StructuralTagOptions", "load_structural_tag", "spec_key", "structural_tag_to_ir", "tag_nodes",
           "FORMAT_TYPES"]


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


# -- the compiler ---------------------------------------------------------------------------------
class _Builder(SpecFields):
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
            body = utf8_text()
            if max_chars is not None:
                body = counted_repeat(one_char(), 0, max_chars)
            if max_bytes is not None:
                body = intersect(body, counted_repeat(one_byte(), 0, max_bytes))
            if excludes:
                body = difference(body, containing(tuple(sorted(set(excludes)))))
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
        M = minimal(lits)
        try:
            B = difference(body, containing(tuple(sorted(M))))
            dfas = {m: concat_dfas([B, literal_dfa(m.encode("utf-8"))]) for m in M}
        except GrammarError as e:
            raise GrammarError(f"{path}: {what} before {M} too large to compile: {e}") from None
        if B.is_empty() and not any(not d.is_empty() for d in dfas.values()):
            raise GrammarError(f"{path}: no {what} can come here")
        both = None
        for d in dfas.values():
            both = d if both is None else union(both, d)
        if both is not None and not prefix_free(both):
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
        for name in sorted(last_terminals(self.ir, start)):
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
        self.keys(node, path, FORMAT_KEYS[t])
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
        return _Piece(seq(Sym(start), k.expr), None, start in nullable_rules(self.ir) and k.empty)

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
        self.keys(node, path, FORMAT_KEYS["tag"])
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
