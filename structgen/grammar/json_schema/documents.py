"""The other documents a schema's ``$ref`` may name: the user's registry (the jsonschema ecosystem's
``referencing.Registry``, or a plain mapping of URI to schema) and the draft meta-schemas, which are
always known.  Nothing is fetched from the network unless the user's registry has a retriever that
fetches.  One registry serves both the compiler and the final jsonschema validator, so both read
the same documents.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urldefrag

from ...errors import SchemaError

#: a registry as users pass it: None, a ``referencing.Registry`` or ``{uri: schema}``
RegistryLike = Any


def as_registry(registry: RegistryLike):
    """A ``referencing.Registry`` holding ``registry``'s documents (an empty one for None: the
    validator then never tries the network, which jsonschema's default registry would)."""
    from referencing import Registry

    if registry is None:
        return Registry()
    if isinstance(registry, Registry):
        return registry
    if not isinstance(registry, Mapping):
        raise SchemaError(f"registry must be a referencing.Registry or a mapping of URI to schema, "
                          f"not {type(registry).__name__}")
    hit = _CONVERTED.get(id(registry))
    if hit is not None and hit[0] is registry and _same_entries(hit[1], registry):
        return hit[2]
    converted = _mapping_to_registry(registry)
    _CONVERTED[id(registry)] = (registry, tuple(registry.items()), converted)
    while len(_CONVERTED) > _CONVERTED_ENTRIES:
        _CONVERTED.pop(next(iter(_CONVERTED)))
    return converted


#: mappings converted to registries, by identity (converting 3,800 documents took 2.7 s a compile):
#: id -> (the mapping, its entries when converted, the registry)
_CONVERTED: dict[int, tuple] = {}
_CONVERTED_ENTRIES = 8


def _same_entries(entries: tuple, registry: Mapping) -> bool:
    """Has no entry been added, removed or replaced since ``entries`` were taken?  (A document edited
    in place is not seen: pass a new mapping, or a ``referencing.Registry``, for that.)"""
    return len(entries) == len(registry) and all(
        registry.get(uri, _MISSING) is doc for uri, doc in entries)


_MISSING = object()


def _mapping_to_registry(registry: Mapping):
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    resources = []
    for uri, doc in registry.items():
        if not isinstance(uri, str) or not uri:
            raise SchemaError(f"registry key {uri!r} is not a URI")
        if not isinstance(doc, (dict, bool)):
            raise SchemaError(f"registry entry {uri!r} is a {type(doc).__name__}, not a schema (an object or a "
                              f"boolean)")
        try:
            res = DRAFT202012.create_resource(doc) if isinstance(doc, bool) else \
                _resource_from_contents(doc)
        except Exception as e:  # noqa: BLE001 - referencing's errors become ours
            raise SchemaError(f"registry entry {uri!r} is not a schema: {_why_not_a_schema(doc, e)}") from None
        resources.append((urldefrag(uri)[0], res))
    return Registry().with_resources(resources)


def _why_not_a_schema(doc, error: Exception) -> str:
    """The meta-schema's reason where it has one (referencing's own errors say what broke inside it)."""
    from .schema_check import check_schema

    try:
        check_schema(doc)
    except SchemaError as e:
        return f"{e.reason} at {e.pointer or '#'}"
    return f"{type(error).__name__}: {error}"


def _resource_from_contents(doc: dict):
    from referencing import Resource
    from referencing.jsonschema import DRAFT202012

    return Resource.from_contents(doc, default_specification=DRAFT202012)


class _ByIdentity:
    """An immutable registry as a cache key: the same object reads the same documents."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return isinstance(other, _ByIdentity) and other.obj is self.obj


def registry_key(registry: RegistryLike):
    """A hashable key for the compile cache: a ``referencing.Registry`` by identity (it is immutable),
    a mapping by the registry it converts to (the same one while its entries stay the same)."""
    if registry is None:
        return None
    return ("registry", _ByIdentity(as_registry(registry)))


class Documents:
    """Looks up documents by absolute URI: the user's registry first, then the meta-schemas."""

    def __init__(self, registry: RegistryLike = None):
        self.registry = as_registry(registry)

    def get(self, uri: str, *, pointer: str, ref: str):
        """The contents of the document at ``uri``; a ``SchemaError`` naming the ``$ref``, where
        it was met and the URI when no registry holds it."""
        from jsonschema_specifications import REGISTRY as META

        from referencing.exceptions import NoSuchResource

        why = ""
        for reg in (self.registry, META):
            try:
                return reg.get_or_retrieve(uri).value.contents
            except NoSuchResource:
                continue
            except Exception as e:  # noqa: BLE001 - Unretrievable, a retriever's own error: said, not raised
                cause = e.__cause__ or e
                why = why or f" (retrieving it failed: {type(cause).__name__}: {cause})"
        raise SchemaError(f"$ref {ref!r}: no document {uri!r}{why}; pass it in registry=... (nothing is fetched "
                          f"from the network unless the registry's retriever fetches it)", pointer=pointer)
