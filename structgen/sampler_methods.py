"""The sequence samplers by name: the one list the API, the CLI and the LangChain model offer."""
from __future__ import annotations

from .errors import InvalidArgument

#: ``structgen.sample`` / ``generate_*(sampler=...)`` methods, in the order the docs present them
METHODS = ("masked", "asap", "awrs", "smc", "twisted-smc", "decog")


def check_method(method: str) -> None:
    """An ``InvalidArgument`` naming the methods there are, for an unknown one."""
    if method not in METHODS:
        raise InvalidArgument(f"unknown sampling method {method!r}: one of {', '.join(METHODS)}")
