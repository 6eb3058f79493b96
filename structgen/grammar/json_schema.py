"""JSON Schema (draft 2020-12, with draft-04/07 spellings) to grammar IR.

Design:
* A subschema is compiled together with every schema that constrains the same
  value (a *conjunction*: ``allOf`` members, ``$ref`` targets, the siblings of
  ``anyOf``), so keywords merge exactly instead of being dropped.
* Strings, numbers and literals become single terminals (byte DFAs); objects
  and arrays become rules whose bodies are explicit automata (counts of
  properties/items, optional members and commas without blow-up).
* ``enum``/``const`` are filtered by validating each candidate against the
  whole conjunction, so they combine exactly with any other keyword.
* Property order: the order of ``properties`` (first definition wins across
  ``allOf``), then required keys not listed there, then additional
  properties.  Whitespace: ``compact`` (none) or ``flexible`` (JSON
  whitespace around punctuation, at most ``max_whitespace`` bytes per run).
* What cannot be enforced exactly raises ``UnsupportedFeature`` with the JSON
  pointer; ``lenient=True`` instead ignores it and leaves the check to the
  validator that ``generate_json`` runs on the final output.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
import functools
from urllib.parse import unquote, urldefrag
from urllib.parse import urljoin as _urljoin

from ..errors import GrammarError, SchemaError, UnsupportedFeature
from .fsa import DFA, difference, difference_literals, intersect, literal_dfa, literal_set_dfa, union
from .formats import FORMAT_REGEXES, UNSUPPORTED_FORMATS
from .metaschema import fast_metaschema_ok
from .negation import is_simple_not, negate
from .ir import EPSILON, Alt, Expr, GrammarIR, Graph, Sym, alt, seq
from .json_checks import KeySetCheck, SchemaCheck, UniqueJsonItems
from .json_strings import (CHUNK_CHARS, MAX_DIRECT_LENGTH, chunk_terminals, literal_strings, string_dfa, string_forms,
                           tail_terminal)
from .numbers import number_dfa
from .presence import eval_presence, presence_keys

TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
MAX_GRAPH_STATES = 100_000
#: Arrays count items in a graph of one state per count, each edge ", item" costing a second state
#: of the rule automaton (whose budget is engine.rules.MAX_RULE_NFA_STATES): beyond this, refuse.
MAX_ARRAY_COUNT = 50_000
#: property_order="any": track every key of objects with at most this many properties
ANY_ORDER_TRACK_ALL = 4
#: ... and at most this many keys in all (2**n automaton states)
ANY_ORDER_MAX_TRACKED = 6
MAX_PATTERN_PROPERTIES = 4
MAX_COMBINATOR_DEPTH = 64
#: anyOf/oneOf branches compiled per schema: nested combinators distribute over each other (each
#: branch of one is compiled with each branch of the next), which grows exponentially
#: (past it, the schema is compiled again without distributing them: see schema_to_ir)
MAX_BRANCH_CONJUNCTIONS = 5_000
DEFAULT_MAX_WHITESPACE = 16

ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "example", "$comment", "$schema", "$id", "id", "$anchor",
    "$defs", "definitions", "readOnly", "writeOnly", "deprecated", "contentMediaType", "contentEncoding",
    "contentSchema", "$vocabulary", "$dynamicAnchor", "discriminator", "xml", "externalDocs", "$recursiveAnchor",
    "markdownDescription", "errorMessage", "deprecationMessage", "enumDescriptions", "markdownEnumDescriptions",
})
UNSUPPORTED = {
    "contains": "contains", "minContains": "minContains", "maxContains": "maxContains",
    "uniqueItems": "uniqueItems", "dependencies": "dependencies", "dependentRequired": "dependentRequired",
    "dependentSchemas": "dependentSchemas", "if": "if/then/else", "unevaluatedProperties": "unevaluatedProperties",
    "unevaluatedItems": "unevaluatedItems", "$dynamicRef": "$dynamicRef", "$recursiveRef": "$recursiveRef",
}


@dataclass(frozen=True)
class SchemaOptions:
    whitespace: str = "flexible"
    strict: bool = False
    lenient: bool = False
    max_whitespace: int | None = None
    property_order: str = "schema"  # or "any": members in any order (for checking JSON written elsewhere)


def normalize_schema_input(schema: Any) -> Any:
    """Accept a dict/bool, JSON text, a Pydantic model class, a dataclass or a TypedDict."""
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, (str, bytes)):
        try:
            return json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e}") from None
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    try:
        from pydantic import TypeAdapter

        return TypeAdapter(schema).json_schema()
    except Exception as e:  # noqa: BLE001 - any failure means "not a schema"
        raise SchemaError(f"cannot turn {schema!r} into a JSON Schema: {e}") from None


def _declared_draft(schema) -> int | None:
    """The draft the root's ``$schema`` declares (4, 6, 7, 2019, 2020) as jsonschema resolves it
    (:func:`_validator_for`, the validator the final check uses too); None when the schema names
    none: undeclared schemas get 2020-12 semantics with the older drafts' spellings accepted too."""
    import jsonschema

    if not (isinstance(schema, dict) and "$schema" in schema):
        return None
    return {jsonschema.Draft3Validator: 4, jsonschema.Draft4Validator: 4, jsonschema.Draft6Validator: 6,
            jsonschema.Draft7Validator: 7, jsonschema.Draft201909Validator: 2019}.get(_validator_for(schema), 2020)


_SINCE_2019 = frozenset({"dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
                         "minContains", "maxContains", "prefixItems"})
#: assertion keywords a declared draft does not know (its validator ignores them)
_LATER_KEYWORDS = {
    4: _SINCE_2019 | {"const", "contains", "propertyNames", "if", "then", "else"},
    6: _SINCE_2019 | {"if", "then", "else"},
    7: _SINCE_2019,
}


def _validator_for(schema):
    import jsonschema
    from jsonschema import validators

    if isinstance(schema, dict) and isinstance(schema.get("$schema", ""), str):
        return validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return jsonschema.Draft202012Validator  # the metaschema check then reports a non-string $schema


_META: dict = {}


def check_schema(schema) -> None:
    """Metaschema check, reported with the JSON pointer of the offending keyword."""
    import jsonschema

    cls = _validator_for(schema)
    uri = cls.META_SCHEMA.get("$id") or cls.META_SCHEMA.get("id") or ""
    if fast_metaschema_ok(schema, uri):  # a keyword-table walk; jsonschema decides everything else
        return
    meta = _META.get(cls)
    if meta is None:
        meta = _META[cls] = cls(cls.META_SCHEMA)
    if meta.is_valid(schema):
        return
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        # no "$schema": older drafts' spellings (boolean exclusiveMinimum, ...) are accepted too
        if not (isinstance(schema, dict) and "$schema" in schema):
            for older in (jsonschema.Draft7Validator, jsonschema.Draft4Validator):
                try:
                    older.check_schema(schema)
                    return
                except jsonschema.exceptions.SchemaError:
                    pass
        ptr = "#/" + "/".join(str(p) for p in e.path) if e.path else "#"
        raise SchemaError(f"invalid schema: {e.message}", pointer=ptr) from None


def make_validator(schema):
    """A jsonschema validator with format assertion, for final checks and value checks.  Formats
    the compiler asserts are checked with the compiler's own automata (as the grammar checks them:
    jsonschema's own checkers for ``uri`` and others need optional packages, and without them it
    accepts any string)."""
    import jsonschema

    cls = _validator_for(schema)
    return cls(schema, format_checker=_format_checker())


_FORMAT_CHECKER = None


def _format_checker():
    global _FORMAT_CHECKER
    if _FORMAT_CHECKER is None:
        import jsonschema

        fc = jsonschema.FormatChecker()
        for fmt in FORMAT_REGEXES:
            def check(value, fmt=fmt) -> bool:
                if not isinstance(value, str):
                    return True  # formats say nothing about other types
                return string_dfa(formats=(fmt,)).matches(json.dumps(value, ensure_ascii=False).encode())
            fc.checks(fmt)(check)
        _FORMAT_CHECKER = fc
    return _FORMAT_CHECKER


# --------------------------------------------------------------------------------------
# $ref resolution


