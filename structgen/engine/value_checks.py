"""Checks at value boundaries: constraints an automaton cannot hold, tested as values complete.

Two JSON Schema constraints are checked here rather than compiled into the automaton:

* ``uniqueItems`` over items that are not a small finite set (``json_schema.unique_array``
  compiles those into the automaton): the compiler wraps each item in a rule of its own
  (``uitem...``, listed in ``GrammarIR.meta["unique_items"]``), and when the parser
  completes one its value -- parsed as JSON, so ``1``/``1.0`` and
  ``{"a":1,"b":2}``/``{"b":2,"a":1}`` are equal as JSON Schema says, and ``1``/``true``
  differ -- must be new in its array;
* the key set of an object whose members are accepted in any order but are too many to
  track in the automaton (``property_order="any"``): the object rule is listed in
  ``GrammarIR.meta["close_checks"]`` with its required keys, presence conditions
  (``dependentRequired`` ...) and property-count bounds, tested on the distinct keys when
  the object closes;
* any other keyword the automaton can only over-approximate (``oneOf`` branches that overlap,
  ``not`` of a compound schema, ``contains``, ``dependentSchemas`` ...): the value holding it is
  a rule of its own (``chk...``, in ``GrammarIR.meta["value_checks"]`` with the jsonschema
  validators of its schemas), and the completed value is validated.

Where a value's last lexeme cannot grow (a string's closing quote, ``}``, ``]``, ``true``)
the check runs on the byte that completes it, so the token writing the closing quote of a
duplicate string (or the ``}`` of an object missing a required key) is the one rejected and
generation can still pick another; a number is only complete at the byte after it (``1``
may become ``12``), which is where its check runs.  Masks do not run the checks (they
depend on the output, not on the automaton state): a masked-in token can be rejected by
``accept_token``, and structgen's decoding loop then draws again without it.

When the parser is ambiguous (several stacks) and only some of them fail a check, those
stacks are dropped and the others kept: the checks are exact under ``anyOf`` too.
"""
from __future__ import annotations

import json
from decimal import Decimal

from ..grammar.presence import eval_presence

_WS = frozenset(b" \t\n\r")
_QUOTE, _BACKSLASH, _COMMA, _COLON = 0x22, 0x5C, 0x2C, 0x3A
_OPEN_ARRAY, _CLOSE_ARRAY, _OPEN_OBJECT, _CLOSE_OBJECT = 0x5B, 0x5D, 0x7B, 0x7D

#: Tracker state: (inside a string, after a backslash, open containers, keys of the object closed
#: last, offset where the top-level value began or -1).  An open array is ``("a", start, values)``:
#: the offset where its current item began (-1 while waiting for it) and the canonical values of
#: its earlier checked items; an open object is ``("o", keys, key_start, value_start)``: its keys so
#: far, where its current key began (-1 while waiting for a key, -2 once it ended) and where the
#: current member's value began (-1 right after the colon, -2 outside a value).
EMPTY_TRACKER: tuple = (False, False, (), frozenset(), -1)


def return_frames(autos, rules) -> frozenset[int]:
    """Parser frames (rule << FRAME_BITS | state) that a stack's top is in right after one of
    ``rules`` completed, when the caller still has a symbol to read there (an array's item:
    ``,`` or ``]`` follow) -- the return states of the edges that call them."""
    from .parser import FRAME_BITS

    out = set()
    for r, a in enumerate(autos):
        for edges in a.nt_edges:
            for n, nxt in edges:
                if n in rules:
                    out.add((r << FRAME_BITS) | nxt)
    return frozenset(out)


def finishing_terminals(autos, rules) -> dict[int, dict[int, frozenset]]:
    """Per rule of ``rules``: state -> the terminals whose edge from it ends the rule (an
    object's ``}``).  A stack about to scan one of them closes that object."""
    out = {}
    for r in rules:
        a = autos[r]
        fin = {}
        for st in range(a.n_states):
            ts = frozenset(t for t, nxt in a.term_edges(st) if a.final[nxt])
            if ts:
                fin[st] = ts
        out[r] = fin
    return out


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
                key = json.loads(bytes(buf[top[2]:pos + 1]))
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


