"""The schema compiler: one object that carries the compile's state (terminals, rules, memo,
recursion) and walks a schema value by value, dispatching each conjunction to the concern
modules (mixins), then ``schema_to_ir``, the entry point.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urldefrag

from ...errors import SchemaError, UnsatisfiableSchema, UnsupportedFeature
from ..formats import FORMAT_REGEXES, UNSUPPORTED_FORMATS
from ...automata.fsa import DFA, literal_dfa, literal_set_dfa
from ..ir import Alt, Expr, FollowCondition, GrammarIR, Sym, alt
from ..negation import is_some_key_not
from ..presence import eval_presence
from .arrays import ArraysMixin
from .checks import SchemaCheck
from .finite import FiniteValuesMixin
from .input import LATER_KEYWORDS, SchemaOptions, check_schema, declared_draft, make_validator
from .json_values import simple_valid, trivial
from .limits import ANNOTATIONS, DEFAULT_MAX_WHITESPACE, TYPES
from .logic import BranchBudget, JoinFailed, LogicMixin
from .numeric import NumbersMixin
from .objects import ObjectsMixin
from .documents import Documents
from .vocabularies import keywords_left_out
from .refs import DEFAULT_BASE, Resolver, SchemaNode, own_base, ref_overrides, shown_uri, urljoin
from .strings import StringsMixin


#: SchemaOptions.whitespace: "compact" (no blanks), "spaced" (one blank after each , and : -- the way
#: json.dumps writes and most JSON a model has read), "flexible" (up to max_whitespace blanks anywhere)
WHITESPACE_MODES = ("compact", "spaced", "flexible")


class SchemaCompiler(LogicMixin, FiniteValuesMixin, StringsMixin, NumbersMixin, ArraysMixin, ObjectsMixin):
    """Compiles one schema to grammar IR (state of one compile; per-concern methods in the mixins)."""

    def __init__(self, root, opts: SchemaOptions, *, loose_branches: bool = False,
                 loose_joins: frozenset[str] = frozenset()):
        self.root = root
        self.opts = opts
        self.loose_branches = loose_branches  # the last compile of schema_to_ir: no branch distributed
        self.loose_joins = loose_joins  # pointers of oneOfs whose joined branches failed: checked instead
        self.resolver = Resolver(root, Documents(opts.registry), declared_draft(root))
        self.ir = GrammarIR(rules={}, terminals={}, start="start", source="json-schema")
        self._derived: dict[tuple, tuple] = {}  # (id(source), tag) -> (source, derived dict)
        self._scoped_resolvers: dict[tuple, object] = {}  # dynamic scope -> jsonschema resolver (False: none)
        self._dyn_keys: dict[tuple, tuple] = {}  # dynamic scope -> dyn_key
        self._bare_refs: set[tuple] = set()  # ref targets entered since a value last read anything
        self._memo: dict[tuple, Expr | None] = {}
        # why a value came out empty: per keyed_value() being compiled, the pointers where the empty
        # values it met lie (the deepest is the cause named by UnsatisfiableSchema); per memo key, its cause
        self._empty_frames: list[list[str]] = []
        self._empty_cause: dict[tuple, str] = {}
        self._in_progress: dict[tuple, str | None] = {}
        self._root_key: tuple | None = None
        self._combinator_depth = 0
        self._check_frames: list[list[str]] = []  # per value() being compiled: keywords left to a check
        self._branch_work = 0  # anyOf/oneOf branches compiled so far (bounded: MAX_BRANCH_CONJUNCTIONS)
        self._join: tuple[str, int] | None = None  # the outermost oneOf being joined, its branch-work bound
        self._rules: dict[tuple, str] = {}
        self._closers: dict[tuple, dict] = {}  # (names, patterns) -> the schema closing an object to them
        self.emptied_by_policy: list[str] = []  # pointers of objects strict=True left without a value
        self._terms: dict[tuple, Sym] = {}
        self._spans_meeting: dict[tuple, DFA] = {}  # grounding: (patterns, formats) -> the spans meeting them
        self._validator = None
        # the root's draft; a "$schema" inside switches it for what that subschema reaches (refs.SchemaNode)
        self.root_draft = declared_draft(root)
        self.left_out = keywords_left_out(root, self.resolver.documents)  # by the meta-schema's $vocabulary
        ws = self.opts.max_whitespace if self.opts.max_whitespace is not None else DEFAULT_MAX_WHITESPACE
        if opts.whitespace not in WHITESPACE_MODES:
            raise SchemaError(f"whitespace must be one of {', '.join(map(repr, WHITESPACE_MODES))}, not {opts.whitespace!r}")
        w = "" if opts.whitespace in ("compact", "spaced") or ws == 0 else r"[ \t\n\r]{0,%d}" % ws
        after = " " if opts.whitespace == "spaced" else ""  # json.dumps' separators: ", " and ": "
        from ..regex import compile_regex

        def punct(name, rx, follow=None):
            return self.term(("punct", name), compile_regex(rx), name, follow)

        # An opener's lexeme takes all the whitespace after it (the next byte is not a blank), so the
        # closer's own leading whitespace cannot add to it: past max_whitespace blanks after "[" only
        # "]" could follow, a dead end wherever a check refuses the empty array (issue 36).
        opened = FollowCondition(frozenset(range(256)) - frozenset(b" \t\n\r"), True) if w else None
        self.LBRACE = punct("LBRACE", r"\{" + w, opened)
        self.RBRACE = punct("RBRACE", w + r"\}")
        self.LBRACK = punct("LBRACK", r"\[" + w, opened)
        self.RBRACK = punct("RBRACK", w + r"\]")
        self.COMMA = punct("COMMA", w + "," + (w or after))
        self.COLON = punct("COLON", w + ":" + (w or after))

    # -- helpers ----------------------------------------------------------------------
    def term(self, key, dfa: DFA, hint: str = "T", follow: FollowCondition | None = None) -> Sym:
        sym = self._terms.get(key)
        if sym is None:
            name = f"{hint}_{len(self._terms)}"
            sym = self.ir.add_terminal(name, dfa, follow=follow)
            self._terms[key] = sym
        return sym

    def unsupported(self, node: SchemaNode, keyword: str, why: str = "") -> None:
        """A keyword the automaton cannot hold exactly: the grammar goes on with an
        over-approximation and the value being compiled is validated when it completes (a check at
        the value boundary, ``structgen.engine.checks``); with ``lenient=True`` the whole
        output is validated at the end instead."""
        if self.opts.lenient:
            return
        if self._check_frames:
            self._check_frames[-1].append(keyword)
            return
        msg = f"keyword {keyword!r} cannot be enforced exactly" + (f": {why}" if why else "") + \
              " (pass lenient=True to validate after generation instead)"
        raise UnsupportedFeature(msg, pointer=f"{node.ptr}/{keyword}", keyword=keyword)

    def derived(self, source: dict, tag: str, build) -> dict:
        """A schema derived from ``source`` (e.g. without its anyOf), built once per
        (source, tag) so that recursive structures meet the same node again and
        compile to a rule reference instead of unfolding forever."""
        key = (id(source), tag)
        hit = self._derived.get(key)
        if hit is None or hit[0] is not source:
            hit = (source, build())
            self._derived[key] = hit
        return hit[1]

    def validator(self):
        if self._validator is None:
            self._validator = make_validator(self.root, format=self.opts.format,
                                             registry=self.resolver.documents.registry, ignore=self.left_out)
        return self._validator

    def validator_at(self, n: SchemaNode):
        """The final validator moved to ``n``: its schema, its $refs resolved against its own base URI
        (inside another document, through the registry) and its ``$dynamicRef``s in the dynamic scope
        the compile reached it through -- not the root's."""
        v = self.validator()
        scope = n.inner_scope()[1:]  # the first resource is the root's, where v starts
        if not scope:
            return v.evolve(schema=n.schema)
        resolver = self._scoped_resolvers.get(scope)
        if resolver is None:
            try:
                resolver = v._resolver
                for uri in scope:
                    resolver = resolver.lookup(uri).resolver
            except Exception:  # noqa: BLE001 - jsonschema cannot place it: the root's base, as before
                resolver = False
            self._scoped_resolvers[scope] = resolver
        if resolver is False:
            return v.evolve(schema=n.schema)
        return v.evolve(schema=n.schema, _resolver=resolver)

    def resolve_ref(self, n: SchemaNode, keyword: str):
        """(target, its parent's base, its pointer) of ``n``'s ``$ref`` or ``$dynamicRef``.  A
        ``$dynamicRef`` whose plain-name fragment first resolves to a ``$dynamicAnchor`` of that name
        goes to the outermost resource of ``n``'s dynamic scope that defines one; otherwise it is a
        ``$ref``."""
        ref = n.schema[keyword]
        if not isinstance(ref, str):
            raise SchemaError(f"{keyword} must be a string", pointer=f"{n.ptr}/{keyword}")
        base = self.base_of(n)
        hit = self.resolver.resolve(ref, base, n.ptr)
        if keyword == "$dynamicRef":
            frag = urldefrag(urljoin(base, ref))[1]
            if frag and not frag.startswith("/") and isinstance(hit[0], dict) and hit[0].get("$dynamicAnchor") == frag:
                for uri in n.inner_scope():
                    loc = self.resolver.dynamic_anchors.get(uri, {}).get(frag)
                    if loc is not None:
                        return loc
        return hit

    def dyn_key(self, n: SchemaNode) -> tuple:
        """What of ``n``'s dynamic scope its grammar can depend on: each ``$dynamicAnchor`` name
        with the outermost resource that binds it (empty without dynamic anchors).  It stops
        changing once every resource is in scope, so recursion through ``$dynamicRef`` ends."""
        if not self.resolver.dynamic_anchors:
            return ()
        scope = n.inner_scope()
        hit = self._dyn_keys.get(scope)
        if hit is None:
            bound: dict[str, str] = {}
            for uri in scope:
                for name in self.resolver.dynamic_anchors.get(uri, ()):
                    bound.setdefault(name, uri)
            hit = self._dyn_keys[scope] = tuple(sorted(bound.items()))
        return hit

    def valid_under(self, value, nodes: list[SchemaNode]) -> bool:
        simple = True
        for n in nodes:
            if isinstance(n.schema, dict):
                keys = {k for k in n.schema if k not in ANNOTATIONS}
                if not keys <= {"type", "enum", "const", "nullable"}:
                    simple = False
                    break
        if simple:  # decidable here, without a jsonschema round trip per candidate
            return all(simple_valid(value, n.schema) for n in nodes)
        v = self.validator()
        for n in nodes:
            if n.schema is True:
                continue
            if n.schema is False:
                return False
            sub = self.validator_at(n)
            try:
                if not sub.is_valid(value):
                    return False
            except Exception:  # a ref that jsonschema cannot resolve: be conservative
                return False
        return True

    # -- entry --------------------------------------------------------------------------
    def compile(self) -> GrammarIR:
        root = SchemaNode(self.root, DEFAULT_BASE, "#", (), self.root_draft)
        body = self.value([root])
        if body is None and self.emptied_by_policy:
            ptr = self.emptied_by_policy[0]
            raise UnsatisfiableSchema(f"strict=True closes the object at {ptr} to the members its schema names, "
                                      "and no value satisfies it closed (the schema itself is satisfiable "
                                      "without strict)", pointer=ptr)
        if body is None:
            ptr = self._empty_cause.get(self._root_key, "#")
            what = "this schema" if ptr == "#" else "the subschema here, and every value of the whole schema needs one"
            raise UnsatisfiableSchema(f"no JSON value satisfies {what}", pointer=ptr)
        self.ir.rules["start"] = body
        return self.ir

    # -- values ----------------------------------------------------------------------------
    def value(self, nodes: list[SchemaNode]) -> Expr | None:
        """Grammar for one JSON value satisfying every node (None: no value does)."""
        seen_keys: set = set()
        uniq = []
        for n in nodes:  # a conjunction is a set: repeated members add nothing (and keys must saturate)
            k = (*n.key(), self.dyn_key(n))
            if k not in seen_keys and not trivial(n.schema):
                seen_keys.add(k)
                uniq.append(n)
        nodes = uniq
        if len(nodes) == 1 and isinstance(nodes[0].schema, dict):
            n = nodes[0]
            refs = [k for k in ("$ref", "$dynamicRef") if k in n.schema]
            if len(refs) == 1 and (ref_overrides(n) or all(k in ANNOTATIONS or k == refs[0] for k in n.schema)):
                target, tbase, tptr = self.resolve_ref(n, refs[0])
                hop = (id(target), tbase)
                if hop in self._bare_refs:  # refs to refs that come back before any value is read
                    raise SchemaError(f"{refs[0]} {n.schema[refs[0]]!r} ({shown_uri(self.base_of(n), n.schema[refs[0]])}) "
                                      f"comes back to {tptr} before any value is read: a reference cycle",
                                      pointer=n.ptr)
                self._bare_refs.add(hop)
                try:
                    return self.ref_rule(n.reached(target, tbase, tptr))
                finally:
                    self._bare_refs.discard(hop)
        outer_refs, self._bare_refs = self._bare_refs, set()  # a value with keywords of its own: a new chain
        try:
            return self.keyed_value(nodes, seen_keys)
        finally:
            self._bare_refs = outer_refs

    def keyed_value(self, nodes: list[SchemaNode], seen_keys: set) -> Expr | None:
        key = tuple(sorted(seen_keys))
        if self._root_key is None:
            self._root_key = key
        if key in self._memo:
            expr = self._memo[key]
            if expr is None:
                self._note_empty(self._empty_cause.get(key, nodes[0].ptr if nodes else "#"))
            return expr
        if key in self._in_progress:  # recursion (e.g. "any JSON value" inside itself): name a rule
            name = self._in_progress[key] or f"rec{len(self._in_progress)}_{len(self.ir.rules)}"
            self._in_progress[key] = name
            return Sym(name)
        self._in_progress[key] = None
        self._check_frames.append([])
        self._empty_frames.append([])
        try:
            flat = self.flatten(nodes, frozenset())
            expr = None if flat is None else self.conjunction(flat)
        finally:
            name = self._in_progress.pop(key)
            checked = self._check_frames.pop()
            inner_empty = self._empty_frames.pop()
        if expr is None:
            cause = max(inner_empty, key=_pointer_depth) if inner_empty else \
                max((n.ptr for n in nodes), key=_pointer_depth, default="#")
            self._empty_cause[key] = cause
            self._note_empty(cause)
        if checked and expr is not None:
            expr = self.checked_value(expr, nodes)
        if name is not None:
            self.ir.rules[name] = expr if expr is not None else Alt(())
            expr = Sym(name) if expr is not None else None
        self._memo[key] = expr
        return expr

    def _note_empty(self, ptr: str) -> None:
        """Tell the value being compiled around this one that a value inside it has no JSON value."""
        if self._empty_frames:
            self._empty_frames[-1].append(ptr)

    def empty_mark(self) -> int:
        """Where the empty values noted so far end (for :meth:`forget_empty`)."""
        return len(self._empty_frames[-1]) if self._empty_frames else 0

    def forget_empty(self, mark: int) -> None:
        """The empty values noted since ``mark`` do not empty the value around them (an optional member
        that cannot appear): they are not its cause."""
        if self._empty_frames:
            del self._empty_frames[-1][mark:]

    def checked_value(self, expr: Expr, nodes: list[SchemaNode]) -> Sym:
        """``expr`` over-approximates the value (a keyword could not be compiled exactly): a rule of
        its own whose completed value is validated against every node's schema with jsonschema."""
        v = self.validator()
        sym = self.rule("chk", expr)
        self.ir.checks.append(SchemaCheck(sym.name, tuple(self.validator_at(n) for n in nodes
                                                          if n.schema is not True),
                                          where=", ".join(dict.fromkeys(n.ptr for n in nodes))))
        return sym

    def base_of(self, n: SchemaNode) -> str:
        return own_base(n.schema, n.base, n.own_draft)

    def unknown_keywords(self, n: SchemaNode) -> frozenset:
        """Keywords that mean nothing in ``n``: those of drafts later than its own, and those of
        vocabularies the root's meta-schema leaves out."""
        return LATER_KEYWORDS.get(n.own_draft, frozenset()) | self.left_out

    def ref_rule(self, node: SchemaNode) -> Expr | None:
        """A $ref target compiles once (per dynamic binding and dialect), as a named rule (so recursion
        terminates)."""
        target = node.schema
        key = (*node.key(), self.dyn_key(node))
        name = self._rules.get(key)
        if name is not None:
            return Sym(name)
        if trivial(target):
            return self.value([])
        name = f"ref{len(self._rules)}"
        self._rules[key] = name
        expr = self.value([node])
        self.ir.rules[name] = expr if expr is not None else Alt(())
        if expr is None:
            return None
        return Sym(name)

    def any_value(self) -> Expr:
        return self.conjunction([])

    # -- types ------------------------------------------------------------------------------
    def typed(self, nodes: list[SchemaNode]) -> Expr | None:
        types = set(TYPES)
        excluded_types: set[str] = set()
        excluded_values: list = []
        for n in nodes:
            s = n.schema
            t = s.get("type")
            if t is not None:
                ts = [t] if isinstance(t, str) else t
                if not isinstance(ts, list) or not all(isinstance(x, str) and x in TYPES for x in ts):
                    raise SchemaError(f"invalid type {t!r}", pointer=f"{n.ptr}/type")
                ts = set(ts)
                if "number" in ts:
                    ts.add("integer")
                if s.get("nullable") is True:
                    ts.add("null")
                types &= ts
            if "not" in s:
                self.apply_not(n, s["not"], excluded_types, excluded_values)
        types -= excluded_types
        if "integer" in excluded_types:
            types.discard("integer")
        presence = [p for n in nodes for p in n.schema.get("__presence__", [])]
        if presence and not all(eval_presence(p, None) for p in presence):
            types &= {"object"}
        alts: list[Expr] = []
        # values a "not" excludes: null and booleans drop out of their literal sets here (numbers and
        # strings subtract them in their own automata); an excluded array or object value cannot be
        # subtracted from a container grammar, so the value is checked as it completes
        if any(v is None for v in excluded_values):
            types.discard("null")
        bools = [b for b in (True, False) if not any(type(v) is bool and v is b for v in excluded_values)]
        if any(isinstance(v, (list, dict)) for v in excluded_values) and types & {"array", "object"}:
            self.unsupported(nodes[0], "not", "an excluded array or object value")
        if "null" in types:
            alts.append(self.term(("lit", "null"), literal_dfa(b"null"), "NULL"))
        if "boolean" in types and bools:
            words = [b"true" if b else b"false" for b in bools]
            alts.append(self.term(("lit", "bool", tuple(words)), literal_set_dfa(words), "BOOL"))
        if "number" in types or "integer" in types:
            e = self.number(nodes, integer="number" not in types,
                            non_integer="integer" in excluded_types and "number" in types,
                            excluded=tuple(excluded_values))
            if e is not None:
                alts.append(e)
        if "string" in types:
            e = self.string(nodes, excluded_values)
            if e is not None:
                alts.append(e)
        if "array" in types:
            e = self.array(nodes)
            if e is not None:
                alts.append(e)
        if "object" in types:
            e = self.object(nodes)
            if e is not None:
                alts.append(e)
        if not alts:
            return None
        return alt(*alts)

    def apply_not(self, n: SchemaNode, sub, excluded_types: set, excluded_values: list) -> None:
        if sub is False:
            return
        if sub is True or sub == {}:
            excluded_types.update(TYPES)
            return
        if isinstance(sub, dict):
            keys = {k for k in sub if k not in ANNOTATIONS}
            if keys == {"type"}:
                t = sub["type"]
                excluded_types.update([t] if isinstance(t, str) else t)
                if "number" in excluded_types:
                    excluded_types.add("integer")
                return
            if keys == {"enum"} and isinstance(sub["enum"], list):
                excluded_values.extend(sub["enum"])
                return
            if keys == {"const"}:
                excluded_values.append(sub["const"])
                return
            if keys == {"format"} and isinstance(sub["format"], str):
                if sub["format"] in FORMAT_REGEXES and self.opts.format == "assert":
                    excluded_types.update(set(TYPES) - {"string"})  # non-strings satisfy any format
                    return  # string() subtracts the format's language
                if sub["format"] not in UNSUPPORTED_FORMATS or self.opts.format == "annotate":
                    excluded_types.update(TYPES)  # a format read as an annotation: every value has it
                    return
            if is_some_key_not(sub):
                excluded_types.update(set(TYPES) - {"object"})  # no key fails propertyNames in a non-object
                return  # object() counts the keys that fail it (or leaves the object to a check)
            if keys == {"multipleOf"}:
                excluded_types.update(set(TYPES) - {"number", "integer"})  # non-numbers are multiples of all
                return  # number() subtracts the multiples
            if keys == {"pattern"} and isinstance(sub["pattern"], str):
                excluded_types.update(set(TYPES) - {"string"})  # non-strings satisfy any pattern
                return  # string() subtracts the pattern's language
        self.unsupported(n, "not", "only 'not' of a type, enum or const is compiled")

    def rule(self, hint: str, expr: Expr) -> Sym:
        name = f"{hint}{len(self.ir.rules)}"
        self.ir.rules[name] = expr
        return Sym(name)


#: Compiles again, each with one more oneOf checked whose joined branches failed, before every
#: anyOf/oneOf of the schema is checked instead.
MAX_JOIN_RETRIES = 4


def _pointer_depth(ptr: str) -> int:
    """How deep a JSON pointer (``#/a/b``, or a document's ``uri#/a``) points."""
    return ptr.count("/")


def schema_to_ir(schema, opts: SchemaOptions) -> tuple[GrammarIR, Any]:
    """Compile a JSON Schema to IR; returns (ir, final-output validator)."""
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}")
    check_schema(schema)
    loose_joins: set[str] = set()
    for _ in range(MAX_JOIN_RETRIES + 1):
        c = SchemaCompiler(schema, opts, loose_joins=frozenset(loose_joins))
        try:
            return c.compile(), c.validator()
        except JoinFailed as e:  # that oneOf checked instead, the rest as before
            loose_joins.add(e.ptr)
        except BranchBudget:
            break
    # nested anyOf/oneOf distribute into too many conjunctions (or too many oneOfs failed their joins):
    # every anyOf/oneOf of the schema is over-approximated by the value without it and checked as that
    # value completes (or refused)
    c = SchemaCompiler(schema, opts, loose_branches=True)
    return c.compile(), c.validator()
