"""One exception hierarchy, so callers can catch ``StructgenError`` and every
message says *where* (a JSON pointer or a position) and *why*."""
from __future__ import annotations


class StructgenError(Exception):
    """Base class of every error structgen raises on purpose."""


class GrammarError(StructgenError):
    """A regular expression or grammar that is malformed or too large to compile.

    ``position`` is the character offset in the source text when known.
    """

    def __init__(self, message: str, *, position: int | None = None, source: str | None = None):
        self.position = position
        self.source = source
        where = f" at position {position}" if position is not None else ""
        super().__init__(f"{message}{where}")


class SchemaError(StructgenError):
    """An invalid or unsatisfiable JSON Schema; ``pointer`` names the subschema, ``reason`` is the
    message without it."""

    def __init__(self, message: str, *, pointer: str = ""):
        self.pointer = pointer
        self.reason = message
        super().__init__(f"{pointer or '#'}: {message}")


class UnsatisfiableSchema(SchemaError):
    """A valid schema that no JSON value satisfies (``false``, contradicting keywords, an empty
    ``enum``): nothing can be generated, so it is refused when it is compiled."""


class UnsupportedFeature(StructgenError):
    """A schema keyword (or regex construct) structgen cannot enforce exactly.

    Raised instead of silently over- or under-approximating; pass
    ``lenient=True`` to ``compile_json_schema`` to opt in to validation
    after generation instead.
    """

    def __init__(self, message: str, *, pointer: str = "", keyword: str | None = None):
        self.pointer = pointer
        self.keyword = keyword
        super().__init__(f"{pointer or '#'}: {message}")


class GenerationError(StructgenError):
    """Generation stopped before the constraint was satisfied (e.g. max_tokens).

    ``partial`` holds the text produced so far; it is never returned as valid.
    ``reason`` says why, for programs: ``"max_tokens"`` (the budget ran out),
    ``"no_token"`` (the mask, or the budget guard, left nothing to sample),
    ``"rejected"`` (the matcher refused a token its mask allowed: an engine bug)
    or ``"eos"`` (end of sequence before the constraint was complete);
    ``num_tokens`` is how many tokens were generated.
    """

    def __init__(self, message: str, *, partial: str = "", reason: str = "error", num_tokens: int | None = None):
        self.partial = partial
        self.reason = reason
        self.num_tokens = num_tokens
        super().__init__(message)


class InvalidArgument(StructgenError, ValueError):
    """An argument out of its range or of the wrong kind (``temperature=-1``, an unknown
    sampler, ``timeout=0``): a structgen error that is also a ``ValueError``."""


class ModelNotFound(StructgenError):
    """The requested model (or the embedded default) is not installed."""


class CompileLimitExceeded(StructgenError):
    """A compile ran past its time or memory bound (``GrammarCompiler(compile_timeout=...,
    compile_max_memory=...)`` or the ``timeout`` / ``max_memory`` of a ``compile_*`` call) and was
    stopped; the process is left as it was (the compile thread goes on serving, what the stopped
    compile built is freed).  ``limit`` is ``"timeout"`` or ``"memory"``."""

    def __init__(self, message: str, *, limit: str):
        self.limit = limit
        super().__init__(message)


class StructgenWarning(UserWarning):
    """Base class of the warnings structgen issues."""


class LowEffectiveSampleSize(StructgenWarning):
    """A weighted sampler's (AWRS, SMC) effective sample size fell below its threshold
    (``ess_warning=``, 10% of the weighted samples by default): a few samples carry the estimate."""


class CanonicalTokenizationsUnavailable(StructgenWarning):
    """``canonical="auto"`` (the samplers' default) on a tokenizer the canonical filter does not
    cover: the samplers draw over every tokenization of each text instead."""
