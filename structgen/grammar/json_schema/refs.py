"""``$ref`` resolution (JSON pointers, ``$id``, ``$anchor``, ``$dynamicAnchor``) within the schema and
across the documents of a registry, and the node type the compiler passes around: a subschema with
its parent's base URI and its JSON pointer (a URI-prefixed one inside another document).
"""
from __future__ import annotations

from types import EllipsisType
from typing import Any
import functools
import re
from urllib.parse import unquote, urldefrag
from urllib.parse import urljoin as _urljoin

from ...errors import SchemaError
from .input import subschema_draft
from .schema_check import check_schema
from .documents import Documents


DEFAULT_BASE = "https://structgen.invalid/schema.json"

#: keywords whose value is JSON data, not schemas (no $id or anchor inside counts)
VALUE_KEYWORDS = frozenset({"enum", "const", "examples", "default", "example"})

#: keywords whose value maps names to schemas (a name there is not a keyword)
NAMED_SCHEMAS = frozenset({"$defs", "definitions", "properties", "patternProperties", "dependentSchemas",
                           "dependencies"})


class Resolver:
    """Resolves ``$ref`` through ``$id``, ``$anchor``, ``$dynamicAnchor`` and JSON pointers, in the
    schema and in the other documents ``documents`` holds (loaded when a ``$ref`` first names them).

    A location is returned as (subschema, its *parent's* base URI, its JSON pointer): the base URI the
    subschema's own ``$id`` is resolved against (``base_of``), as for any subschema met walking down."""

    def __init__(self, root, documents: Documents | None = None, draft: int | None = None):
        self.root = root
        self.draft = draft  # the root's: what "$id" means in it (own_base); other documents declare their own
        self.documents = documents or Documents()
        self.resources: dict[str, Any] = {}
        self.anchors: dict[str, tuple[Any, str, str]] = {}
        #: per resource URI, its $dynamicAnchor names -> location (the dynamic scope's candidates)
        self.dynamic_anchors: dict[str, dict[str, tuple[Any, str, str]]] = {}
        self._resolved: dict[tuple[str, str], tuple[Any, str, str]] = {}
        self.base = own_base(root, DEFAULT_BASE, draft)
        self._index(root, DEFAULT_BASE, "#", draft=draft)
        self.resources.setdefault(urldefrag(self.base)[0], (root, DEFAULT_BASE, "#"))

    def _index(self, node, base: str, ptr: str, names: bool = False, draft: int | None = None) -> None:
        """Record the resources and anchors under ``node`` (``base``: its parent's base URI;
        ``names``: ``node`` maps names to schemas, as ``$defs`` does, rather than being a schema;
        ``draft``: the document's, which decides what ``$id`` and ``id`` mean)."""
        if names:
            for k, v in node.items():
                if isinstance(v, (dict, list)):
                    self._index(v, base, f"{ptr}/{escape_pointer(k)}", draft=draft)
            return
        if isinstance(node, dict):
            own = base
            ident = schema_id(node, draft)
            if ident is None and isinstance(node.get("id"), str) and not isinstance(node.get("type"), dict) \
                    and not ref_hides_siblings(node, draft):
                # draft-04 "id", only when it looks like a URI reference (not a property named id)
                if "properties" not in str(ptr).rsplit("/", 1)[-1]:
                    ident = node.get("id") if node.get("id", "").startswith(("#", "http", "urn", "/")) else None
            if ident:
                url, frag = urldefrag(urljoin(base, ident))
                if frag and not frag.startswith("/"):
                    self.anchors[url + "#" + frag] = (node, base, ptr)
                elif not frag:
                    self.resources.setdefault(url, (node, base, ptr))
                # else a JSON-pointer fragment ("id": "#/definitions/x", seen in draft-04 schemas): it only
                # names this location, which pointers from the document reach anyway
                own = url
            anchor = node.get("$anchor")
            if isinstance(anchor, str):
                self.anchors.setdefault(own + "#" + anchor, (node, base, ptr))
            dyn = node.get("$dynamicAnchor")
            if isinstance(dyn, str):
                # a $ref to it is a plain $ref to an anchor; a $dynamicRef looks through the dynamic scope
                self.anchors.setdefault(own + "#" + dyn, (node, base, ptr))
                self.dynamic_anchors.setdefault(own, {}).setdefault(dyn, (node, base, ptr))
            for k, v in node.items():
                # only containers can hold an $id or $anchor: no pointer is built for a leaf; values
                # (enum, default, ...) hold none
                if isinstance(v, (dict, list)) and k not in VALUE_KEYWORDS:
                    self._index(v, own, f"{ptr}/{escape_pointer(k)}", names=k in NAMED_SCHEMAS and isinstance(v, dict),
                                draft=draft)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if isinstance(v, (dict, list)):
                    self._index(v, base, f"{ptr}/{i}", draft=draft)

    def _load(self, url: str, ref: str, ptr: str):
        """A document another one names, from the registry or the meta-schemas, indexed once."""
        doc = self.documents.get(url, pointer=ptr, ref=ref)
        where = f"{url}#"
        if url not in _META_URLS:  # the meta-schemas are right by definition (and large)
            _check_document(doc, url, ref, ptr)
        self._index(doc, url, where, draft=subschema_draft(doc, self.draft))
        self.resources[url] = (doc, url, where)
        return self.resources[url]

    def resolve(self, ref: str, base: str, ptr: str):
        """(subschema, its parent's base URI, its JSON pointer) of ``ref`` met at ``ptr`` under ``base``
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
            res = self._load(url, ref, ptr)
            if full in self.anchors:
                return self.anchors[full]
        node, pbase, rptr = res
        if not frag:
            return res
        if not frag.startswith("/"):
            raise SchemaError(f"$ref {ref!r}: anchor {frag!r} not found in {url!r}", pointer=ptr)
        cur, parent, own = node, pbase, own_base(node, pbase, self.draft)
        cptr = rptr
        for part in frag.split("/")[1:]:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
                cur = cur[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} does not resolve in {url!r}", pointer=ptr)
            cptr = f"{cptr}/{escape_pointer(part)}"
            if isinstance(cur, dict):
                parent, own = own, own_base(cur, own, self.draft)
        return cur, parent, cptr


def ref_hides_siblings(schema, draft: int | None) -> bool:
    """Whether ``schema``'s other keywords mean nothing beside its ``$ref`` (drafts 4 to 7, as
    jsonschema reads them): an ``$id`` or ``id`` there changes no base URI."""
    return draft in (4, 6, 7) and isinstance(schema, dict) and "$ref" in schema


def schema_id(schema, draft: int | None) -> str | None:
    """``schema``'s ``$id`` where its draft reads one: not in draft-04 (whose keyword is ``id``), not
    beside a ``$ref`` before 2019-09 (the poetry and CryEngine schemas on SchemaStore have both)."""
    if not isinstance(schema, dict) or draft == 4 or ref_hides_siblings(schema, draft):
        return None
    ident = schema.get("$id")
    return ident if isinstance(ident, str) else None


def _meta_urls() -> frozenset:
    from jsonschema_specifications import REGISTRY

    return frozenset(uri.rstrip("#") for uri in REGISTRY)


_META_URLS = _meta_urls()


def _check_document(doc, url: str, ref: str, ptr: str) -> None:
    """A registry document is a schema like the root: its meta-schema check, its errors named with the
    document's URI and the $ref that reached it (a malformed document never compiles)."""
    try:
        check_schema(doc)
    except SchemaError as e:
        inner = (e.pointer or "#")[1:]
        raise SchemaError(f"registry document {url!r} (reached by $ref {ref!r} at {ptr}): {e.reason}",
                          pointer=f"{url}#{inner}") from None


