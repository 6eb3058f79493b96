"""uniqueItems checked while the output is written: the token completing a duplicate item is rejected.

A grammar cannot say "every item differs from the earlier ones" unless the items
come from a small finite set (``json_schema.unique_array`` compiles those into the
automaton).  For any other item schema the compiler wraps each item in a rule of
its own (``uitem...``, listed in ``GrammarIR.meta["unique_items"]``) and the
matcher checks, whenever the parser completes such an item, that its value --
parsed as JSON, so ``1``/``1.0`` and ``{"a":1,"b":2}``/``{"b":2,"a":1}`` are equal
as JSON Schema says, and ``1``/``true`` differ -- is new in its array.

Where an item's last lexeme cannot grow (a string's closing quote, ``}``, ``]``,
``true``) the check runs on the byte that completes it, so the token writing the
closing quote of a duplicate string is the one rejected and generation can still
pick another; a number is only complete at the byte after it (``1`` may become
``12``), which is where its check runs.  Masks do not run the check (it depends on
the output, not on the automaton state): a masked-in token can be rejected by
``accept_token``, and structgen's decoding loop then samples again without it.

When the parser is ambiguous (several stacks) and only some of them completed an
item of a unique array, a duplicate removes those stacks and keeps the others:
the check is exact under ``anyOf`` too.
"""
from __future__ import annotations

import json
from decimal import Decimal

_WS = frozenset(b" \t\n\r")
_QUOTE, _BACKSLASH, _COMMA = 0x22, 0x5C, 0x2C
_OPEN_ARRAY, _CLOSE_ARRAY, _OPEN_OBJECT, _CLOSE_OBJECT = 0x5B, 0x5D, 0x7B, 0x7D

#: Tracker state: (inside a string, after a backslash, open containers).  A container is None
#: for an object and ``(start, values)`` for an array: the offset where its current item began
#: (-1 while waiting for it) and the canonical values of its earlier checked items.
EMPTY_TRACKER: tuple = (False, False, ())


def after_item_frames(autos, item_rules) -> frozenset[int]:
    """Parser frames (rule << FRAME_BITS | state) that a stack's top is in right after one of
    ``item_rules`` completed: the return states of the edges that call them."""
    from .parser import FRAME_BITS

    out = set()
    for r, a in enumerate(autos):
        for edges in a.nt_edges:
            for n, nxt in edges:
                if n in item_rules:
                    out.add((r << FRAME_BITS) | nxt)
    return frozenset(out)


def canonical(v):
    """A hashable value equal exactly when two JSON values are equal under JSON Schema."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, Decimal)):
        return ("n", v)
    if isinstance(v, str):
        return ("s", v)
    if v is None:
        return ("z",)
    if isinstance(v, list):
        return ("a", tuple(canonical(x) for x in v))
    return ("o", frozenset((k, canonical(x)) for k, x in v.items()))


def _value_of(text: bytes):
    return canonical(json.loads(text, parse_float=Decimal))


def track(tracker: tuple, b: int, pos: int) -> tuple:
    """The tracker after output byte ``b`` at offset ``pos``."""
    in_str, esc, frames = tracker
    if in_str:
        if esc:
            return (True, False, frames)
        if b == _BACKSLASH:
            return (True, True, frames)
        if b == _QUOTE:
            return (False, False, frames)
        return tracker
    if b in _WS:
        return tracker
    if frames and frames[-1] is not None and frames[-1][0] < 0:  # an array's next item starts here
        frames = frames[:-1] + ((pos, frames[-1][1]),)
    if b == _QUOTE:
        return (True, False, frames)
    if b == _OPEN_ARRAY:
        return (False, False, frames + ((-1, frozenset()),))
    if b == _OPEN_OBJECT:
        return (False, False, frames + (None,))
    if b == _CLOSE_ARRAY or b == _CLOSE_OBJECT:
        return (False, False, frames[:-1])
    if b == _COMMA and frames and frames[-1] is not None:
        return (False, False, frames[:-1] + ((-1, frames[-1][1]),))
    return (False, False, frames)


def _current_item(frames: tuple, buf, end: int):
    """(index of the innermost array, its frame, the canonical value of its item ending at ``end``)
    or None when no array item is open there."""
    if not frames or frames[-1] is None or frames[-1][0] < 0:
        return None
    start, values = frames[-1]
    try:
        return len(frames) - 1, frames[-1], _value_of(bytes(buf[start:end]))
    except ValueError:  # not a whole JSON value: the parser's view and the text disagree
        return None


def item_completed(g, cid2: int, frames: tuple, buf, end: int) -> tuple[int, tuple]:
    """Run the check for the configuration ``cid2`` just scanned (the item text ends at ``end``):
    returns (configuration, containers) -- the configuration -1 (reject), ``cid2``, or ``cid2``
    without the stacks that completed a duplicate; the item's value recorded when new."""
    done, total = g.parser.unique_split(cid2, g.unique_frames)
    if not done:
        return cid2, frames
    cur = _current_item(frames, buf, end)
    if cur is None:
        return cid2, frames
    k, (start, values), v = cur
    if v in values:
        return (-1 if done == total else g.parser.without_unique(cid2, g.unique_frames)), frames
    return cid2, frames[:k] + ((start, values | {v}),)


def completes_duplicate(g, cid2: int, frames: tuple, buf, end: int) -> bool:
    """True when scanning into ``cid2`` would complete a duplicate item on every stack (the early
    check, on the byte that closes the item; nothing is recorded)."""
    done, total = g.parser.unique_split(cid2, g.unique_frames)
    if not done or done != total:
        return False
    cur = _current_item(frames, buf, end)
    return cur is not None and cur[2] in cur[1][1]


def checked_advance(g, cid: int, lx, ls: int, data: bytes, tracker: tuple, out: bytearray):
    """``CompiledGrammar.advance`` with the item checks: returns ((cid, lexer, state), tracker)
    or None when a byte is not allowed or completes a duplicate item.  ``out`` is the output
    before ``data`` (not modified)."""
    parser = g.parser
    ignore = parser._ignore_set
    buf = out + data
    base = len(out)
    tl, nc, cm = lx.core.flat_trans, lx.n_classes, lx.core.classmap_list
    for i, b in enumerate(data):
        ns = tl[ls * nc + cm[b]]
        if ns >= 0:
            ls = ns
        else:
            a = int(lx.boundary[ls])
            if a < 0:
                return None
            terms = lx.acc_set(a)
            cid = parser.scan(cid, terms)
            if cid < 0:
                return None
            if not ignore.issuperset(terms):
                cid, frames = item_completed(g, cid, tracker[2], buf, base + i)
                if cid < 0:
                    return None
                tracker = (tracker[0], tracker[1], frames)
            lx = g.lexer_for(cid)
            tl, nc, cm = lx.core.flat_trans, lx.n_classes, lx.core.classmap_list
            ls = tl[cm[b]]
            if ls < 0:
                return None
        tracker = track(tracker, b, base + i)
        a = int(lx.acc_id[ls])
        if a >= 0 and lx.core.is_dead_end(ls):  # the lexeme cannot grow: it is complete at this byte
            terms = lx.acc_set(a)
            if not ignore.issuperset(terms):
                c2 = parser.scan(cid, terms)
                if c2 >= 0 and completes_duplicate(g, c2, tracker[2], buf, base + i + 1):
                    return None
    return (cid, lx, ls), tracker
