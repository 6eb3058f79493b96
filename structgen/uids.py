"""Process-wide serial numbers for automata, lexer cores and tries.

Caches of walks and derived automata are keyed by the objects they were built from.  ``id()``
is reused once an object dies, so such a cache would have to hold the object itself to check
a hit -- keeping whole lexer cores alive for as long as a walk stays cached, and giving the
garbage collector hundreds of thousands of objects to rescan in every full collection.  A
serial number is never reused, so the key alone identifies its object.
"""
from __future__ import annotations

import itertools

_serial = itertools.count(1)


def new_uid() -> int:
    """A number no other object of this process has had or will have (thread-safe: one C call)."""
    return next(_serial)