def own_base(schema, parent_base: str, draft: int | None = None) -> str:
    """The base URI inside ``schema``: its ``$id`` (as its ``draft`` reads it) resolved against its
    parent's base."""
    ident = schema_id(schema, draft)
    return urldefrag(urljoin(parent_base, ident))[0] if ident is not None else parent_base


def shown_uri(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` as a message shows it (the root's made-up base left out)."""
    full = urljoin(base, ref)
    return full[len(DEFAULT_BASE):] if full.startswith(DEFAULT_BASE) else full


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@functools.lru_cache(maxsize=65536)
def urljoin(base: str, ref: str) -> str:
    """RFC 3986 reference resolution, also for bases urllib does not treat as hierarchical
    (``urn:uuid:...``, ``tag:``): a fragment replaces the base's, an absolute URI stands alone."""
    if not ref:
        return base
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if _SCHEME.match(ref):
        return ref
    return _urljoin(base, ref)


def escape_pointer(k) -> str:
    return str(k).replace("~", "~0").replace("/", "~1")


class SchemaNode:
    """A subschema with its parent's base URI, its JSON pointer and ``scope``: the schema resources
    (base URIs, outermost first, each once) evaluation passed through to reach it -- the dynamic
    scope a ``$dynamicRef`` inside it is resolved in.

    Dialects, as jsonschema evaluates them: ``draft`` is the draft of the schema that reached this one
    (its parent, or the schema holding the ``$ref``), which decides whether the keywords beside a
    ``$ref`` here count (not before draft 2019-09); ``own_draft`` is this schema's ``$schema`` or else
    ``draft``, which decides what its keywords mean and is what the schemas it reaches inherit.  None is
    an undeclared root's (2020-12, with older drafts' spellings accepted)."""

    __slots__ = ("schema", "base", "ptr", "scope", "draft", "own_draft")

    def __init__(self, schema, base: str, ptr: str, scope: tuple[str, ...] = (), draft: int | None = None,
                 own_draft: int | None | EllipsisType = ...):
        self.schema = schema
        self.base = base
        self.ptr = ptr
        self.scope = scope
        self.draft = draft
        if own_draft is ...:  # not given: this schema's own $schema, else the draft that reached it
            from .input import check_schema, subschema_draft

            own_draft = subschema_draft(schema, draft)
        self.own_draft = own_draft

    def key(self):
        return (id(self.schema), self.base, self.draft, self.own_draft)

    def inner_scope(self) -> tuple[str, ...]:
        """The dynamic scope inside this subschema: ``scope`` and, when it starts a resource not in
        it yet, that resource."""
        own = own_base(self.schema, self.base, self.own_draft)
        return self.scope if own in self.scope else self.scope + (own,)

    def child(self, schema, ptr: str, base: str | None = None) -> "SchemaNode":
        """A subschema met inside this one (``base``: this one's own base when it has an ``$id``)."""
        return SchemaNode(schema, self.base if base is None else base, ptr, self.inner_scope(), self.own_draft)

    def reached(self, schema, base: str, ptr: str) -> "SchemaNode":
        """The target of a reference in this subschema (evaluated in this one's dialect)."""
        return SchemaNode(schema, base, ptr, self.inner_scope(), self.own_draft)

    def replaced(self, schema, scope: tuple[str, ...] | None = None) -> "SchemaNode":
        """This location with a schema derived from its own (same base, pointer, scope and dialects)."""
        return SchemaNode(schema, self.base, self.ptr, self.scope if scope is None else scope, self.draft,
                          self.own_draft)


def ref_overrides(n: SchemaNode) -> bool:
    """Drafts 4-7: a ``$ref`` replaces its schema object (the keywords beside it are not evaluated), as
    the draft of the schema that reached ``n`` reads it."""
    return n.draft is not None and n.draft <= 7


def integer_fraction(n: SchemaNode) -> bool:
    """From draft-06 on, a number with a zero fraction (5.0) is an integer; draft-04 writes integers
    without one."""
    return n.own_draft is None or n.own_draft >= 6
