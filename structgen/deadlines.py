"""Wall-clock ceilings for one generation: the default and the instant it ends (no heavy imports, so
the API, the LangChain model and the CLI share them without loading torch)."""
from __future__ import annotations

import time

from .errors import InvalidArgument

__all__ = ["DEFAULT_TIMEOUT", "deadline_after"]

#: ``timeout`` (seconds) of a generation when none is given: a ceiling on one call's wall clock, so a
#: constraint whose checks make the search long ends with an error that names them
DEFAULT_TIMEOUT = 300.0


def deadline_after(timeout: float | None) -> float | None:
    """The ``time.monotonic()`` instant ``timeout`` seconds from now (None: no limit); a timeout
    that is not a positive number is a user error."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise InvalidArgument(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    return time.monotonic() + float(timeout)