def _current_item(frames: tuple, buf, end: int):
    """(the innermost array's frame, the canonical value of its item ending at ``end``) or None
    when no array item is open there."""
    top = frames[-1] if frames else None
    if top is None or top[0] != "a" or top[1] < 0:
        return None
    try:
        return top, _value_of(bytes(buf[top[1]:end]))
    except ValueError:  # not a whole JSON value: the parser's view and the text disagree
        return None


def close_ok(check: tuple, keys: frozenset) -> bool:
    """An object's distinct keys against its close check (required, presence, minp, maxp)."""
    required, presence, minp, maxp = check
    return (required <= keys and minp <= len(keys) and (maxp is None or len(keys) <= maxp)
            and all(eval_presence(p, keys) for p in presence))


def _failing(g, cid2: int, tracker: tuple, buf, end: int, record: bool):
    """The stacks of ``cid2`` failing a check at this boundary (a set of stack indices, None when no
    check applies) and the tracker with the completed item recorded (when ``record``)."""
    stacks = g.parser.stacks[cid2]
    failing = None
    in_str, esc, frames, closed, root = tracker
    if g.unique_frames:
        done = [i for i, st in enumerate(stacks) if st[-1] in g.unique_frames]
        if done:
            cur = _current_item(frames, buf, end)
            if cur is not None:
                top, v = cur
                if v in top[2]:
                    failing = set(done)
                elif record:
                    frames = frames[:-1] + (("a", top[1], top[2] | {v}),)
    return failing, (in_str, esc, frames, closed, root)


def rule_done_states(autos) -> list[bytes]:
    """Per rule: per state, 1 where the rule is complete there and nothing can follow (final, no
    outgoing edge): a stack whose top reaches such a state pops it at once."""
    out = []
    for a in autos:
        out.append(bytes(1 if a.final[st] and not a.terms[st] and not a.nt_edges[st] else 0
                         for st in range(a.n_states)))
    return out


def _validates(g, rule: int, text: bytes) -> bool:
    """The completed value ``text`` against the jsonschema validators of check rule ``rule``
    (memoised per grammar: the early check and the scan meet the same text)."""
    key = (rule, text)
    hit = g.check_memo.get(key)
    if hit is None:
        validators = g.value_checks[rule]
        try:
            value = json.loads(text)
            hit = all(v.is_valid(value) for v in validators)
        except Exception:  # noqa: BLE001 - not a whole value, or a schema jsonschema cannot evaluate
            hit = False
        if len(g.check_memo) > 4096:
            g.check_memo.clear()
        g.check_memo[key] = hit
    return hit


def pre_scan_pruned(g, cid: int, terms: tuple, tracker: tuple, buf, end: int) -> int:
    """Before scanning ``terms`` from ``cid`` (the lexeme ending at ``end``): drop the stacks that
    complete a value failing its check -- an object whose keys (the object the tracker closed last)
    fail its close check, or a checked value that does not validate (-1 when no stack is left)."""
    from .parser import FRAME_BITS, FRAME_MASK
    from .rules import TERM_SHIFT

    stacks = g.parser.stacks[cid]
    failing = None
    for i, st in enumerate(stacks):
        top = st[-1]
        r, s = top >> FRAME_BITS, top & FRAME_MASK
        fin = g.close_finish.get(r)
        if fin is not None:
            ts = fin.get(s)
            if ts and not ts.isdisjoint(terms) and not close_ok(g.close_checks[r], tracker[3]):
                failing = (failing or set()) | {i}
                continue
        if not g.value_checks:
            continue
        edges, base = g.parser.autos[r].term_next, s << TERM_SHIFT
        for t in terms:
            nxt = edges.get(base | t)
            if nxt is None:
                continue
            k, rr, ss = len(st) - 1, r, nxt
            ok = True
            while g.rule_done[rr][ss]:  # the rule ends with this lexeme: it pops, and maybe its caller
                if rr in g.value_checks:
                    start = value_start(tracker)
                    if start < 0 or not _validates(g, rr, bytes(buf[start:end])):
                        ok = False
                        break
                k -= 1
                if k < 0:
                    break
                rr, ss = st[k] >> FRAME_BITS, st[k] & FRAME_MASK
            if not ok:
                failing = (failing or set()) | {i}
                break
    return cid if not failing else g.parser.without_stacks(cid, failing)


