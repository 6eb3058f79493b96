"""Reading a structural-tag output back: its tagged segments, JSON contents parsed and validated.

The grammar (``structgen.grammar.structural_tag``) guarantees the shape; this module finds the
segments again for the caller (``generate_structural_tag`` returns them): scanning left to right,
the earliest tag begin string starts a segment; a JSON Schema content is read with
``json.JSONDecoder.raw_decode`` (so an end string inside a JSON string does not end it), any other
content ends at the first occurrence of one of its end strings.  Free text never contains a trigger,
so a begin string found in free text cannot happen.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .errors import GenerationError

__all__ = ["TagSegment", "StructuralTagOutput", "read_segments"]


@dataclass
class TagSegment:
    """One tag of the output: ``text[start:stop] == begin + content + end``; ``value`` is the parsed
    JSON of a ``json_schema`` content (None otherwise)."""

    begin: str
    content: str
    end: str
    start: int
    stop: int
    value: Any = None


@dataclass
class StructuralTagOutput:
    """A structural-tag generation: the whole ``text``, its ``segments`` (tags, in order) and the
    decoding's ``result`` (a ``GenerationResult``)."""

    text: str
    segments: list[TagSegment] = field(default_factory=list)
    result: Any = None

    @property
    def free_text(self) -> str:
        """The text outside the segments, joined."""
        out, pos = [], 0
        for s in self.segments:
            out.append(self.text[pos:s.start])
            pos = s.stop
        out.append(self.text[pos:])
        return "".join(out)

    @property
    def values(self) -> list[Any]:
        """The parsed JSON values of the segments that have one."""
        return [s.value for s in self.segments if s.value is not None]

    def __str__(self) -> str:
        return self.text


def read_segments(spec: Any, text: str, *, validate: bool = True) -> list[TagSegment]:
    """The tags of ``text`` under ``spec`` (see the module docstring); with ``validate``, each JSON
    content is checked with ``jsonschema`` against its schema (``GenerationError`` if one fails,
    which the grammar makes impossible unless it was compiled ``lenient``)."""
    from .grammar.json_schema import make_validator, normalize_schema_input
    from .grammar.structural_tag import tag_nodes

    tags = [t for t in tag_nodes(spec) if t["begin"]]
    decoder = json.JSONDecoder()
    validators: dict[int, Any] = {}
    out: list[TagSegment] = []
    pos = 0
    while tags:
        found = None
        for i, t in enumerate(tags):
            j = text.find(t["begin"], pos)
            if j >= 0 and (found is None or (j, -len(t["begin"])) < (found[0], -len(found[1]["begin"]))):
                found = (j, t, i)
        if found is None:
            break
        j, t, i = found
        c = j + len(t["begin"])
        content = t.get("content") or {}
        seg = None
        if isinstance(content, dict) and content.get("type") == "json_schema":
            try:
                value, e = decoder.raw_decode(text, c)
            except json.JSONDecodeError:
                value, e = None, -1
            end = next((x for x in t["end"] if e >= 0 and text.startswith(x, e)), None)
            if end is not None:
                seg = TagSegment(t["begin"], text[c:e], end, j, e + len(end), value)
                if validate:
                    v = validators.get(i)
                    if v is None:
                        v = validators[i] = make_validator(normalize_schema_input(content.get("json_schema", {})))
                    err = next(iter(v.iter_errors(value)), None)
                    if err is not None:
                        ptr = "/" + "/".join(str(p) for p in err.path)
                        raise GenerationError(f"segment at offset {j} does not validate at {ptr}: {err.message}",
                                              partial=text)
        else:
            ends = [(text.find(x, c), x) for x in t["end"] if x]
            ends = [(k, x) for k, x in ends if k >= 0]
            if ends:
                k, x = min(ends)
                seg = TagSegment(t["begin"], text[c:k], x, j, k + len(x))
            elif "" in t["end"]:
                seg = TagSegment(t["begin"], text[c:], "", j, len(text))
        if seg is None:
            pos = j + 1
            continue
        out.append(seg)
        pos = max(seg.stop, j + 1)
    return out
