"""``$ref`` resolution inside one document (JSON pointers, ``$id``, ``$anchor``) and the node type
the compiler passes around: a subschema with its base URI and JSON pointer.
"""
from __future__ import annotations

from typing import Any
import functools
from urllib.parse import unquote, urldefrag
from urllib.parse import urljoin as _urljoin

from ...errors import SchemaError, UnsupportedFeature


class Resolver:
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
                    self._index(v, base, f"{ptr}/{escape_pointer(k)}")
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
            cptr = f"{cptr}/{escape_pointer(part)}"
            if isinstance(cur, dict) and isinstance(cur.get("$id"), str):
                rbase = urljoin(rbase, cur["$id"])
        return cur, rbase, cptr


@functools.lru_cache(maxsize=65536)
def urljoin(base: str, ref: str) -> str:
    return _urljoin(base, ref)


def escape_pointer(k) -> str:
    return str(k).replace("~", "~0").replace("/", "~1")


class SchemaNode:
    """A subschema with the base URI and JSON pointer it was found at."""

    __slots__ = ("schema", "base", "ptr")

    def __init__(self, schema, base: str, ptr: str):
        self.schema = schema
        self.base = base
        self.ptr = ptr

    def key(self):
        return (id(self.schema), self.base)
