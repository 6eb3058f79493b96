"""Streaming a constrained generation: ``generate_*(..., stream=True)`` yields :class:`StreamEvent`.

Each event carries the text and token ids the step added and, for JSON, the value written so far
(:func:`structgen.partial_json.parse_partial`: every part a prefix of the final value); the last
event (``done``) carries the validated value and the ``GenerationResult``.  The tokens are the
decoding loop's own, released as they become final (with checks at value boundaries a token is
held back until no backtrack can reach it), so speculation, samplers and the budget guard stay on
and a streamed run's text equals the non-streamed one.
"""
from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from .partial_json import MISSING, parse_partial

__all__ = ["StreamEvent", "stream_events"]


@dataclass
class StreamEvent:
    """One step of a streamed generation.

    ``text``: the text this event adds (UTF-8 decoded incrementally: a character split across
    tokens comes whole, in the event that completes it); ``token_ids``: the tokens it adds;
    ``partial``: for JSON, the value written so far (``structgen.partial_json.MISSING`` before any);
    ``done``: the last event, whose ``value`` is what the non-streamed call returns (validated) and
    ``result`` the ``GenerationResult``."""

    text: str
    token_ids: list[int] = field(default_factory=list)
    partial: Any = MISSING
    done: bool = False
    value: Any = None
    result: Any = None


def stream_events(tokens: Iterable, token_bytes: list[bytes], finish: Callable[[Any], Any], *,
                  json_partial: bool = False, json_after: bytes | None = None) -> Iterator[StreamEvent]:
    """Events from ``tokens`` (token ids, then the ``GenerationResult`` last, as the API's decoding
    yields them).  ``finish(result)`` makes the final value.  ``json_partial``: parse the partial
    value of the text so far, or of what follows ``json_after`` in it (reasoning before JSON)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    written = bytearray()
    last_partial: Any = MISSING
    for item in tokens:
        if not isinstance(item, int):
            tail = decoder.decode(b"", final=True)
            yield StreamEvent(tail, [], last_partial, done=True, value=finish(item), result=item)
            return
        data = token_bytes[item]
        written += data
        event = StreamEvent(decoder.decode(data), [item])
        if json_partial:
            event.partial = last_partial = _partial(written, json_after)
        yield event


def _partial(written: bytearray, json_after: bytes | None) -> Any:
    body = bytes(written)
    if json_after is not None:
        at = body.find(json_after)
        if at < 0:
            return MISSING
        body = body[at + len(json_after):]
    try:
        return parse_partial(body)
    except ValueError:  # not JSON yet (free text before it): nothing to show
        return MISSING