def value_completed(g, cid2: int, tracker: tuple, buf, end: int) -> tuple[int, tuple]:
    """Run the checks for the configuration ``cid2`` just scanned (a value ending at ``end``):
    returns (configuration, tracker) -- the configuration -1 (reject), ``cid2``, or ``cid2``
    without the stacks that failed; a new unique item recorded."""
    failing, tracker = _failing(g, cid2, tracker, buf, end, True)
    if not failing:
        return cid2, tracker
    return g.parser.without_stacks(cid2, failing), tracker


def completes_violation(g, cid2: int, tracker: tuple, buf, end: int) -> bool:
    """True when scanning into ``cid2`` fails a check on every stack (the early check, on the byte
    that closes a value; nothing is recorded)."""
    failing, _ = _failing(g, cid2, tracker, buf, end, False)
    return bool(failing) and len(failing) == len(g.parser.stacks[cid2])


def checked_advance(g, cid: int, lx, ls: int, data: bytes, tracker: tuple, out: bytearray):
    """``CompiledGrammar.advance`` with the value checks: returns ((cid, lexer, state), tracker)
    or None when a byte is not allowed or completes a value that fails a check.  ``out`` is the
    output before ``data`` (not modified)."""
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
            if g.pre_scan_checks:
                cid = pre_scan_pruned(g, cid, terms, tracker, buf, base + i)
                if cid < 0:
                    return None
            cid = parser.scan(cid, terms)
            if cid < 0:
                return None
            if g.unique_frames and not ignore.issuperset(terms):
                cid, tracker = value_completed(g, cid, tracker, buf, base + i)
                if cid < 0:
                    return None
            lx = g.lexer_for(cid)
            tl, nc, cm = lx.core.flat_trans, lx.n_classes, lx.core.classmap_list
            ls = tl[cm[b]]
            if ls < 0:
                return None
        tracker = track(tracker, b, base + i, buf)
        a = int(lx.acc_id[ls])
        if a >= 0 and lx.core.is_dead_end(ls):  # the lexeme cannot grow: it is complete at this byte
            if _ended(g, cid, lx.acc_set(a), tracker, buf, base + i + 1) < 0:
                return None  # every reading completes a value that fails its check
    return (cid, lx, ls), tracker


def _ended(g, cid: int, terms: tuple, tracker: tuple, buf, end: int) -> int:
    """The configuration after the pending lexeme (``terms``, ending at ``end``) ends, with the
    checks it would run (nothing recorded); -1 when every reading fails one."""
    c1 = pre_scan_pruned(g, cid, terms, tracker, buf, end) if g.pre_scan_checks else cid
    c2 = g.parser.scan(c1, terms) if c1 >= 0 else -1
    if c2 >= 0 and g.unique_frames and not g.parser._ignore_set.issuperset(terms) \
            and completes_violation(g, c2, tracker, buf, end):
        return -1
    return c2


def can_end_checked(g, cid: int, lx, ls: int, tracker: tuple, out) -> bool:
    """``CompiledGrammar.can_end`` with the checks the pending lexeme's end would run."""
    if ls == 0:
        return g.parser.can_end[cid]
    a = int(lx.acc_id[ls])
    if a < 0:
        return False
    c2 = _ended(g, cid, lx.acc_set(a), tracker, out, len(out))
    return c2 >= 0 and g.parser.can_end[c2]
