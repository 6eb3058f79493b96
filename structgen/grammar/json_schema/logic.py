"""Logic: ``allOf``/``$ref`` flattening into conjunctions, ``anyOf``/``oneOf`` distribution,
``not`` and ``if``/``then``/``else`` through exact negation, presence predicates, and the
tests that tell branches apart (disjoint branches of ``oneOf`` need no negation).
"""
from __future__ import annotations

from ...errors import GrammarError, SchemaError, UnsupportedFeature
from ..formats import FORMAT_REGEXES, UNSUPPORTED_FORMATS
from ...automata.fsa import DFA, intersect, union
from ..ir import Alt, Expr, Sym, alt
from ..negation import is_simple_not, is_some_key_not, negate
from ..presence import eval_presence
from . import limits
from .json_values import NOT_FINITE, json_filter, json_in, json_type, trivial
from .limits import ANNOTATIONS, CHECKED_AT_VALUE_BOUNDARY, KEYWORD_TYPE, MAX_COMBINATOR_DEPTH, TYPES
from .refs import SchemaNode, escape_pointer, ref_overrides, shown_uri


class BranchBudget(Exception):
    """anyOf/oneOf branches over MAX_BRANCH_CONJUNCTIONS: compile again, loosely (see schema_to_ir)."""


class JoinFailed(Exception):
    """The oneOf at ``ptr``, its branches joined with the others' negations, holds more than an
    automaton can: compile again with that oneOf checked (see schema_to_ir)."""

    def __init__(self, ptr: str):
        super().__init__(ptr)
        self.ptr = ptr


UNEVALUATED = ("unevaluatedProperties", "unevaluatedItems")

PRESENCE_KEYS = {"required", "anyOf", "oneOf", "allOf", "not"}
#: what flatten keeps out of a node's own keywords (besides those its draft does not know)
NOT_OWN = ANNOTATIONS | {"$ref", "$dynamicRef", "allOf"}


def presence_only(x) -> bool:
    """A schema that only tests which object keys are present."""
    if isinstance(x, bool):
        return True
    if not isinstance(x, dict):
        return False
    keys = {k for k in x if k not in ANNOTATIONS}
    if not keys or not keys <= PRESENCE_KEYS:
        return False
    if "required" in keys and not (isinstance(x["required"], list) and all(isinstance(k, str) for k in x["required"])):
        return False
    for kw in ("anyOf", "oneOf", "allOf"):
        if kw in keys and not (isinstance(x[kw], list) and x[kw] and all(presence_only(b) for b in x[kw])):
            return False
    if "not" in keys and not presence_only(x["not"]):
        return False
    return True


def presence_ast(x):
    if x is True:
        return ("const", True)
    if x is False:
        return ("const", False)
    parts = []
    if "required" in x:
        parts.append(("req", tuple(x["required"])))
    for kw, tag in (("anyOf", "any"), ("oneOf", "one"), ("allOf", "all")):
        if kw in x:
            parts.append((tag, [presence_ast(b) for b in x[kw]]))
    if "not" in x:
        parts.append(("not", presence_ast(x["not"])))
    return ("all", parts) if len(parts) != 1 else parts[0]


def schema_dependencies(s: dict) -> list[tuple[str, str, dict]]:
    """The entries of ``dependencies`` / ``dependentSchemas`` whose schema tests more than which
    keys are present (those the presence predicates cannot hold): ``(keyword, key, schema)``."""
    return [(kw, key, sub) for kw in ("dependencies", "dependentSchemas") if isinstance(s.get(kw), dict)
            for key, sub in s[kw].items() if isinstance(sub, dict) and not presence_only(sub)]


def dependency_branches(key: str, sub: dict) -> dict:
    """``dependencies: {key: sub}`` as three disjoint branches -- not an object, an object without
    ``key``, an object with ``key`` that meets ``sub`` -- so that the automata hold it (each branch
    compiles like any anyOf branch) instead of a check when the object closes, where a wrong key or
    value read long before has already doomed the object."""
    return {"anyOf": [{"not": {"type": "object"}}, {"not": {"required": [key]}},
                      {"type": "object", "required": [key], "allOf": [sub]}]}


