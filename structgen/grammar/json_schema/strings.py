"""Strings: length bounds (counted chunks past 4,096 characters), ``pattern``, ``format``, the
exclusions a ``not`` asks for, the key automata objects use, and grounding (``SchemaOptions.source``:
string values are spans of a source text, see ``structgen.grammar.grounding``).
"""
from __future__ import annotations

from ...errors import GrammarError, SchemaError, UnsupportedFeature
from ..formats import FORMAT_REGEXES, UNSUPPORTED_FORMATS
from ...automata.fsa import DFA, difference, difference_literals
from ..grounding import longest_span, product_within, span_string_dfa, words_of
from ...automata.lazy_dfa import LazyDFA
from ..ir import Expr, Graph, alt, seq
from ..regex_syntax import relaxed_pattern
from ..json_strings import (CHUNK_CHARS, MAX_DIRECT_LENGTH, chunk_terminals, lazy_content, string_dfa, string_forms,
                            tail_terminal)
from .json_values import check_pattern, tighten_counts, trivial
from .limits import ANNOTATIONS, MAX_GRAPH_STATES
from .refs import SchemaNode


#: The per-field opt-out of grounding: ``{"type": "string", "x-grounded": false}`` may say anything.
GROUNDED_KEYWORD = "x-grounded"


