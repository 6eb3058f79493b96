"""Where values begin in JSON output: the context the value-boundary checks read.

A check (``structgen.grammar.ir.Check``) judges a completed value, so the engine must know where
that value began, which keys an object that just closed has, and which earlier items share an
array with a new one.  The parser's stacks do not record byte offsets, so this small tracker
follows the output's JSON syntax byte by byte (strings and escapes, containers, commas, colons).
It knows JSON's syntax only, nothing of JSON Schema; it runs only for grammars that have checks.

State (an immutable tuple, so a Matcher keeps one per history entry and rolls back for free):
(inside a string, after a backslash, open containers, keys of the object closed last, offset
where the top-level value began or -1).  An open array is ``("a", start, identities)``: the offset
where its current item began (-1 while waiting for it) and the identities of its earlier checked
items; an open object is ``("o", keys, key_start, value_start)``: its keys so far, where its
current key began (-1 while waiting for a key, -2 once it ended) and where the current member's
value began (-1 right after the colon, -2 outside a value).
"""
from __future__ import annotations

from ..json_text import json_string_text

__all__ = ["EMPTY_TRACKER", "track", "value_start"]

_WS = frozenset(b" \t\n\r")
_QUOTE, _BACKSLASH, _COMMA, _COLON = 0x22, 0x5C, 0x2C, 0x3A
_OPEN_ARRAY, _CLOSE_ARRAY, _OPEN_OBJECT, _CLOSE_OBJECT = 0x5B, 0x5D, 0x7B, 0x7D

EMPTY_TRACKER: tuple = (False, False, (), frozenset(), -1)


def track(tracker: tuple, b: int, pos: int, buf) -> tuple:
    """The tracker after output byte ``b`` at offset ``pos`` of ``buf``."""
    in_str, esc, frames, closed, root = tracker
    if in_str:
        if esc:
            return (True, False, frames, closed, root)
        if b == _BACKSLASH:
            return (True, True, frames, closed, root)
        if b == _QUOTE:
            top = frames[-1] if frames else None
            if top is not None and top[0] == "o" and top[2] >= 0:  # an object's key ends here
                key = json_string_text(bytes(buf[top[2]:pos + 1]))
                frames = frames[:-1] + (("o", top[1] | {key}, -2, -2),)
            return (False, False, frames, closed, root)
        return tracker
    if b in _WS:
        return tracker
    top = frames[-1] if frames else None
    if top is None:
        if root < 0:
            root = pos
    elif top[0] == "a":
        if top[1] < 0:  # an array's next item starts here
            top = ("a", pos, top[2])
            frames = frames[:-1] + (top,)
    elif top[3] == -1:  # a member's value starts here
        top = ("o", top[1], top[2], pos)
        frames = frames[:-1] + (top,)
    if b == _QUOTE:
        if top is not None and top[0] == "o" and top[2] == -1:
            frames = frames[:-1] + (("o", top[1], pos, -2),)
        return (True, False, frames, closed, root)
    if b == _OPEN_ARRAY:
        return (False, False, frames + (("a", -1, frozenset()),), closed, root)
    if b == _OPEN_OBJECT:
        return (False, False, frames + (("o", frozenset(), -1, -2),), closed, root)
    if b == _CLOSE_ARRAY:
        return (False, False, frames[:-1], closed, root)
    if b == _CLOSE_OBJECT:
        return (False, False, frames[:-1], top[1] if top is not None and top[0] == "o" else closed, root)
    if top is not None:
        if b == _COMMA:
            frames = frames[:-1] + ((("a", -1, top[2]) if top[0] == "a" else ("o", top[1], -1, -2)),)
        elif b == _COLON and top[0] == "o":
            frames = frames[:-1] + (("o", top[1], top[2], -1),)
    return (False, False, frames, closed, root)


def value_start(tracker: tuple) -> int:
    """Where the value that ends at the tracker's position began (the innermost container's
    current item or member value, or the top-level value), -1 if unknown."""
    frames = tracker[2]
    if not frames:
        return tracker[4]
    top = frames[-1]
    return top[1] if top[0] == "a" else top[3]