class _Resolver:
    """Resolves ``$ref`` within the document: JSON pointers, ``$id`` and ``$anchor``."""

    def __init__(self, root):
        self.root = root
        self.base = root.get("$id", "https://structgen.invalid/schema.json") if isinstance(root, dict) else "https://structgen.invalid/schema.json"
        self.resources: dict[str, Any] = {}
        self.anchors: dict[str, tuple[Any, str, str]] = {}
        self._resolved: dict[tuple[str, str], tuple[Any, str, str]] = {}
        self._index(root, self.base, "#")

    def _index(self, node, base: str, ptr: str) -> None:
        if isinstance(node, dict):
            ident = node.get("$id") if isinstance(node.get("$id"), str) else None
            if ident is None and isinstance(node.get("id"), str) and not isinstance(node.get("type"), dict):
                # draft-04 "id", only when it looks like a URI reference (not a property named id)
                if ident is None and "properties" not in str(ptr).rsplit("/", 1)[-1]:
                    ident = node.get("id") if node.get("id", "").startswith(("#", "http", "urn", "/")) else None
            if ident:
                base = urljoin(base, ident)
                url, frag = urldefrag(base)
                if frag and not frag.startswith("/"):
                    self.anchors[url + "#" + frag] = (node, url, ptr)
                elif not frag:
                    self.resources[url] = (node, url, ptr)
                # else a JSON-pointer fragment ("id": "#/definitions/x", seen in draft-04 schemas): it only
                # names this location, which pointers from the document reach anyway
                base = url
            anchor = node.get("$anchor")
            if isinstance(anchor, str):
                self.anchors[base + "#" + anchor] = (node, base, ptr)
            for k, v in node.items():
                # only containers can hold an $id or $anchor: no pointer is built for a leaf
                if isinstance(v, (dict, list)) and k not in ("enum", "const", "examples", "default", "example"):
                    self._index(v, base, f"{ptr}/{_esc(k)}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if isinstance(v, (dict, list)):
                    self._index(v, base, f"{ptr}/{i}")
        if ptr == "#":
            self.resources.setdefault(urldefrag(self.base)[0], (self.root, urldefrag(self.base)[0], "#"))

    def resolve(self, ref: str, base: str, ptr: str):
        """(subschema, its base URI, its JSON pointer) of ``ref`` met at ``ptr`` under ``base``
        (memoised: a large schema meets the same few hundred refs thousands of times)."""
        hit = self._resolved.get((ref, base))
        if hit is None:
            hit = self._resolved[(ref, base)] = self._resolve(ref, base, ptr)
        return hit

    def _resolve(self, ref: str, base: str, ptr: str):
        full = urljoin(base, ref)
        url, frag = urldefrag(full)
        if full in self.anchors:
            return self.anchors[full]
        res = self.resources.get(url)
        if res is None:
            raise UnsupportedFeature(f"$ref {ref!r} points outside this document (remote refs are not fetched)",
                                     pointer=ptr, keyword="$ref")
        node, rbase, rptr = res
        if not frag:
            return node, rbase, rptr
        if not frag.startswith("/"):
            raise SchemaError(f"$ref {ref!r}: anchor {frag!r} not found", pointer=ptr)
        cur = node
        cptr = rptr
        for part in frag.split("/")[1:]:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
                cur = cur[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} does not resolve", pointer=ptr)
            cptr = f"{cptr}/{_esc(part)}"
            if isinstance(cur, dict) and isinstance(cur.get("$id"), str):
                rbase = urljoin(rbase, cur["$id"])
        return cur, rbase, cptr


@functools.lru_cache(maxsize=65536)
def urljoin(base: str, ref: str) -> str:
    return _urljoin(base, ref)


def _other_key_term(defined: list[str], mask: int, patterns: list, names_nodes: list) -> tuple:
    """The terminal key of an object's undefined keys in one region of the key space (the patterns
    of ``mask``); with no pattern and no propertyNames it is "any string but the defined keys"."""
    return ("addkey", tuple(defined), mask, tuple(p for _, p, _ in patterns), tuple(id(x.schema) for x in names_nodes))


def _esc(k) -> str:
    return str(k).replace("~", "~0").replace("/", "~1")


# --------------------------------------------------------------------------------------
# The compiler


class _Node:
    """A subschema with the base URI and JSON pointer it was found at."""

    __slots__ = ("schema", "base", "ptr")

    def __init__(self, schema, base: str, ptr: str):
        self.schema = schema
        self.base = base
        self.ptr = ptr

    def key(self):
        return (id(self.schema), self.base)


class _BranchBudget(Exception):
    """anyOf/oneOf branches over MAX_BRANCH_CONJUNCTIONS: compile again, loosely (see schema_to_ir)."""


class _Compiler:
    def __init__(self, root, opts: SchemaOptions, *, loose_branches: bool = False):
        self.root = root
        self.opts = opts
        self.loose_branches = loose_branches  # the second compile of schema_to_ir: no branch distributed
        self.resolver = _Resolver(root)
        self.ir = GrammarIR(rules={}, terminals={}, start="start", source="json-schema")
        self._derived: dict[tuple, tuple] = {}  # (id(source), tag) -> (source, derived dict)
        self._memo: dict[tuple, Expr | None] = {}
        self._in_progress: dict[tuple, str | None] = {}
        self._combinator_depth = 0
        self._check_frames: list[list[str]] = []  # per value() being compiled: keywords left to a check
        self._branch_work = 0  # anyOf/oneOf branches compiled so far (bounded: MAX_BRANCH_CONJUNCTIONS)
        self._rules: dict[tuple, str] = {}
        self._terms: dict[tuple, Sym] = {}
        self._validator = None
        # draft-04 and older: an integer is written without a fraction (5.0 is a number, not an
        # integer); from draft-06 on, any number with a zero fraction is an integer
        draft = _declared_draft(root)
        self.integer_fraction = draft is None or draft >= 6
        # drafts 4-7: "$ref" replaces its schema object (siblings are ignored), and keywords
        # of later drafts mean nothing -- as the declared draft's own validator reads it
        self.ref_overrides = draft is not None and draft <= 7
        self.unknown_keywords = _LATER_KEYWORDS.get(draft, frozenset())
        self._not_own = ANNOTATIONS | {"$ref", "allOf"} | self.unknown_keywords  # what flatten keeps out of a node
        ws = self.opts.max_whitespace if self.opts.max_whitespace is not None else DEFAULT_MAX_WHITESPACE
        if opts.whitespace not in ("flexible", "compact"):
            raise SchemaError(f"whitespace must be 'flexible' or 'compact', not {opts.whitespace!r}")
        w = "" if opts.whitespace == "compact" or ws == 0 else r"[ \t\n\r]{0,%d}" % ws
        from .regex import compile_regex

        def punct(name, rx):
            return self.term(("punct", name), compile_regex(rx), name)

        self.LBRACE = punct("LBRACE", r"\{" + w)
        self.RBRACE = punct("RBRACE", w + r"\}")
        self.LBRACK = punct("LBRACK", r"\[" + w)
        self.RBRACK = punct("RBRACK", w + r"\]")
        self.COMMA = punct("COMMA", w + "," + w)
        self.COLON = punct("COLON", w + ":" + w)

    # -- helpers ----------------------------------------------------------------------
    def term(self, key, dfa: DFA, hint: str = "T") -> Sym:
        sym = self._terms.get(key)
        if sym is None:
            name = f"{hint}_{len(self._terms)}"
            sym = self.ir.add_terminal(name, dfa)
            self._terms[key] = sym
        return sym

    def unsupported(self, node: _Node, keyword: str, why: str = "") -> None:
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
            self._validator = make_validator(self.root)
        return self._validator

    def valid_under(self, value, nodes: list[_Node]) -> bool:
        simple = True
        for n in nodes:
            if isinstance(n.schema, dict):
                keys = {k for k in n.schema if k not in ANNOTATIONS}
                if not keys <= {"type", "enum", "const", "nullable"}:
                    simple = False
                    break
        if simple:  # decidable here, without a jsonschema round trip per candidate
            return all(_simple_valid(value, n.schema) for n in nodes)
        v = self.validator()
        for n in nodes:
            if n.schema is True:
                continue
            if n.schema is False:
                return False
            sub = v.evolve(schema=n.schema) if n.base == self.resolver.base else v.evolve(schema=n.schema)
            try:
                if not sub.is_valid(value):
                    return False
            except Exception:  # a ref that jsonschema cannot resolve: be conservative
                return False
        return True

    # -- entry --------------------------------------------------------------------------
    def compile(self) -> GrammarIR:
        root = _Node(self.root, self.resolver.base, "#")
        body = self.value([root])
        if body is None:
            raise SchemaError("no JSON value satisfies this schema", pointer="#")
        self.ir.rules["start"] = body
        return self.ir

    # -- values ----------------------------------------------------------------------------
    def value(self, nodes: list[_Node]) -> Expr | None:
        """Grammar for one JSON value satisfying every node (None: no value does)."""
        seen_keys: set = set()
        uniq = []
        for n in nodes:  # a conjunction is a set: repeated members add nothing (and keys must saturate)
            k = n.key()
            if k not in seen_keys and not _trivial(n.schema):
                seen_keys.add(k)
                uniq.append(n)
        nodes = uniq
        if len(nodes) == 1 and isinstance(nodes[0].schema, dict) and "$ref" in nodes[0].schema and (
                self.ref_overrides or all(k in ANNOTATIONS or k == "$ref" for k in nodes[0].schema)):
            n = nodes[0]
            if not isinstance(n.schema["$ref"], str):
                raise SchemaError("$ref must be a string", pointer=n.ptr + "/$ref")
            return self.ref_rule(*self.resolver.resolve(n.schema["$ref"], self._base_of(n), n.ptr))
        key = tuple(sorted(seen_keys))
        if key in self._memo:
            return self._memo[key]
        if key in self._in_progress:  # recursion (e.g. "any JSON value" inside itself): name a rule
            name = self._in_progress[key] or f"rec{len(self._in_progress)}_{len(self.ir.rules)}"
            self._in_progress[key] = name
            return Sym(name)
        self._in_progress[key] = None
        self._check_frames.append([])
        try:
            flat = self.flatten(nodes, frozenset())
            expr = None if flat is None else self.conjunction(flat)
        finally:
            name = self._in_progress.pop(key)
            checked = self._check_frames.pop()
        if checked and expr is not None:
            expr = self.checked_value(expr, nodes)
        if name is not None:
            self.ir.rules[name] = expr if expr is not None else Alt(())
            expr = Sym(name) if expr is not None else None
        self._memo[key] = expr
        return expr

    def checked_value(self, expr: Expr, nodes: list[_Node]) -> Sym:
        """``expr`` over-approximates the value (a keyword could not be compiled exactly): a rule of
        its own whose completed value is validated against every node's schema with jsonschema."""
        v = self.validator()
        sym = self.rule("chk", expr)
        self.ir.checks.append(SchemaCheck(sym.name, tuple(v.evolve(schema=n.schema) for n in nodes
                                                          if n.schema is not True)))
        return sym

    def _base_of(self, n: _Node) -> str:
        s = n.schema
        if isinstance(s, dict) and isinstance(s.get("$id"), str) and n.ptr != "#":
            return urljoin(n.base, s["$id"])
        return n.base

    def ref_rule(self, target, base: str, ptr: str) -> Expr | None:
        """A $ref target compiles once, as a named rule (so recursion terminates)."""
        key = (id(target), base)
        name = self._rules.get(key)
        if name is not None:
            return Sym(name)
        if _trivial(target):
            return self.value([])
        name = f"ref{len(self._rules)}"
        self._rules[key] = name
        expr = self.value([_Node(target, base, ptr)])
        self.ir.rules[name] = expr if expr is not None else Alt(())
        if expr is None:
            return None
        return Sym(name)

    def flatten(self, nodes: list[_Node], active: frozenset) -> list[_Node] | None:
        """Expand allOf and $ref into one flat list of dict nodes; None if any is false."""
        out: list[_Node] = []
        for n in nodes:
            s = n.schema
            if _trivial(s):
                continue
            if s is False:
                return None
            if not isinstance(s, dict):
                raise SchemaError(f"a schema must be an object or a boolean, not {type(s).__name__}", pointer=n.ptr)
            base = self._base_of(n)
            if "$ref" in s:
                ref = s["$ref"]
                if not isinstance(ref, str):
                    raise SchemaError("$ref must be a string", pointer=n.ptr + "/$ref")
                target, tbase, tptr = self.resolver.resolve(ref, base, n.ptr)
                tkey = (id(target), tbase)
                if tkey in active:
                    raise UnsupportedFeature("a $ref cycle that never reaches an object or array (or a recursive "
                                             "$ref with sibling keywords)", pointer=n.ptr, keyword="$ref")
                sub = self.flatten([_Node(target, tbase, tptr)], active | {tkey})
                if sub is None:
                    return None
                out.extend(sub)
                if self.ref_overrides:
                    continue  # drafts 4-7: the keywords beside "$ref" are not evaluated
            if "allOf" in s:
                all_of = s["allOf"]
                if not isinstance(all_of, list) or not all_of:
                    raise SchemaError("allOf must be a non-empty array", pointer=n.ptr + "/allOf")
                sub = self.flatten([_Node(x, base, f"{n.ptr}/allOf/{i}") for i, x in enumerate(all_of)], active)
                if sub is None:
                    return None
                out.extend(sub)
            unknown = self.unknown_keywords
            own_keys = [k for k in s if k not in self._not_own]
            if own_keys:
                copy = "$ref" in s or "allOf" in s or not unknown.isdisjoint(s)
                d = self.derived(s, "own", lambda: {k: s[k] for k in own_keys}) if copy else s
                logic = self.rewrite_logic(d, base, n.ptr)
                if logic is not None:
                    sub = self.flatten([_Node(logic, base, n.ptr)], active)
                    if sub is None:
                        return None
                    out.extend(sub)
                    continue
                out.append(_Node(d, base, n.ptr))
        return out

    def rewrite_logic(self, s: dict, base: str, ptr: str) -> dict | None:
        """``not`` of a compound schema and ``if``/``then``/``else`` as conjunctions and
        disjunctions of negatable parts (structgen.grammar.negation); None when there is
        nothing to rewrite or the negation cannot be expressed (reported later)."""
        needs_not = "not" in s and not is_simple_not(s["not"]) and not _presence_only(s["not"])
        needs_if = "if" in s and ("then" in s or "else" in s)
        if not (needs_not or needs_if):
            return None

        def build():
            resolve = self.local_resolver(base, ptr)
            rest = {k: v for k, v in s.items() if k not in ("not", "if", "then", "else")}
            extra = []
            if "not" in s:
                if needs_not:
                    neg = negate(s["not"], resolve, **self.format_kinds())
                    if neg is None:
                        return None
                    extra.append(neg)
                else:
                    rest["not"] = s["not"]
            if "if" in s:
                if needs_if:
                    cond = s["if"]
                    ncond = negate(cond, resolve, **self.format_kinds())
                    if ncond is None:
                        return None
                    extra.append({"anyOf": [{"allOf": [cond, s.get("then", True)]},
                                            {"allOf": [ncond, s.get("else", True)]}]})
            return {**rest, "allOf": extra} if extra else rest

        return self.derived(s, "logic", build)

    def format_kinds(self) -> dict:
        """Which formats this compile asserts (and which it refuses), for negation."""
        refused = frozenset() if self.opts.lenient else frozenset(UNSUPPORTED_FORMATS)
        return {"asserted_formats": frozenset(FORMAT_REGEXES), "refused_formats": refused}

    def local_resolver(self, base: str, ptr: str):
        """$ref targets inside the same resource (negation copies them next to the ref)."""
        def resolve(ref: str):
            try:
                target, tbase, _ = self.resolver.resolve(ref, base, ptr)
            except (SchemaError, UnsupportedFeature):
                return None
            return target if tbase == base else None
        return resolve

    def any_value(self) -> Expr:
        return self.conjunction([])

    def conjunction(self, nodes: list[_Node]) -> Expr | None:
        finite = self.finite_values(nodes)
        if finite is not _NOT_FINITE:
            return finite
        nodes = [self.extract_presence(n) for n in nodes]
        for n in nodes:
            for k in n.schema:
                if k in UNSUPPORTED:
                    self.check_unsupported(n, k)
        # anyOf / oneOf: distribute the rest of the conjunction into each branch
        for i, n in enumerate(nodes):
            for kw in ("anyOf", "oneOf"):
                if kw in n.schema:
                    branches = n.schema[kw]
                    if not isinstance(branches, list) or not branches:
                        raise SchemaError(f"{kw} must be a non-empty array", pointer=f"{n.ptr}/{kw}")
                    rest = self.derived(n.schema, "-" + kw, lambda: {k: v for k, v in n.schema.items() if k != kw})
                    others = nodes[:i] + [_Node(rest, n.base, n.ptr)] + nodes[i + 1:]
                    if self.loose_branches:
                        # the value without this keyword holds every branch's values: an over-approximation,
                        # the keyword checked when the value completes (or refused: see unsupported)
                        self.unsupported(n, kw, f"its branches combine into over {MAX_BRANCH_CONJUNCTIONS} "
                                                "conjunctions (nested anyOf/oneOf distribute over each other)")
                        return self.conjunction(others)
                    if kw == "oneOf" and len(branches) > 1:
                        branches = self.exclusive_branches(n, branches)
                    alts = []
                    self._combinator_depth += 1
                    if self._combinator_depth > MAX_COMBINATOR_DEPTH:
                        raise UnsupportedFeature(
                            f"{kw} nested more than {MAX_COMBINATOR_DEPTH} levels without an object or array "
                            "in between (a recursive reference through anyOf/oneOf)", pointer=n.ptr, keyword=kw)
                    try:
                        for j, b in enumerate(branches):
                            self._branch_work += 1
                            if self._branch_work > MAX_BRANCH_CONJUNCTIONS:
                                raise _BranchBudget()
                            e = self.value(others + [_Node(b, n.base, f"{n.ptr}/{kw}/{j}")])
                            if e is not None:
                                alts.append(e)
                    finally:
                        self._combinator_depth -= 1
                    if not alts:
                        return None
                    return alt(*alts)
        return self.typed(nodes)

    def finite_values(self, nodes: list[_Node]):
        """An enum or const anywhere in the conjunction makes the value set finite: every
        other keyword (``not``, ``if``/``then``/``else``, ``uniqueItems``, ``contains``,
        overlapping ``oneOf``...) is then enforced exactly by validating each candidate
        with jsonschema, so nothing is refused.  Returns ``_NOT_FINITE`` otherwise."""
        keep = self.finite_candidates(nodes)
        if keep is _NOT_FINITE:
            return _NOT_FINITE
        if not keep:
            return None
        strs = [v for v in keep if isinstance(v, str)]
        if len(strs) > ENUM_STRINGS_AS_ONE_TERMINAL:
            # one literal-set terminal: a lexer over thousands of one-string terminals would not fit
            rest = [self.const_expr(v) for v in keep if not isinstance(v, str)]
            return alt(self.term(("strs", tuple(strs)), literal_strings(strs), "LIT"), *rest)
        return alt(*[self.const_expr(v) for v in keep])

    def finite_candidates(self, nodes: list[_Node]):
        """The values an enum/const conjunction admits (validated against every keyword),
        or ``_NOT_FINITE`` when no enum or const bounds it."""
        candidates = None
        for n in nodes:
            s = n.schema
            if not isinstance(s, dict):
                continue
            if "const" in s:
                vals = [s["const"]]
            elif "enum" in s:
                vals = s["enum"]
                if not isinstance(vals, list):
                    raise SchemaError("enum must be an array", pointer=f"{n.ptr}/enum")
                if not vals:
                    raise SchemaError("enum is empty: no value is allowed", pointer=f"{n.ptr}/enum")
            else:
                continue
            candidates = list(vals) if candidates is None else _json_filter(candidates, vals)
        if candidates is None:
            return _NOT_FINITE
        presence = [p for n in nodes if isinstance(n.schema, dict) for p in n.schema.get("__presence__", [])]
        # every candidate already equals a member of each enum and each const (JSON equality, as
        # jsonschema's): validating them against those again would cost len(enum) comparisons each
        rest = [_without_enum(n) for n in nodes]
        keep = [v for v in candidates
                if self.valid_under(v, rest)
                and all(eval_presence(p, set(v) if isinstance(v, dict) else None) for p in presence)]
        return _dedupe(keep)

    def extract_presence(self, n: _Node) -> _Node:
        """Turn keywords that only test which keys are present (``required`` inside
        anyOf/oneOf/not, dependentRequired, array-form dependencies) into presence
        predicates that the object automaton tracks exactly."""
        s = n.schema
        preds = []
        drop = []
        for kw in ("anyOf", "oneOf"):
            v = s.get(kw)
            if isinstance(v, list) and v and all(_presence_only(b) for b in v):
                preds.append(("any" if kw == "anyOf" else "one", [_presence_ast(b) for b in v]))
                drop.append(kw)
        if "not" in s and _presence_only(s["not"]) and not _trivial(s["not"]):
            preds.append(("not", _presence_ast(s["not"])))
            drop.append("not")
        for kw in ("dependentRequired", "dependencies", "dependentSchemas"):
            v = s.get(kw)
            if isinstance(v, dict) and v and all(isinstance(x, list) or _presence_only(x) for x in v.values()):
                for key, x in v.items():
                    rhs = ("req", tuple(x)) if isinstance(x, list) else _presence_ast(x)
                    preds.append(("any", [("not", ("req", (key,))), rhs]))
                drop.append(kw)
        if not preds:
            return n
        def build():
            d = {k: v for k, v in s.items() if k not in drop}
            d["__presence__"] = list(s.get("__presence__", [])) + preds
            return d

        d = self.derived(s, "presence", build)
        return _Node(d, n.base, n.ptr)

    def check_unsupported(self, n: _Node, k: str) -> None:
        s = n.schema
        v = s[k]
        if k == "uniqueItems":
            return  # enforced (or refused) by the array compiler, which knows the item set
        if k == "if" and "then" not in s and "else" not in s:
            return
        if k in ("minContains",) and "contains" not in s:
            return
        if k in ("dependentRequired", "dependencies", "dependentSchemas") and not v:
            return
        self.unsupported(n, k)

    def exclusive_branches(self, n: _Node, branches: list) -> list:
        """oneOf as anyOf: as is when the branches provably exclude each other; else split
        by JSON type (object keywords say nothing about strings, so three object branches
        all match every string), and within a type where branches still overlap, join
        each branch with the negations of the others (structgen.grammar.negation)."""
        sigs = [self.branch_signature(_Node(b, n.base, f"{n.ptr}/oneOf/{j}")) for j, b in enumerate(branches)]
        if all(self.signatures_disjoint(sigs[a], sigs[b]) for a in range(len(sigs)) for b in range(a + 1, len(sigs))):
            return branches

        def build():
            resolve = self.local_resolver(n.base, n.ptr)
            out = []
            for typ in ("null", "boolean", "object", "array", "string", "number"):
                kinds = [self.type_kind(_Node(b, n.base, f"{n.ptr}/oneOf/{j}"), typ) for j, b in enumerate(branches)]
                live = [i for i, k in enumerate(kinds) if k != "none"]
                alls = [i for i in live if kinds[i] == "all"]
                if not live or len(alls) >= 2:
                    continue  # no branch, or every value of the type matches two of them
                only = [{"type": typ}]
                if len(live) == 1:
                    out.append({"allOf": only + [branches[live[0]]]})
                    continue
                if not alls:
                    rs = [self.branch_signature(_Node({"allOf": only + [branches[i]]}, n.base, n.ptr)) for i in live]
                    if all(self.signatures_disjoint(rs[a], rs[b]) for a in range(len(rs)) for b in range(a + 1, len(rs))):
                        out += [{"allOf": only + [branches[i]]} for i in live]
                        continue
                negs = {i: negate(branches[i], resolve, **self.format_kinds()) for i in live if i not in alls}
                if any(v is None for v in negs.values()):
                    return None
                if alls:  # one branch takes every value of the type: exactly those the others reject
                    out.append({"allOf": only + list(negs.values())})
                else:
                    out += [{"allOf": only + [branches[i]] + [negs[j] for j in live if j != i]} for i in live]
            return out

        out = self.derived(n.schema, "oneOf-exclusive", build)
        if out is None:
            self.unsupported(n, "oneOf", "branches may match the same value, and a branch cannot be negated exactly")
            return branches  # lenient: anyOf over-approximates, the final validation decides
        if not out:
            return [False]
        return out

    def type_kind(self, node: _Node, typ: str) -> str:
        """Whether a schema accepts ``all`` values of a JSON type, ``none``, or ``some``."""
        flat = self.flatten([node], frozenset())
        if flat is None:
            return "none"
        kind = "all"
        for x in flat:
            for k, v in x.schema.items():
                if k in ANNOTATIONS or k == "nullable":
                    continue
                if k == "type":
                    ts = set([v] if isinstance(v, str) else v)
                    if x.schema.get("nullable") is True:
                        ts.add("null")
                    if typ in ts:
                        continue
                    if typ == "number" and "integer" in ts:
                        kind = "some"
                        continue
                    return "none"
                if k == "__presence__":
                    if typ == "object":
                        kind = "some"
                    elif not all(eval_presence(p, None) for p in v):
                        return "none"
                    continue
                applies = _KEYWORD_TYPE.get(k)
                if applies is not None and applies != typ:
                    continue  # e.g. maxLength says nothing about numbers
                kind = "some"
        return kind

    def signatures_disjoint(self, a: dict, b: dict, depth: int = 0) -> bool:
        """Disjoint by the signatures themselves, or by a property both require whose
        values cannot agree (``type: {$ref: ...}`` discriminators, nested one level)."""
        if _disjoint(a, b):
            return True
        if depth >= 2 or not (a["types"] & b["types"] <= {"object"}):
            return False
        for p in sorted(a["required"] & b["required"] & set(a["props"]) & set(b["props"])):
            pa = self.branch_signature(_Node({"allOf": [x.schema for x in a["props"][p]]}, a["props"][p][0].base,
                                             a["props"][p][0].ptr))
            pb = self.branch_signature(_Node({"allOf": [x.schema for x in b["props"][p]]}, b["props"][p][0].base,
                                             b["props"][p][0].ptr))
            if self.signatures_disjoint(pa, pb, depth + 1):
                return True
        return False

    def branch_signature(self, node: _Node) -> dict:
        """What a branch can be: types, literal values, discriminating properties, scalar DFA."""
        flat = self.flatten([node], frozenset())
        sig: dict = {"types": set(TYPES), "values": None, "discr": {}, "closed": None, "required": set(), "dfa": None,
                     "props": {}}
        if flat is None:
            sig["types"] = set()
            return sig
        for x in flat:
            s = x.schema
            t = s.get("type")
            if t is not None:
                ts = set([t] if isinstance(t, str) else t)
                if "number" in ts:
                    ts.add("integer")
                if s.get("nullable") is True:
                    ts.add("null")
                sig["types"] &= ts
            vals = None
            if "const" in s:
                vals = [s["const"]]
            elif isinstance(s.get("enum"), list):
                vals = list(s["enum"])
            if vals is not None:
                sig["values"] = vals if sig["values"] is None else _json_filter(sig["values"], vals)
            req = set(s.get("required", []) or [])
            sig["required"] |= req
            for p, ps in (s.get("properties") or {}).items():
                sig["props"].setdefault(p, []).append(_Node(ps, x.base, f"{x.ptr}/properties/{_esc(p)}"))
                if isinstance(ps, dict) and p in req:
                    if "const" in ps:
                        sig["discr"][p] = [ps["const"]]
                    elif isinstance(ps.get("enum"), list):
                        sig["discr"][p] = list(ps["enum"])
            if s.get("additionalProperties") is False and not s.get("patternProperties"):
                sig["closed"] = set(s.get("properties") or {})
        if sig["values"] is not None:
            sig["types"] &= {_json_type(v) for v in sig["values"]} | (
                {"number"} if any(_json_type(v) == "integer" for v in sig["values"]) else set())
        if sig["types"] <= {"string"} and sig["values"] is None:
            try:
                e = self.value([node])
                sig["dfa"] = self._terminal_union(e)
            except Exception:  # noqa: BLE001 - a signature is best effort
                sig["dfa"] = None
        return sig

    def _terminal_union(self, e: Expr | None) -> DFA | None:
        if e is None:
            return None
        syms = [e] if isinstance(e, Sym) else list(e.items) if isinstance(e, Alt) else None
        if syms is None or not all(isinstance(x, Sym) and x.name in self.ir.terminals for x in syms):
            return None
        d = self.ir.terminals[syms[0].name].dfa
        for x in syms[1:]:
            d = union(d, self.ir.terminals[x.name].dfa)
        return d

    # -- types ------------------------------------------------------------------------------
    def typed(self, nodes: list[_Node]) -> Expr | None:
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

    def apply_not(self, n: _Node, sub, excluded_types: set, excluded_values: list) -> None:
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
                if sub["format"] in FORMAT_REGEXES:
                    excluded_types.update(set(TYPES) - {"string"})  # non-strings satisfy any format
                    return  # string() subtracts the format's language
                if sub["format"] not in UNSUPPORTED_FORMATS:
                    excluded_types.update(TYPES)  # an unknown format is an annotation: every value has it
                    return
            if keys == {"pattern"} and isinstance(sub["pattern"], str):
                excluded_types.update(set(TYPES) - {"string"})  # non-strings satisfy any pattern
                return  # string() subtracts the pattern's language
        self.unsupported(n, "not", "only 'not' of a type, enum or const is compiled")

    def const_expr(self, v) -> Expr:
        if isinstance(v, dict):
            if not v:
                return seq(self.LBRACE, self.RBRACE)
            parts: list[Expr] = [self.LBRACE]
            for i, (k, x) in enumerate(v.items()):
                if i:
                    parts.append(self.COMMA)
                parts += [self.term(("key", k), literal_strings([k]), "KEY"), self.COLON, self.const_expr(x)]
            parts.append(self.RBRACE)
            return seq(*parts)
        if isinstance(v, list):
            if not v:
                return seq(self.LBRACK, self.RBRACK)
            parts = [self.LBRACK]
            for i, x in enumerate(v):
                if i:
                    parts.append(self.COMMA)
                parts.append(self.const_expr(x))
            parts.append(self.RBRACK)
            return seq(*parts)
        if isinstance(v, str):
            return self.term(("str", v), literal_strings([v]), "LIT")
        forms = {json.dumps(v)}
        if isinstance(v, float) and v.is_integer():
            forms.add(str(int(v)))
        if isinstance(v, int) and not isinstance(v, bool):
            forms.add(f"{v}.0")
        return self.term(("num", tuple(sorted(forms))), literal_set_dfa([f.encode() for f in forms]), "LIT")

    # -- scalars ----------------------------------------------------------------------------
    def number(self, nodes: list[_Node], integer: bool, non_integer: bool = False,
               excluded: tuple = ()) -> Expr | None:
        kw: dict = {}
        mults = []
        for n in nodes:
            s = n.schema
            for name, arg in (("minimum", "minimum"), ("maximum", "maximum")):
                if name in s:
                    v = s[name]
                    if not isinstance(v, (int, float)) or isinstance(v, bool):
                        raise SchemaError(f"{name} must be a number", pointer=f"{n.ptr}/{name}")
                    excl_key = "exclusiveMinimum" if name == "minimum" else "exclusiveMaximum"
                    if s.get(excl_key) is True:  # draft-04 boolean form
                        arg = "exclusive_" + arg
                    _tighten(kw, arg, v)
            for name, arg in (("exclusiveMinimum", "exclusive_minimum"), ("exclusiveMaximum", "exclusive_maximum")):
                v = s.get(name)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    _tighten(kw, arg, v)
            if "multipleOf" in s:
                m = s["multipleOf"]
                if not isinstance(m, (int, float)) or isinstance(m, bool) or m <= 0:
                    raise SchemaError("multipleOf must be a positive number", pointer=f"{n.ptr}/multipleOf")
                mults.append(m)
        frac = self.integer_fraction
        try:
            d = number_dfa(integer=integer, multiple_of=mults[0] if mults else None, allow_integer_fraction=frac, **kw)
            for m in mults[1:]:
                d = intersect(d, number_dfa(integer=integer, multiple_of=m, allow_integer_fraction=frac))
        except UnsupportedFeature as e:
            if self.opts.lenient:
                d = number_dfa(integer=integer, allow_integer_fraction=frac, **kw)
            else:
                raise UnsupportedFeature(str(e).split(": ", 1)[-1], pointer=nodes[0].ptr, keyword="multipleOf") from None
        if non_integer:  # "not": {"type": "integer"}: numbers with a non-zero fraction (no exponent forms)
            from .regex import compile_regex

            d = intersect(d, compile_regex(r"-?(0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*"))
        ex = tuple(v for v in excluded if isinstance(v, (int, float)) and not isinstance(v, bool))
        if ex:  # "not": {"const"/"enum"}: positional spellings only, so each value's spellings form a regular set
            from .regex import compile_regex

            d = intersect(d, compile_regex(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?"))
            d = difference(d, compile_regex("|".join(_number_spellings(v) for v in ex)))
        if d.is_empty():
            return None
        return self.term(("num", integer, non_integer, tuple(sorted(kw.items())), tuple(mults), ex), d,
                         "INT" if integer else "NUM")

    def string(self, nodes: list[_Node], excluded: list) -> Expr | None:
        patterns: list[str] = []
        formats: list[str] = []
        lo, hi = 0, None
        for n in nodes:
            s = n.schema
            if "pattern" in s:
                if not isinstance(s["pattern"], str):
                    raise SchemaError("pattern must be a string", pointer=f"{n.ptr}/pattern")
                patterns.append(s["pattern"])
            if "minLength" in s:
                lo = max(lo, _nonneg(s["minLength"], n, "minLength"))
            if "maxLength" in s:
                v = _nonneg(s["maxLength"], n, "maxLength")
                hi = v if hi is None else min(hi, v)
            f = s.get("format")
            if isinstance(f, str) and (f in FORMAT_REGEXES or f in UNSUPPORTED_FORMATS):
                if f in UNSUPPORTED_FORMATS and self.opts.lenient:
                    continue
                formats.append(f)
        not_patterns = [n.schema["not"]["pattern"] for n in nodes
                        if isinstance(n.schema.get("not"), dict) and isinstance(n.schema["not"].get("pattern"), str)
                        and {k for k in n.schema["not"] if k not in ANNOTATIONS} == {"pattern"}]
        not_formats = [n.schema["not"]["format"] for n in nodes
                       if isinstance(n.schema.get("not"), dict) and n.schema["not"].get("format") in FORMAT_REGEXES
                       and {k for k in n.schema["not"] if k not in ANNOTATIONS} == {"format"}]
        if hi is not None and lo > hi:
            return None
        if not patterns and not formats and not not_patterns and not not_formats and not [v for v in excluded if isinstance(v, str)] and (
                lo > MAX_DIRECT_LENGTH or (hi is not None and hi > MAX_DIRECT_LENGTH)):
            return self.chunked_string(lo, hi)
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
            for approx in ((patterns, formats), ((), formats), (patterns, ()), ((), ())):
                try:  # the tightest over-approximation that compiles (dropping bounds, then patterns...)
                    d = string_dfa(tuple(approx[0]), 0, None, tuple(approx[1]))
                    break
                except (UnsupportedFeature, GrammarError):
                    continue
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
        return self.term(("string", tuple(patterns), lo, hi, tuple(formats), tuple(ex), tuple(not_patterns),
                          tuple(not_formats)), d, "STR")

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

    # -- arrays -------------------------------------------------------------------------------
    def array(self, nodes: list[_Node]) -> Expr | None:
        saved, self._combinator_depth = self._combinator_depth, 0
        try:
            return self._array(nodes)
        finally:
            self._combinator_depth = saved

    def _array(self, nodes: list[_Node]) -> Expr | None:
        lo, hi = 0, None
        prefix_lists: list[tuple[_Node, list]] = []
        rests: list[_Node] = []
        for n in nodes:
            s = n.schema
            if "minItems" in s:
                lo = max(lo, _nonneg(s["minItems"], n, "minItems"))
            if "maxItems" in s:
                v = _nonneg(s["maxItems"], n, "maxItems")
                hi = v if hi is None else min(hi, v)
            items = s.get("items")
            prefix = s.get("prefixItems")
            if isinstance(items, list):  # draft <= 2019: tuple form
                prefix_lists.append((n, items))
                ai = s.get("additionalItems", True)
                rests.append(_Node(ai, n.base, f"{n.ptr}/additionalItems"))
            else:
                if isinstance(prefix, list):
                    prefix_lists.append((n, prefix))
                if items is not None:
                    rests.append(_Node(items, n.base, f"{n.ptr}/items"))
        if hi is not None and lo > hi:
            return None
        P = max((len(p) for _, p in prefix_lists), default=0)

        def item_nodes(i: int) -> list[_Node]:
            out = []
            for n, p in prefix_lists:
                key = "items" if isinstance(n.schema.get("items"), list) else "prefixItems"
                if i < len(p):
                    out.append(_Node(p[i], n.base, f"{n.ptr}/{key}/{i}"))
            # rest schemas apply to indices beyond each node's own prefix
            for r in rests:
                owner_prefix = next((len(p) for n, p in prefix_lists if r.ptr.startswith(n.ptr + "/")), 0)
                if i >= owner_prefix:
                    out.append(r)
            return out

        unique = [n for n in nodes if n.schema.get("uniqueItems") is True]
        checked = False  # items told apart at run time (see unique_item)
        if unique and (hi is None or hi > 1):
            e = self.unique_array(unique[0], item_nodes, P, lo, hi)
            if e is not _NOT_FINITE:
                return e
            checked = True
        J = hi if hi is not None else max(lo, P, 1)
        if J > MAX_ARRAY_COUNT:
            raise UnsupportedFeature(f"maxItems/minItems of {J} is too large to enforce exactly",
                                     pointer=nodes[0].ptr, keyword="maxItems")
        item_exprs: list[Expr | None] = []
        beyond_prefix: Expr | None = None  # every index past the prefixes has the same item schemas
        for i in range(J + (1 if hi is None else 0)):
            idx = i if i < J else J
            if idx < P:
                item_exprs.append(self.value(item_nodes(idx)))
                continue
            if idx == P:
                beyond_prefix = self.value(item_nodes(idx))
            item_exprs.append(beyond_prefix)
        if checked:
            wrapped: dict[int, Expr] = {}
            item_exprs = [None if e is None else wrapped.setdefault(id(e), self.unique_item(e)) for e in item_exprs]
        edges = []
        for j in range(J):
            e = item_exprs[j]
            if e is None:
                break
            edges.append((j, e if j == 0 else seq(self.COMMA, e), j + 1))
        reach = len(edges)  # highest count reachable
        if hi is None and reach == J:
            e = item_exprs[J]
            if e is not None:
                edges.append((J, seq(self.COMMA, e) if J > 0 else e, J))
        finals = tuple(j for j in range(lo, reach + 1))
        if not finals:
            return None
        body = Graph(J + 1, tuple(edges), 0, finals)
        return self.rule("arr", seq(self.LBRACK, body, self.RBRACK))

    def unique_item(self, e: Expr) -> Sym:
        """An item of a uniqueItems array the grammar cannot tell apart by itself: a rule of its own,
        checked by a :class:`UniqueJsonItems` check against the array's earlier items
        (``structgen.engine.checks``): the token that would complete a duplicate is rejected."""
        sym = self.rule("uitem", e)
        self.ir.checks.append(UniqueJsonItems(sym.name))
        return sym

    def unique_array(self, n: _Node, item_nodes, P: int, lo: int, hi: int | None) -> Expr | None:
        """uniqueItems over a finite item set (enum, const, boolean, null): the array
        automaton tracks which values are used, one state per subset.  Returns ``_NOT_FINITE``
        for any other item set: the array is then compiled with its items checked at run time."""
        values = None
        if P == 0:
            nodes = item_nodes(0)
            flat = self.flatten(nodes, frozenset()) if nodes else []
            if flat is None:
                values = []
            else:
                values = self.finite_candidates(flat)
                if values is _NOT_FINITE:
                    types = set(TYPES)
                    for x in flat:
                        t = x.schema.get("type")
                        if t is not None:
                            types &= set([t] if isinstance(t, str) else t)
                    rest = [k for x in flat for k in x.schema if k not in ANNOTATIONS and k != "type"]
                    values = ([v for v in (None, True, False) if _json_type(v) in types]
                              if types <= {"null", "boolean"} and not rest else None)
        if values is None or len(values) > MAX_UNIQUE_VALUES:
            return _NOT_FINITE
        k = len(values)
        exprs = [self.const_expr(v) for v in values]
        edges = []
        for used in range(1 << k):
            for i in range(k):
                if not used >> i & 1:
                    edges.append((used, exprs[i] if used == 0 else seq(self.COMMA, exprs[i]), used | 1 << i))
        finals = tuple(u for u in range(1 << k) if lo <= bin(u).count("1") <= (hi if hi is not None else k))
        if not finals:
            return None
        return self.rule("arr", seq(self.LBRACK, Graph(1 << k, tuple(edges), 0, finals), self.RBRACK))

    def rule(self, hint: str, expr: Expr) -> Sym:
        name = f"{hint}{len(self.ir.rules)}"
        self.ir.rules[name] = expr
        return Sym(name)

    # -- objects --------------------------------------------------------------------------------
    def object(self, nodes: list[_Node]) -> Expr | None:
        saved, self._combinator_depth = self._combinator_depth, 0
        try:
            return self._object(nodes)
        finally:
            self._combinator_depth = saved

    def _object(self, nodes: list[_Node]) -> Expr | None:
        minp, maxp = 0, None
        order: list[str] = []
        in_order: set[str] = set()
        required: set[str] = set()
        names_nodes: list[_Node] = []
        for n in nodes:
            s = n.schema
            props = s.get("properties") or {}
            if not isinstance(props, dict):
                raise SchemaError("properties must be an object", pointer=f"{n.ptr}/properties")
            for k in props:
                if k not in in_order:
                    in_order.add(k)
                    order.append(k)
            req = s.get("required") or []
            if isinstance(req, list):
                required.update(x for x in req if isinstance(x, str))
            if "minProperties" in s:
                minp = max(minp, _nonneg(s["minProperties"], n, "minProperties"))
            if "maxProperties" in s:
                v = _nonneg(s["maxProperties"], n, "maxProperties")
                maxp = v if maxp is None else min(maxp, v)
            if "propertyNames" in s:
                names_nodes.append(_Node(s["propertyNames"], n.base, f"{n.ptr}/propertyNames"))
        for k in sorted(required - in_order):
            order.append(k)
        presence = [p for n in nodes for p in n.schema.get("__presence__", [])]
        tracked: list[str] = sorted({k for p in presence for k in presence_keys(p)})
        if len(tracked) > 10:
            raise UnsupportedFeature("presence constraints over more than 10 keys", pointer=nodes[0].ptr,
                                     keyword="required")
        for k in tracked:
            if k not in order:
                order.append(k)
        if maxp is not None and (minp > maxp or len(required) > maxp):
            return None

        def value_nodes_for(key: str) -> list[_Node]:
            out = []
            for n in nodes:
                s = n.schema
                props = s.get("properties") or {}
                if key in props:
                    out.append(_Node(props[key], n.base, f"{n.ptr}/properties/{_esc(key)}"))
                    matched = True
                else:
                    matched = False
                for pat, ps in (s.get("patternProperties") or {}).items():
                    if _search(pat, key, n):
                        out.append(_Node(ps, n.base, f"{n.ptr}/patternProperties/{_esc(pat)}"))
                        matched = True
                if not matched:
                    out.append(self.additional_node(n))
            return out

        members: list[tuple[str, Expr]] = []
        for k in order:
            if names_nodes and not self.valid_under(k, names_nodes):
                if k in required:
                    return None
                continue
            e = self.value(value_nodes_for(k))
            if e is None and k in required:
                return None
            if e is not None:
                key_sym = self.term(("key", k), literal_strings([k]), "KEY")
                members.append((k, seq(key_sym, self.COLON, e)))
        add_member = self.additional_members(nodes, order, names_nodes)
        other_key = self._terms.get(_other_key_term(order, 0, [], []))
        if other_key is not None and members:
            # any string but the defined keys: every key prefix stays alive with it, so the engine's key
            # lexers may hold all of this object's key literals (structgen.engine.lexer.Lexer)
            family = self.ir.key_families.setdefault(other_key.name, set())
            family.update(self._terms[("key", k)].name for k, _ in members)
        if self.opts.property_order == "any":
            e = self.any_order_members(members, add_member, required, tracked, presence, minp, maxp)
            if e is _NOT_FINITE:
                return self.checked_object(members, add_member, required, presence, minp, maxp)
            return None if e is None else self.rule("obj", seq(self.LBRACE, e, self.RBRACE))
        n_def = len(members)
        C = maxp if maxp is not None else max(minp, 1)
        if (n_def + 1) * (C + 1) > MAX_GRAPH_STATES:
            raise UnsupportedFeature("too many properties and property counts to enforce exactly",
                                     pointer=nodes[0].ptr, keyword="maxProperties")

        bit = {k: 1 << j for j, k in enumerate(tracked)}
        PB = 1 << len(tracked)
        if (n_def + 1) * (C + 1) * PB > MAX_GRAPH_STATES:
            raise UnsupportedFeature("too many properties, counts and presence constraints to enforce exactly",
                                     pointer=nodes[0].ptr, keyword="properties")

        def sid(i: int, c: int, p: int = 0) -> int:
            return (i * (C + 1) + c) * PB + p

        edges = []
        for i, (k, e) in enumerate(members):
            kb = bit.get(k, 0)
            for c in range(C + 1):
                for p in range(PB):
                    if k not in required:
                        edges.append((sid(i, c, p), None, sid(i + 1, c, p)))
                    if maxp is not None and c >= maxp:
                        continue
                    nc = min(c + 1, C)
                    edges.append((sid(i, c, p), e if c == 0 else seq(self.COMMA, e), sid(i + 1, nc, p | kb)))
        if add_member is not None:
            for c in range(C + 1):
                if maxp is not None and c >= maxp:
                    continue
                nc = min(c + 1, C)
                for p in range(PB):
                    edges.append((sid(n_def, c, p), add_member if c == 0 else seq(self.COMMA, add_member),
                                  sid(n_def, nc, p)))
        finals = tuple(sid(n_def, c, p) for c in range(C + 1) for p in range(PB) if c >= minp and all(
            eval_presence(pr, {k for k in tracked if p & bit[k]}) for pr in presence))
        if not finals:
            return None
        body = Graph((n_def + 1) * (C + 1) * PB, tuple(edges), sid(0, 0), finals)
        return self.rule("obj", seq(self.LBRACE, body, self.RBRACE))

    def any_order_members(self, members: list, add_member, required: set, tracked: list, presence: list,
                          minp: int, maxp: int | None):
        """Members in any order: the automaton tracks which keys were seen (all of them when
        there are few, else the required and presence-tested ones, letting other optional keys
        repeat -- a repeated key's every value still satisfies its schema, and a JSON parser
        keeps one).  ``_NOT_FINITE`` when that cannot be exact (the caller keeps schema order)."""
        keys = [k for k, _ in members]
        watched = keys if len(keys) <= ANY_ORDER_TRACK_ALL else sorted(set(tracked) | (required & set(keys)))
        if len(watched) > ANY_ORDER_MAX_TRACKED or (minp and len(watched) < len(keys)):
            return _NOT_FINITE
        if any(k not in keys for k in required):
            return None  # a required key with no allowed value
        bit = {k: 1 << j for j, k in enumerate(watched)}
        S = 1 << len(watched)
        C = maxp if maxp is not None else max(minp, 1)
        if S * (C + 1) > MAX_GRAPH_STATES:
            return _NOT_FINITE

        def sid(seen: int, c: int) -> int:
            return seen * (C + 1) + c

        # one COMMA edge per state into a "after the comma" twin (S * (C + 1) onward), then the
        # members: the rule automaton stays deterministic on its first symbol, small to build.  The
        # members that change no tracked bit are one rule of their own, one edge per state: a
        # 40-property object with 6 tracked keys is 128 states of 7 edges, not of 41
        free = [e for k, e in members if k not in bit] + ([add_member] if add_member is not None else [])
        moves = [(bit[k], e) for k, e in members if k in bit]
        if len(free) > 1 and S > 1:
            moves.append((0, self.rule("mems", alt(*free))))
        else:
            moves += [(0, e) for e in free]
        twin = S * (C + 1)
        edges = []
        for seen in range(S):
            for c in range(C + 1):
                if maxp is not None and c >= maxp:
                    continue
                nc = min(c + 1, C)
                src = sid(seen, c)
                if c > 0:
                    edges.append((src, self.COMMA, twin + src))
                    src = twin + src
                for b, e in moves:
                    if b and seen & b:
                        continue
                    edges.append((src, e, sid(seen | b, nc)))
        req_bits = sum(bit[k] for k in required if k in bit)
        finals = tuple(sid(seen, c) for seen in range(S) for c in range(C + 1)
                       if c >= minp and seen & req_bits == req_bits
                       and all(eval_presence(pr, {k for k in watched if seen & bit[k]}) for pr in presence))
        if not finals:
            return None
        return Graph(2 * S * (C + 1), tuple(edges), sid(0, 0), finals)

    def checked_object(self, members: list, add_member, required: set, presence: list, minp: int,
                       maxp: int | None) -> Expr | None:
        """Members in any order when there are too many keys to track in the automaton: any member
        may follow any other, and the distinct keys are checked when the object closes (required
        keys, presence conditions, property counts: ``structgen.engine.checks``), so the
        token writing the ``}`` of an object that misses one is refused."""
        if not required <= {k for k, _ in members}:
            return None  # a required key with no allowed value
        moves = [e for _, e in members] + ([add_member] if add_member is not None else [])
        if not moves:
            return self.rule("obj", seq(self.LBRACE, self.RBRACE)) if minp == 0 and not required else None
        # states: 0 before the first member, 1 after a member, 2 after a comma
        edges = [(0, e, 1) for e in moves] + [(1, self.COMMA, 2)] + [(2, e, 1) for e in moves]
        sym = self.rule("cobj", seq(self.LBRACE, Graph(3, tuple(edges), 0, (0, 1)), self.RBRACE))
        self.ir.checks.append(KeySetCheck(sym.name, frozenset(required), tuple(presence), minp, maxp))
        return sym

    def additional_node(self, n: _Node) -> _Node:
        s = n.schema
        if "additionalProperties" in s:
            return _Node(s["additionalProperties"], n.base, f"{n.ptr}/additionalProperties")
        return _Node(False if self.opts.strict else True, n.base, f"{n.ptr}/additionalProperties")

    def additional_members(self, nodes: list[_Node], defined: list[str], names_nodes: list[_Node]) -> Expr | None:
        """Members whose key is not defined: one alternative per region of the key space."""
        patterns: list[tuple[_Node, str, Any]] = []
        for n in nodes:
            for pat, ps in (n.schema.get("patternProperties") or {}).items():
                patterns.append((n, pat, ps))
        base = string_dfa()
        if defined:
            base = difference_literals(base, string_forms(defined))
        if len(patterns) > MAX_PATTERN_PROPERTIES:
            self.unsupported(nodes[0], "patternProperties",
                             f"more than {MAX_PATTERN_PROPERTIES} patternProperties on one object")
            return self.loose_members(nodes, base, patterns)
        if names_nodes:
            try:
                nd = self.key_dfa(names_nodes)
            except UnsupportedFeature as e:
                self.unsupported(nodes[0], "propertyNames", str(e).split(": ", 1)[-1])
                nd = string_dfa()  # any key here; the check at the object's end enforces the names
            if nd is None:
                return None
            base = intersect(base, nd)
        try:
            for n, pat, _ in patterns:
                self.pattern_dfa(pat, n)
        except UnsupportedFeature as e:
            self.unsupported(nodes[0], "patternProperties", str(e).split(": ", 1)[-1])
            return self.loose_members(nodes, base, patterns)
        alts = []
        for mask in range(1 << len(patterns)):
            d = base
            vnodes: list[_Node] = []
            for j, (n, pat, ps) in enumerate(patterns):
                pd = self.pattern_dfa(pat, n)
                if mask >> j & 1:
                    d = intersect(d, pd)
                    vnodes.append(_Node(ps, n.base, f"{n.ptr}/patternProperties/{_esc(pat)}"))
                else:
                    d = difference(d, pd)
                if d.is_empty():
                    break
            if d.is_empty():
                continue
            for n in nodes:
                if not any(pn is n and mask >> j & 1 for j, (pn, _, _) in enumerate(patterns)):
                    vnodes.append(self.additional_node(n))
            e = self.value(vnodes)
            if e is None:
                continue
            key = self.term(_other_key_term(defined, mask, patterns, names_nodes), d, "KEY")
            alts.append(seq(key, self.COLON, e))
        return alt(*alts) if alts else None

    def loose_members(self, nodes: list[_Node], keys: DFA, patterns: list) -> Expr | None:
        """Undefined members when their patterns cannot be compiled exactly (too many to split the
        key space by, or regex features beyond a finite automaton): one member per pattern -- its
        keys (any key where the pattern has no automaton) with its value -- and one for the keys
        no pattern matches, with the additional schema.  A key matching several patterns gets
        any one of their values: an over-approximation the caller has left to a check at the
        value boundary (``unsupported``), which validates the whole object when it closes."""
        alts = []
        covered: DFA | None = None  # the keys some pattern matches (None: unknown)
        exact = True
        for n, pat, ps in patterns:
            try:
                pd = self.pattern_dfa(pat, n)
            except UnsupportedFeature:
                pd, exact = None, False
            kd = keys if pd is None else intersect(keys, pd)
            if pd is not None and exact:
                covered = pd if covered is None else union(covered, pd)
            v = self.value([_Node(ps, n.base, f"{n.ptr}/patternProperties/{_esc(pat)}")])
            if v is None or kd.is_empty():
                continue
            alts.append(seq(self.term(("loosekey", id(n.schema), pat, id(keys)), kd, "KEY"), self.COLON, v))
        v = self.value([self.additional_node(n) for n in nodes])
        if v is not None:
            kd = keys
            if exact and covered is not None:
                try:
                    kd = difference(keys, covered)
                except GrammarError:
                    kd = keys
            if not kd.is_empty():
                alts.append(seq(self.term(("loosekey", "additional", id(keys)), kd, "KEY"), self.COLON, v))
        return alt(*alts) if alts else None

    def pattern_dfa(self, pat: str, n: _Node) -> DFA:
        try:
            return string_dfa((pat,))
        except (UnsupportedFeature, GrammarError) as e:
            raise UnsupportedFeature(str(e).split(": ", 1)[-1] if isinstance(e, UnsupportedFeature) else str(e),
                                     pointer=f"{n.ptr}/patternProperties", keyword="patternProperties") from None

    def key_dfa(self, names_nodes: list[_Node]) -> DFA | None:
        """propertyNames as a string DFA (string keywords only)."""
        e = self.value(names_nodes + [_Node({"type": "string"}, names_nodes[0].base, names_nodes[0].ptr)])
        if e is None:
            return None
        d = self._terminal_union(e)
        if d is None:
            raise UnsupportedFeature("propertyNames must be a string schema", pointer=names_nodes[0].ptr,
                                     keyword="propertyNames")
        return d


# --------------------------------------------------------------------------------------
# small helpers


_PRESENCE_KEYS = {"required", "anyOf", "oneOf", "allOf", "not"}


def _presence_only(x) -> bool:
    """A schema that only tests which object keys are present."""
    if isinstance(x, bool):
        return True
    if not isinstance(x, dict):
        return False
    keys = {k for k in x if k not in ANNOTATIONS}
    if not keys or not keys <= _PRESENCE_KEYS:
        return False
    if "required" in keys and not (isinstance(x["required"], list) and all(isinstance(k, str) for k in x["required"])):
        return False
    for kw in ("anyOf", "oneOf", "allOf"):
        if kw in keys and not (isinstance(x[kw], list) and x[kw] and all(_presence_only(b) for b in x[kw])):
            return False
    if "not" in keys and not _presence_only(x["not"]):
        return False
    return True


def _presence_ast(x):
    if x is True:
        return ("const", True)
    if x is False:
        return ("const", False)
    parts = []
    if "required" in x:
        parts.append(("req", tuple(x["required"])))
    for kw, tag in (("anyOf", "any"), ("oneOf", "one"), ("allOf", "all")):
        if kw in x:
            parts.append((tag, [_presence_ast(b) for b in x[kw]]))
    if "not" in x:
        parts.append(("not", _presence_ast(x["not"])))
    return ("all", parts) if len(parts) != 1 else parts[0]


def _simple_valid(value, schema) -> bool:
    """Validity under a schema made only of type / enum / const / nullable."""
    if schema is True:
        return True
    if schema is False:
        return False
    t = schema.get("type")
    if t is not None:
        ts = {t} if isinstance(t, str) else set(t)
        if schema.get("nullable") is True:
            ts.add("null")
        vt = _json_type(value)
        if not (vt in ts or (vt == "integer" and "number" in ts)):
            return False
    if "enum" in schema and not _in_enum(value, schema["enum"]):
        return False
    if "const" in schema and not _json_eq(value, schema["const"]):
        return False
    return True


_NOT_FINITE = object()
#: Enums with more strings than this lex them with one literal-set terminal (one per string below).
ENUM_STRINGS_AS_ONE_TERMINAL = 64
#: uniqueItems is compiled for item sets up to this size (one automaton state per subset).
MAX_UNIQUE_VALUES = 8
#: The JSON type a keyword constrains (values of other types satisfy it vacuously).
_KEYWORD_TYPE = {
    **{k: "object" for k in ("properties", "patternProperties", "additionalProperties", "required", "minProperties",
                             "maxProperties", "propertyNames", "dependencies", "dependentRequired",
                             "dependentSchemas", "unevaluatedProperties")},
    **{k: "array" for k in ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
                            "contains", "minContains", "maxContains", "unevaluatedItems")},
    **{k: "string" for k in ("minLength", "maxLength", "pattern", "format")},
    **{k: "number" for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")},
}


def _number_spellings(v) -> str:
    """Regex of every positional JSON spelling of the number ``v`` (1 -> 1, 1.0, 1.00, ...)."""
    from decimal import Decimal

    d = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    if d == 0:
        return r"-?0(\.0+)?"
    text = format(abs(d), "f")
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0")
    sign = "-" if d < 0 else ""
    return sign + whole + (r"\." + frac + "0*" if frac else r"(\.0+)?")


def _trivial(s) -> bool:
    """True for schemas that constrain nothing (true, {}, or annotations only)."""
    return s is True or (isinstance(s, dict) and ANNOTATIONS.issuperset(s))


def _tighten(kw: dict, arg: str, v) -> None:
    if arg not in kw:
        kw[arg] = v
    elif arg in ("minimum", "exclusive_minimum"):
        kw[arg] = max(kw[arg], v)
    else:
        kw[arg] = min(kw[arg], v)


def _nonneg(v, n: _Node, name: str) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise SchemaError(f"{name} must be a non-negative integer", pointer=f"{n.ptr}/{name}")
    return v


def _search(pat: str, key: str, n: _Node) -> bool:
    try:
        return re.search(pat, key) is not None
    except re.error as e:
        raise SchemaError(f"invalid pattern {pat!r}: {e}", pointer=f"{n.ptr}/patternProperties") from None


def _json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _json_eq(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_eq(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_eq(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _json_key(v):
    """A hashable key equal for JSON-equal values (1 == 1.0, true != 1, key order ignored)."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):
        return ("n", int(v) if isinstance(v, float) and v.is_integer() else v)
    if isinstance(v, list):
        return ("l", tuple(_json_key(x) for x in v))
    if isinstance(v, dict):
        return ("d", frozenset((k, _json_key(x)) for k, x in v.items()))
    return (type(v).__name__, v)


def _json_in(v, vals) -> bool:
    return any(_json_eq(v, x) for x in vals)


_ENUM_KEYS: dict[int, tuple[list, frozenset]] = {}


def _in_enum(v, enum: list) -> bool:
    """``v`` JSON-equal to a member of ``enum`` (key sets memoised per list: checking every
    member of a 20,000-value enum against it must stay linear)."""
    if len(enum) < 16:
        return _json_in(v, enum)
    hit = _ENUM_KEYS.get(id(enum))
    if hit is None or hit[0] is not enum:
        if len(_ENUM_KEYS) > 256:
            _ENUM_KEYS.clear()
        hit = _ENUM_KEYS[id(enum)] = (enum, frozenset(_json_key(x) for x in enum))
    return _json_key(v) in hit[1]


def _without_enum(n: _Node) -> _Node:
    """``n`` without its ``enum`` and ``const`` (the same node when it has neither)."""
    s = n.schema
    if not isinstance(s, dict) or ("enum" not in s and "const" not in s):
        return n
    return _Node({k: v for k, v in s.items() if k != "enum" and k != "const"}, n.base, n.ptr)


def _json_filter(values: list, allowed: list) -> list:
    """The members of ``values`` JSON-equal to some member of ``allowed`` (linear time)."""
    keys = {_json_key(x) for x in allowed}
    return [v for v in values if _json_key(v) in keys]


def _dedupe(vals: list) -> list:
    out: list = []
    seen: set = set()
    for v in vals:
        k = _json_key(v)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


def _disjoint(a: dict, b: dict) -> bool:
    if not (a["types"] & b["types"]):
        return True
    if a["values"] is not None and b["values"] is not None:
        return not any(_json_in(v, b["values"]) for v in a["values"])
    if a["values"] is not None and all(_json_type(v) not in b["types"] for v in a["values"]):
        return True
    if b["values"] is not None and all(_json_type(v) not in a["types"] for v in b["values"]):
        return True
    common = set(a["discr"]) & set(b["discr"])
    for p in common:
        if not any(_json_in(v, b["discr"][p]) for v in a["discr"][p]):
            return True
    # objects: a closed object cannot have a key the other requires
    only_obj = a["types"] & b["types"] <= {"object"}
    if only_obj:
        if a["closed"] is not None and b["required"] - a["closed"]:
            return True
        if b["closed"] is not None and a["required"] - b["closed"]:
            return True
    if a["dfa"] is not None and b["dfa"] is not None and (a["types"] & b["types"]) <= {"string"}:
        return intersect(a["dfa"], b["dfa"]).is_empty()
    return False


def schema_to_ir(schema, opts: SchemaOptions) -> tuple[GrammarIR, Any]:
    """Compile a JSON Schema to IR; returns (ir, final-output validator)."""
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}")
    check_schema(schema)
    c = _Compiler(schema, opts)
    try:
        ir = c.compile()
    except _BranchBudget:
        # nested anyOf/oneOf distribute into too many conjunctions: every anyOf/oneOf of the schema is
        # over-approximated by the value without it and checked as that value completes (or refused)
        c = _Compiler(schema, opts, loose_branches=True)
        ir = c.compile()
    return ir, c.validator()


__all__ = ["SchemaOptions", "schema_to_ir", "normalize_schema_input", "make_validator", "check_schema", "EPSILON"]