class StringsMixin:
    """The strings part of :class:`~structgen.grammar.json_schema.compiler.SchemaCompiler`."""

    #: > 0 while propertyNames compile to a key automaton (keys are never grounded)
    _key_depth = 0

    def string(self, nodes: list[SchemaNode], excluded: list) -> Expr | None:
        patterns: list[str] = []
        formats: list[str] = []
        lo, hi = 0, None
        for n in nodes:
            s = n.schema
            if "pattern" in s:
                if not isinstance(s["pattern"], str):
                    raise SchemaError("pattern must be a string", pointer=f"{n.ptr}/pattern")
                check_pattern(s["pattern"], f"{n.ptr}/pattern")
                patterns.append(s["pattern"])
            lo, hi = tighten_counts(s, n, lo, hi, "minLength", "maxLength")
            f = s.get("format") if self.opts.format == "assert" else None
            if isinstance(f, str) and (f in FORMAT_REGEXES or f in UNSUPPORTED_FORMATS):
                if f in UNSUPPORTED_FORMATS and self.opts.lenient:
                    continue
                formats.append(f)
        not_patterns = [n.schema["not"]["pattern"] for n in nodes
                        if isinstance(n.schema.get("not"), dict) and isinstance(n.schema["not"].get("pattern"), str)
                        and {k for k in n.schema["not"] if k not in ANNOTATIONS} == {"pattern"}]
        for n in nodes:
            if isinstance(n.schema.get("not"), dict) and isinstance(n.schema["not"].get("pattern"), str):
                check_pattern(n.schema["not"]["pattern"], f"{n.ptr}/not/pattern")
        not_formats = [n.schema["not"]["format"] for n in nodes
                       if isinstance(n.schema.get("not"), dict) and n.schema["not"].get("format") in FORMAT_REGEXES
                       and {k for k in n.schema["not"] if k not in ANNOTATIONS} == {"format"}
                       and self.opts.format == "assert"]
        if hi is not None and lo > hi:
            return None
        if self.grounds(nodes):
            ex = [v for v in excluded if isinstance(v, str)]
            g = self.grounded_string(nodes, patterns, formats, lo, hi, not_patterns, not_formats, ex)
            if g is not None:
                return g
        if not patterns and not formats and not not_patterns and not not_formats and not [v for v in excluded if isinstance(v, str)] and (
                lo > MAX_DIRECT_LENGTH or (hi is not None and hi > MAX_DIRECT_LENGTH)):
            return self.chunked_string(lo, hi)
        char_bounds, lazy_patterns = None, ()
        try:
            d = string_dfa(tuple(patterns), lo, hi, tuple(formats))
        except Exception as e:
            if not isinstance(e, (UnsupportedFeature, GrammarError)):
                raise
            # a pattern no automaton holds (lookaround, an anchor mid-pattern), a format that needs a
            # parser, or automata over their limits: any string here, the value checked as it completes
            keyword = getattr(e, "keyword", None) or ("pattern" if patterns else "format" if formats else "maxLength")
            self.unsupported(nodes[0], keyword, str(e).split(": ", 1)[-1])
            d = None
            # a pattern whose own DFA is too large is followed by a lazy DFA in the masks
            # (structgen.engine.lazy_patterns); the automaton holds its relaxed form
            lazy = {p: ld for p in dict.fromkeys(patterns) if (ld := _lazy_only(p)) is not None}
            eager = tuple(p for p in patterns if p not in lazy)
            # patterns relaxed (counted repetitions opened, backreferences as their groups: every
            # string the pattern matches, usually more) keep the string close to the pattern
            relaxed_of = {p: _relaxed(p) for p in dict.fromkeys(patterns)}
            relaxed = tuple(r for r in (relaxed_of[p] for p in patterns) if r is not None)
            eager_relaxed = eager + tuple(r for r in (relaxed_of[p] for p in lazy) if r is not None)
            exact, fmts = tuple(patterns), tuple(formats)
            for approx in dict.fromkeys(((exact, fmts), (eager_relaxed, fmts), (relaxed, fmts), ((), fmts),
                                         (exact, ()), (eager_relaxed, ()), (relaxed, ()), ((), ()))):
                if not lazy.keys().isdisjoint(approx[0]):
                    continue  # (known too large)
                try:  # the tightest over-approximation that compiles (dropping bounds, then patterns...)
                    d = string_dfa(tuple(approx[0]), 0, None, tuple(approx[1]))
                except (UnsupportedFeature, GrammarError):
                    continue
                if lo or hi is not None:
                    # the length was dropped (its product with the pattern or format is too large for
                    # one automaton): the masks count the characters instead
                    char_bounds = (lo, hi)
                if not set(exact) <= set(approx[0]):
                    lazy_patterns = tuple(lazy.values())
                break
        for f in not_formats:
            d = difference(d, string_dfa(formats=(f,)))
        for p in not_patterns:
            try:
                d = difference(d, string_dfa((p,)))
            except UnsupportedFeature as e:  # strings matching it stay in: checked as the value completes
                self.unsupported(nodes[0], "not", str(e).split(": ", 1)[-1])
        ex = [v for v in excluded if isinstance(v, str)]
        if ex:
            d = difference_literals(d, string_forms(ex))
        if d.is_empty():
            return None
        sym = self.term(("string", tuple(patterns), lo, hi, tuple(formats), tuple(ex), tuple(not_patterns),
                         tuple(not_formats)), d, "STR")
        if char_bounds is not None:
            self.ir.terminals[sym.name].char_bounds = char_bounds
        if lazy_patterns:
            self.ir.terminals[sym.name].lazy_patterns = lazy_patterns
        return sym

    # -- grounding ----------------------------------------------------------------------------
    def grounds(self, nodes: list[SchemaNode]) -> bool:
        """Whether this string value is grounded: a source was given, the string is a value (not a
        key: propertyNames compile here too), and no node opts out with ``"x-grounded": false``.
        (``enum``/``const`` never reach :meth:`string`: their literals are written as given.)"""
        if self.opts.source is None or self._key_depth:
            return False
        for n in nodes:
            flag = n.schema.get(GROUNDED_KEYWORD, True)
            if not isinstance(flag, bool):
                raise SchemaError(f"{GROUNDED_KEYWORD} must be true or false, not {flag!r}",
                                  pointer=f"{n.ptr}/{GROUNDED_KEYWORD}")
            if not flag:
                return False
        return True

    def stated_in_source(self, nodes: list[SchemaNode]) -> bool:
        """Does the source state this optional member?  Where the text plainly holds a value for it: an
        ``enum`` string written in the text as whole words, or a string whose pattern or format some
        span of the text meets (an e-mail, an SKU, a time).  Grounded extraction then writes the
        member (a small model leaves out a third of the optional members a text states); plain
        strings and numbers, which any text could fill, stay optional.  Only with ``source=``, for
        values the grounding reaches (``x-grounded: false`` opts out; ``SchemaOptions.stated_members=False``
        turns it off, as ``generate_json`` does where the members would not fit ``max_tokens``)."""
        nodes = [n for n in nodes if not trivial(n.schema)]  # the closing node of members="named" names it with {}
        if (self.opts.source is None or not self.opts.stated_members or self._key_depth or len(nodes) != 1
                or not isinstance(nodes[0].schema, dict)):
            return False
        s = nodes[0].schema
        if s.get(GROUNDED_KEYWORD, True) is not True or any(k in s for k in ("$ref", "allOf", "anyOf", "oneOf", "not", "if")):
            return False
        words = set(words_of(self.opts.source.lower()))
        enum = s.get("enum")
        if isinstance(enum, list):
            return any(isinstance(v, str) and v.strip() and set(words_of(v.lower())) <= words
                       and v.lower() in self.opts.source.lower() for v in enum)
        patterns = [s["pattern"]] if isinstance(s.get("pattern"), str) else []
        formats = [s["format"]] if isinstance(s.get("format"), str) and self.opts.format == "assert" else []
        if s.get("type") != "string" or not (patterns or formats):
            return False
        try:
            return not self.spans_meeting(tuple(patterns), tuple(formats)).is_empty()
        except (UnsupportedFeature, GrammarError, SchemaError):
            return False

    def spans_meeting(self, patterns: tuple[str, ...], formats: tuple[str, ...]) -> DFA:
        """The source's spans (a string literal) that meet ``patterns`` and ``formats``, made once per
        compile: :meth:`stated_in_source` asks before the member's value is compiled from them."""
        memo = self._spans_meeting
        hit = memo.get((patterns, formats))
        if hit is None:
            d = span_string_dfa(self.opts.source)
            if patterns or formats:
                d = product_within(d, string_dfa(patterns, 0, None, formats))
            hit = memo[(patterns, formats)] = d
        return hit

    def grounded_string(self, nodes: list[SchemaNode], patterns: list[str], formats: list[str], lo: int,
                        hi: int | None, not_patterns: list[str], not_formats: list[str], ex: list[str]) -> Expr | None:
        """The spans of the source that meet the string's keywords; None (recorded, with the
        reason) when grounding must give way to the ungrounded string: no span meets them, or a
        keyword has no automaton (the ungrounded path then approximates it), or the product with
        the spans is too large.  A length bound whose product is too large is counted by the masks
        instead (``char_bounds``, like an ungrounded pattern's), the value checked as it closes."""
        source = self.opts.source
        longest = longest_span(source)
        if longest == 0:
            return self.not_grounded(nodes, "the source has no span (it is empty or all whitespace)")
        if lo > longest:
            return self.not_grounded(nodes, f"minLength {lo} is longer than the source's longest span ({longest})")
        char_bounds = None
        try:
            d = self.spans_meeting(tuple(patterns), tuple(formats))
            for f in not_formats:
                d = product_within(d, string_dfa(formats=(f,)), "diff")
            for p in not_patterns:
                d = product_within(d, string_dfa((p,)), "diff")
        except (UnsupportedFeature, GrammarError) as e:
            return self.not_grounded(nodes, f"no automaton for the spans that meet its pattern or format ({e})")
        if ex:
            d = difference_literals(d, string_forms(ex))
        if lo > 1 or (hi is not None and hi < longest):  # spans hold 1..longest characters already
            try:
                d = product_within(d, string_dfa((), lo, hi))
            except (UnsupportedFeature, GrammarError):
                char_bounds = (lo, hi)
        if d.is_empty():
            return self.not_grounded(nodes, "no span of the source meets the string's keywords")
        if char_bounds is not None:
            self.unsupported(nodes[0], "maxLength" if hi is not None else "minLength",
                             "a grounded string's length is counted by the masks")
        sym = self.term(("grounded-string", tuple(patterns), lo, hi, tuple(formats), tuple(ex), tuple(not_patterns),
                         tuple(not_formats)), d, "GSTR")
        if char_bounds is not None:
            self.ir.terminals[sym.name].char_bounds = char_bounds
        self.now_grounded(nodes)
        return sym

    def now_grounded(self, nodes: list[SchemaNode]) -> None:
        """Record that this value (a string here, a number in ``NumbersMixin``) is grounded."""
        self.grounding_log()["grounded"].append(_where(nodes))

    def not_grounded(self, nodes: list[SchemaNode], reason: str) -> None:
        """Record that this string falls back to its ungrounded form (a request never fails
        because of grounding) and why."""
        self.grounding_log()["fell_back"].append((_where(nodes), reason))
        return None

    def grounding_log(self) -> dict:
        """What grounding did in this compile, on the IR (``ir.grounding``): the pointers of the
        grounded strings, and (pointer, reason) of those that fell back."""
        log = getattr(self.ir, "grounding", None)
        if log is None:
            log = self.ir.grounding = {"grounded": [], "fell_back": []}
        return log

    def chunked_string(self, lo: int, hi: int | None) -> Expr | None:
        """A long length-bounded string: the lexer counts chunks of CHUNK_CHARS
        characters, the parser counts chunks (exact, without a huge DFA)."""
        K = CHUNK_CHARS
        first, chunk = chunk_terminals()
        FIRST = self.term(("chunk-first", K), first, "STRCHUNK")
        CHUNK = self.term(("chunk", K), chunk, "STRCHUNK")
        alts: list[Expr] = []
        if lo <= K - 1:
            alts.append(self.term(("tail", lo, min(K - 1, hi if hi is not None else K - 1), True),
                                  tail_terminal(lo, min(K - 1, hi if hi is not None else K - 1), True), "STR"))
        # after FIRST, m more chunks: total = K * (1 + m) + t with 0 <= t < K
        m_max = None if hi is None else (hi - K) // K
        if m_max is None or m_max >= 0:
            m_loop = max(0, -(-(lo - K) // K)) + 1 if hi is None else None  # from here on, every tail is full
            n_states = (m_max + 1) if m_max is not None else (m_loop + 1)
            if n_states > MAX_GRAPH_STATES:
                raise UnsupportedFeature(f"string length bound {hi or lo} is too large", pointer="#",
                                         keyword="maxLength")
            END = n_states
            edges = []
            for m in range(n_states):
                base = K * (1 + m)
                t_lo = max(0, lo - base)
                t_hi = K - 1 if hi is None else min(K - 1, hi - base)
                if t_lo <= t_hi:
                    tail = self.term(("tail", t_lo, t_hi, False), tail_terminal(t_lo, t_hi, False), "STRTAIL")
                    edges.append((m, tail, END))
                if m + 1 < n_states:
                    edges.append((m, CHUNK, m + 1))
                elif hi is None:
                    edges.append((m, CHUNK, m))
            alts.append(seq(FIRST, Graph(n_states + 1, tuple(edges), 0, (END,))))
        if not alts:
            return None
        return self.rule("longstr", alt(*alts))

    def pattern_dfa(self, pat: str, n: SchemaNode) -> DFA:
        try:
            return string_dfa((pat,))
        except (UnsupportedFeature, GrammarError) as e:
            raise UnsupportedFeature(str(e).split(": ", 1)[-1] if isinstance(e, UnsupportedFeature) else str(e),
                                     pointer=f"{n.ptr}/patternProperties", keyword="patternProperties") from None

    def key_dfa(self, names_nodes: list[SchemaNode]) -> DFA | None:
        """propertyNames as a string DFA (string keywords only)."""
        self._key_depth += 1  # keys are never grounded
        try:
            e = self.value(names_nodes + [names_nodes[0].replaced({"type": "string"})])
        finally:
            self._key_depth -= 1
        if e is None:
            return None
        d = self.terminal_union(e)
        if d is None:
            raise UnsupportedFeature("propertyNames must be a string schema", pointer=names_nodes[0].ptr,
                                     keyword="propertyNames")
        return d


def _where(nodes: list[SchemaNode]) -> str:
    """The pointer a grounding record names (a string of "any JSON value" has no schema of its own)."""
    return nodes[0].ptr if nodes else "(any JSON value)"


def _lazy_only(pattern: str) -> LazyDFA | None:
    """The pattern's lazy content DFA (:func:`~structgen.grammar.json_strings.lazy_content`) when its
    own DFA is too large to build; None when it builds, or has no NFA either."""
    try:
        string_dfa((pattern,))
        return None
    except UnsupportedFeature:
        return None
    except GrammarError:
        return lazy_content(pattern)


def _relaxed(pattern: str) -> str | None:
    """``pattern`` over-approximated for an automaton (:func:`relaxed_pattern`); None when it cannot
    be or nothing in it can be relaxed."""
    try:
        return relaxed_pattern(pattern)
    except (GrammarError, UnsupportedFeature):
        return None