def types_disjoint(a: dict, b: dict) -> bool:
    if not (a["types"] & b["types"]):
        return True
    if a["values"] is not None and b["values"] is not None:
        return not any(json_in(v, b["values"]) for v in a["values"])
    if a["values"] is not None and all(json_type(v) not in b["types"] for v in a["values"]):
        return True
    if b["values"] is not None and all(json_type(v) not in a["types"] for v in b["values"]):
        return True
    # objects only (a branch without "type" matches every non-object whatever its properties say):
    # a required property whose values cannot agree; a closed object cannot have a key the other requires
    only_obj = a["types"] & b["types"] <= {"object"}
    if only_obj:
        for p in set(a["discr"]) & set(b["discr"]):
            if not any(json_in(v, b["discr"][p]) for v in a["discr"][p]):
                return True
        if a["closed"] is not None and b["required"] - a["closed"]:
            return True
        if b["closed"] is not None and a["required"] - b["closed"]:
            return True
    if a["dfa"] is not None and b["dfa"] is not None and (a["types"] & b["types"]) <= {"string"}:
        try:
            return intersect(a["dfa"], b["dfa"]).is_empty()
        except GrammarError:  # a product over the automata's size limit (large grounded spans): not proven
            return False
    return False


class LogicMixin:
    """The logic part of :class:`~structgen.grammar.json_schema.compiler.SchemaCompiler`."""

    def flatten(self, nodes: list[SchemaNode], active: frozenset) -> list[SchemaNode] | None:
        """Expand allOf and $ref into one flat list of dict nodes; None if any is false."""
        out: list[SchemaNode] = []
        for n in nodes:
            s = n.schema
            if trivial(s):
                continue
            if s is False:
                return None
            if not isinstance(s, dict):
                raise SchemaError(f"a schema must be an object or a boolean, not {type(s).__name__}", pointer=n.ptr)
            base = self.base_of(n)
            refs = [k for k in ("$ref", "$dynamicRef") if k in s]
            for kw in refs:
                target, tbase, tptr = self.resolve_ref(n, kw)
                tkey = (id(target), tbase)
                if tkey in active:
                    # validating the value would need validating the same value against the same schema
                    # first: no validator ends (jsonschema recurses until Python's stack is spent)
                    raise SchemaError(f"{kw} {s[kw]!r} ({shown_uri(base, s[kw])}) comes back to {tptr} before "
                                      f"any value is read: a reference cycle", pointer=n.ptr)
                sub = self.flatten([n.reached(target, tbase, tptr)], active | {tkey})
                if sub is None:
                    return None
                out.extend(sub)
            if refs and ref_overrides(n):
                continue  # drafts 4-7: the keywords beside "$ref" are not evaluated
            unknown = self.unknown_keywords(n)
            if "allOf" in s and "allOf" not in unknown:
                all_of = s["allOf"]
                if not isinstance(all_of, list) or not all_of:
                    raise SchemaError("allOf must be a non-empty array", pointer=n.ptr + "/allOf")
                sub = self.flatten([n.child(x, f"{n.ptr}/allOf/{i}", base) for i, x in enumerate(all_of)], active)
                if sub is None:
                    return None
                out.extend(sub)
            not_own = NOT_OWN | unknown  # what the node's own keywords leave out
            own_keys = [k for k in s if k not in not_own]
            if own_keys:
                copy = "$ref" in s or "$dynamicRef" in s or "allOf" in s or not unknown.isdisjoint(s)
                d = self.derived(s, "own", lambda: {k: s[k] for k in own_keys}) if copy else s
                logic = self.rewrite_logic(d, base, n.ptr, n.own_draft)
                if logic is not None:
                    sub = self.flatten([SchemaNode(logic, base, n.ptr, n.inner_scope(), n.draft, n.own_draft)], active)
                    if sub is None:
                        return None
                    out.extend(sub)
                    continue
                out.append(SchemaNode(d, base, n.ptr, n.inner_scope(), n.draft, n.own_draft))
        return out

    def rewrite_logic(self, s: dict, base: str, ptr: str, draft: int | None = None) -> dict | None:
        """``not`` of a compound schema and ``if``/``then``/``else`` as conjunctions and
        disjunctions of negatable parts (structgen.grammar.negation), and schema-form
        dependencies as disjunctions (see :func:`dependency_branches`); None when there is
        nothing to rewrite or the negation cannot be expressed (reported later)."""
        needs_not = "not" in s and not is_simple_not(s["not"]) and not presence_only(s["not"]) \
            and not is_some_key_not(s["not"])
        needs_if = "if" in s and ("then" in s or "else" in s)
        schema_deps = schema_dependencies(s)
        if not (needs_not or needs_if or schema_deps):
            return None

        def build():
            resolve = self.local_resolver(base, ptr)
            rest = {k: v for k, v in s.items() if k not in ("not", "if", "then", "else")}
            rewritten = {(kw, key) for kw, key, _ in schema_deps}
            for kw in {kw for kw, _ in rewritten}:
                left = {k: v for k, v in s[kw].items() if (kw, k) not in rewritten}
                if left:
                    rest[kw] = left
                else:
                    del rest[kw]
            extra = [dependency_branches(key, sub) for _, key, sub in schema_deps]
            # a part that cannot be negated stays as written (a check, reported later); with
            # nothing else rewritten there is nothing to return
            if "not" in s:
                neg = negate(s["not"], resolve, **self.negation_options(draft)) if needs_not else None
                if neg is not None:
                    extra.append(neg)
                elif needs_not and not schema_deps:
                    return None
                else:
                    rest["not"] = s["not"]
            if needs_if:
                cond = s["if"]
                ncond = negate(cond, resolve, **self.negation_options(draft))
                if ncond is not None:
                    extra.append({"anyOf": [{"allOf": [cond, s.get("then", True)]},
                                            {"allOf": [ncond, s.get("else", True)]}]})
                elif not schema_deps:
                    return None
                else:
                    rest.update({k: s[k] for k in ("if", "then", "else") if k in s})
            return {**rest, "allOf": extra} if extra else rest

        return self.derived(s, "logic", build)

    def negation_options(self, draft: int | None) -> dict:
        """:func:`negate`'s options for a schema of ``draft``: the formats this compile asserts, and
        whether the draft has ``contains`` (draft-04 has not, so ``items`` cannot be negated there)."""
        return {**self.format_kinds(), "with_contains": draft != 4}

    def format_kinds(self) -> dict:
        """Which formats this compile asserts (and which it refuses), for negation."""
        if self.opts.format == "annotate":  # every value has every format
            return {"asserted_formats": frozenset(), "refused_formats": frozenset()}
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

    def conjunction(self, nodes: list[SchemaNode]) -> Expr | None:
        finite = self.finite_values(nodes)
        if finite is not NOT_FINITE:
            return finite
        nodes = [self.extract_presence(n) for n in nodes]
        for n in nodes:
            for k in n.schema:
                if k in CHECKED_AT_VALUE_BOUNDARY:
                    self.check_unsupported(n, k)
        # anyOf / oneOf: distribute the rest of the conjunction into each branch
        for i, n in enumerate(nodes):
            for kw in ("anyOf", "oneOf"):
                if kw in n.schema:
                    branches = n.schema[kw]
                    if not isinstance(branches, list) or not branches:
                        raise SchemaError(f"{kw} must be a non-empty array", pointer=f"{n.ptr}/{kw}")
                    rest = self.derived(n.schema, "-" + kw, lambda: {k: v for k, v in n.schema.items() if k != kw})
                    # inside a branch, a node copied without its anyOf/oneOf/allOf/if no longer sees the
                    # annotations of the subschemas beside it: its unevaluated* would reject what the branch
                    # evaluates.  The value's own check (registered above by check_unsupported) validates
                    # them against the schemas as written, so the copies drop them
                    others = [self.without_unevaluated(x) for x in nodes[:i] + [n.replaced(rest)] + nodes[i + 1:]]
                    if self.loose_branches:
                        # the value without this keyword holds every branch's values: an over-approximation,
                        # the keyword checked when the value completes (or refused: see unsupported)
                        self.unsupported(n, kw, f"its branches combine into over {limits.MAX_BRANCH_CONJUNCTIONS} "
                                                "conjunctions (nested anyOf/oneOf distribute over each other)")
                        return self.conjunction(others)
                    if kw == "oneOf" and len(branches) > 1 and n.ptr in self.loose_joins:
                        self.unsupported(n, kw, "its branches joined with the others' negations hold more "
                                                "than an automaton can")
                    elif kw == "oneOf" and len(branches) > 1:
                        joined = self.exclusive_branches(n, branches)
                        if joined is not branches:
                            outer = self._join
                            if outer is None:  # the branch work this join (and any inside it) may take
                                self._join = (n.ptr, self._branch_work + limits.MAX_JOIN_CONJUNCTIONS)
                            try:
                                return self.branch_union(n, kw, joined, others)
                            except UnsupportedFeature as e:
                                # a joined branch holds more than its automaton can (presence over too
                                # many keys, ...): compile again with this oneOf as anyOf over its
                                # branches as written, checked as the value completes (schema_to_ir)
                                raise JoinFailed(n.ptr) from e
                            finally:
                                self._join = outer
                    return self.branch_union(n, kw, branches, others)
        return self.typed(nodes)

    def branch_union(self, n: SchemaNode, kw: str, branches: list, others: list[SchemaNode]) -> Expr | None:
        """The union of ``others`` joined with each branch of ``n``'s ``kw`` (anyOf, or a oneOf
        whose branches exclude each other)."""
        alts = []
        self._combinator_depth += 1
        if self._combinator_depth > MAX_COMBINATOR_DEPTH:
            self._combinator_depth -= 1
            raise UnsupportedFeature(
                f"{kw} nested more than {MAX_COMBINATOR_DEPTH} levels without an object or array "
                "in between (a recursive reference through anyOf/oneOf)", pointer=n.ptr, keyword=kw)
        try:
            for j, b in enumerate(branches):
                self._branch_work += 1
                if self._join is not None and self._branch_work > self._join[1]:
                    raise JoinFailed(self._join[0])  # that oneOf's joins distribute too far: checked
                if self._branch_work > limits.MAX_BRANCH_CONJUNCTIONS:
                    raise BranchBudget()
                e = self.value(others + [n.child(b, f"{n.ptr}/{kw}/{j}")])
                if e is not None:
                    alts.append(e)
        finally:
            self._combinator_depth -= 1
        return alt(*alts) if alts else None

    def without_unevaluated(self, n: SchemaNode) -> SchemaNode:
        """``n`` without unevaluatedProperties/unevaluatedItems (see conjunction)."""
        s = n.schema
        if not any(k in s for k in UNEVALUATED):
            return n
        return n.replaced(self.derived(s, "-unevaluated", lambda: {k: v for k, v in s.items() if k not in UNEVALUATED}))

    def extract_presence(self, n: SchemaNode) -> SchemaNode:
        """Turn keywords that only test which keys are present (``required`` inside
        anyOf/oneOf/not, dependentRequired, array-form dependencies) into presence
        predicates that the object automaton tracks exactly."""
        s = n.schema
        preds = []
        drop = []
        for kw in ("anyOf", "oneOf"):
            v = s.get(kw)
            if isinstance(v, list) and v and all(presence_only(b) for b in v):
                preds.append(("any" if kw == "anyOf" else "one", [presence_ast(b) for b in v]))
                drop.append(kw)
        if "not" in s and presence_only(s["not"]) and not trivial(s["not"]):
            preds.append(("not", presence_ast(s["not"])))
            drop.append("not")
        for kw in ("dependentRequired", "dependencies", "dependentSchemas"):
            v = s.get(kw)
            if isinstance(v, dict) and v and all(isinstance(x, list) or presence_only(x) for x in v.values()):
                for key, x in v.items():
                    rhs = ("req", tuple(x)) if isinstance(x, list) else presence_ast(x)
                    preds.append(("any", [("not", ("has", (key,))), rhs]))
                drop.append(kw)
        if not preds:
            return n
        def build():
            d = {k: v for k, v in s.items() if k not in drop}
            d["__presence__"] = list(s.get("__presence__", [])) + preds
            return d

        d = self.derived(s, "presence", build)
        return n.replaced(d)

    def check_unsupported(self, n: SchemaNode, k: str) -> None:
        """A keyword of ``CHECKED_AT_VALUE_BOUNDARY``: left to a check (see ``unsupported``) unless
        it constrains nothing here (``if`` without ``then``/``else``, empty dependencies)."""
        s = n.schema
        v = s[k]
        if k == "if" and "then" not in s and "else" not in s:
            return
        if k in ("dependentRequired", "dependencies", "dependentSchemas") and not v:
            return
        self.unsupported(n, k)

    def exclusive_branches(self, n: SchemaNode, branches: list) -> list:
        """oneOf as anyOf: as is when the branches provably exclude each other; else split
        by JSON type (object keywords say nothing about strings, so three object branches
        all match every string), and within a type where branches still overlap, join
        each branch with the negations of the others (structgen.grammar.negation)."""
        sigs = [self.branch_signature(n.child(b, f"{n.ptr}/oneOf/{j}")) for j, b in enumerate(branches)]
        if all(self.signatures_disjoint(sigs[a], sigs[b]) for a in range(len(sigs)) for b in range(a + 1, len(sigs))):
            return branches

        def build():
            resolve = self.local_resolver(n.base, n.ptr)
            out = []
            for typ in ("null", "boolean", "object", "array", "string", "number"):
                kinds = [self.type_kind(n.child(b, f"{n.ptr}/oneOf/{j}"), typ) for j, b in enumerate(branches)]
                live = [i for i, k in enumerate(kinds) if k != "none"]
                alls = [i for i in live if kinds[i] == "all"]
                if not live or len(alls) >= 2:
                    continue  # no branch, or every value of the type matches two of them
                only = [{"type": typ}]
                if len(live) == 1:
                    out.append({"allOf": only + [branches[live[0]]]})
                    continue
                if not alls:
                    rs = [self.branch_signature(n.replaced({"allOf": only + [branches[i]]})) for i in live]
                    if all(self.signatures_disjoint(rs[a], rs[b]) for a in range(len(rs)) for b in range(a + 1, len(rs))):
                        out += [{"allOf": only + [branches[i]]} for i in live]
                        continue
                negs = {i: negate(branches[i], resolve, **self.negation_options(n.own_draft)) for i in live if i not in alls}
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

    def type_kind(self, node: SchemaNode, typ: str) -> str:
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
                applies = KEYWORD_TYPE.get(k)
                if applies is not None and applies != typ:
                    continue  # e.g. maxLength says nothing about numbers
                kind = "some"
        return kind

    def signatures_disjoint(self, a: dict, b: dict, depth: int = 0) -> bool:
        """Disjoint by the signatures themselves, or by a property both require whose
        values cannot agree (``type: {$ref: ...}`` discriminators, nested one level)."""
        if types_disjoint(a, b):
            return True
        if depth >= 2 or not (a["types"] & b["types"] <= {"object"}):
            return False
        for p in sorted(a["required"] & b["required"] & set(a["props"]) & set(b["props"])):
            pa = self.branch_signature(a["props"][p][0].replaced({"allOf": [x.schema for x in a["props"][p]]}))
            pb = self.branch_signature(b["props"][p][0].replaced({"allOf": [x.schema for x in b["props"][p]]}))
            if self.signatures_disjoint(pa, pb, depth + 1):
                return True
        return False

    def branch_signature(self, node: SchemaNode) -> dict:
        """What a branch can be: types, literal values, discriminating properties, scalar DFA."""
        flat = self.flatten([node], frozenset())
        sig: dict = {"types": set(TYPES), "values": None, "discr": {}, "closed": None, "required": set(), "dfa": None,
                     "props": {}}
        if flat is None:
            sig["types"] = set()
            return sig
        for x in flat:
            s = x.schema
            _check_signature_shapes(x)
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
                sig["values"] = vals if sig["values"] is None else json_filter(sig["values"], vals)
            req = set(s.get("required", []) or [])
            sig["required"] |= req
            for p, ps in (s.get("properties") or {}).items():
                sig["props"].setdefault(p, []).append(x.child(ps, f"{x.ptr}/properties/{escape_pointer(p)}"))
                if isinstance(ps, dict) and p in req:
                    if "const" in ps:
                        sig["discr"][p] = [ps["const"]]
                    elif isinstance(ps.get("enum"), list):
                        sig["discr"][p] = list(ps["enum"])
            if s.get("additionalProperties") is False and not s.get("patternProperties"):
                sig["closed"] = set(s.get("properties") or {})
        if sig["values"] is not None:
            sig["types"] &= {json_type(v) for v in sig["values"]} | (
                {"number"} if any(json_type(v) == "integer" for v in sig["values"]) else set())
        if sig["types"] <= {"string"} and sig["values"] is None:
            try:
                e = self.value([node])
                sig["dfa"] = self.terminal_union(e)
            except Exception:  # noqa: BLE001 - a signature is best effort
                sig["dfa"] = None
        return sig

    def terminal_union(self, e: Expr | None) -> DFA | None:
        if e is None:
            return None
        syms = [e] if isinstance(e, Sym) else list(e.items) if isinstance(e, Alt) else None
        if syms is None or not all(isinstance(x, Sym) and x.name in self.ir.terminals for x in syms):
            return None
        d = self.ir.terminals[syms[0].name].dfa
        for x in syms[1:]:
            d = union(d, self.ir.terminals[x.name].dfa)
        return d


def _check_signature_shapes(n: SchemaNode) -> None:
    """The keywords a branch signature reads, with the shapes the meta-schema requires: a ``$ref`` can
    reach a subschema where the meta-schema check never looked (under a key that is no keyword)."""
    s = n.schema
    t = s.get("type")
    if t is not None and not (t in TYPES or isinstance(t, list) and all(isinstance(x, str) and x in TYPES for x in t)):
        raise SchemaError(f"invalid type {t!r}", pointer=f"{n.ptr}/type")
    if "required" in s and not (isinstance(s["required"], list) and all(isinstance(k, str) for k in s["required"])):
        raise SchemaError("required must be an array of strings", pointer=f"{n.ptr}/required")
    if "properties" in s and not isinstance(s["properties"], dict):
        raise SchemaError("properties must be an object", pointer=f"{n.ptr}/properties")
