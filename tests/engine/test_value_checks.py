"""Checks at value boundaries: uniqueItems items and object key sets (structgen.engine.value_checks)."""
from __future__ import annotations

import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.engine.json_tracker import EMPTY_TRACKER, track
from structgen.grammar.json_schema.checks import canonical


@pytest.fixture(scope="module")
def strings(smol_info):
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    return GrammarCompiler(smol_info).compile_json_schema(schema)


def test_the_closing_quote_of_a_duplicate_is_refused(strings):
    m = Matcher(strings)
    assert m.may_dead_end
    assert m.accept_string('["ab", "ab')
    assert not m.accept_string('"')  # the byte completing the duplicate, not a later one
    assert m.accept_string('c"]') and m.is_accepting()


def test_rollback_and_copy_keep_the_items_seen(strings):
    m = Matcher(strings)
    for piece in ['["x"', ', "y"', ', "z"']:
        assert m.accept_string(piece)
    m.rollback(1)  # "z" forgotten, "x" and "y" still known
    c = m.copy()
    assert not m.accept_string(', "y"') and m.accept_string(', "z"]')
    assert not c.accept_string(', "x"') and c.accept_string(', "w"]')
    assert m.output_bytes() == b'["x", "y", "z"]' and c.output_bytes() == b'["x", "y", "w"]'


def test_token_by_token_equals_whole_text(strings):
    for text, ok in [('["a", "b"]', True), ('["a", "b", "a"]', False), ('[ "a" , "a" ]', False)]:
        whole = Matcher(strings)
        by_byte = Matcher(strings)
        assert (whole.accept_string(text) and whole.is_accepting()) == ok
        assert (all(by_byte.accept_string(ch) for ch in text) and by_byte.is_accepting()) == ok


def test_json_equality_is_the_schema_s():
    from decimal import Decimal

    assert canonical(1) == canonical(Decimal("1.0")) and canonical(True) != canonical(1)
    assert canonical({"a": [1, 2]}) != canonical({"a": [2, 1]})
    assert canonical({"a": 1, "b": 2}) == canonical({"b": 2, "a": 1})
    assert canonical(Decimal("0.1")) != canonical(Decimal("0.10000000000000000001"))


def test_a_string_item_s_identity_without_json_loads_is_json_loads_s():
    """Items without escapes skip the JSON parser; their identity must be the parser's."""
    import json
    from decimal import Decimal

    from structgen.grammar.json_schema.checks import UniqueJsonItems

    def slow(v: bytes):
        try:
            return canonical(json.loads(v, parse_float=Decimal))
        except ValueError:
            return None

    check = UniqueJsonItems("items")
    for v in (b'""', b'"ab"', b'"caf\xc3\xa9"', b'"\\u00e9"', b'"a\\"b"', b'"\xff"', b'"a\tb"', b'"a\x01"',
              b'"x"', b'"\xe2\x82"', b'1', b'1.0', b'["a"]', b'"', b'"a'):
        assert check.identity(v) == slow(v), v
    assert check.identity(b'"\\u00e9"') == check.identity('"\u00e9"'.encode())


def test_tracker_finds_item_starts_and_keys_outside_strings():
    t = EMPTY_TRACKER
    text = b'[ "a,[", {"k": [1], "q\\"": {}}, 2]'
    starts = []
    for i, b in enumerate(text):
        before = t[2][-1][1] if t[2] else None
        t = track(t, b, i, text)
        after = t[2][-1][1] if t[2] else None
        if len(t[2]) == 1 and after is not None and after >= 0 and after != before:
            starts.append(after)
        if b == ord("}") and len(t[2]) == 1:
            assert t[3] == {"k", 'q"'}  # the keys of the object just closed
    assert [text[s:s + 1] for s in starts] == [b'"', b"{", b"2"]
    assert t[:3] == EMPTY_TRACKER[:3]
