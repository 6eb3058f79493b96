"""Partial values of JSON prefixes (``structgen.partial_json``): every prefix of a text gives a value
whose every part is a prefix of the final one, and the whole text gives the value itself."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.partial_json import MISSING, parse_partial


def is_prefix(p, f) -> bool:
    if p is MISSING:
        return True
    if isinstance(f, dict):
        return isinstance(p, dict) and all(k in f and is_prefix(v, f[k]) for k, v in p.items())
    if isinstance(f, list):
        return isinstance(p, list) and len(p) <= len(f) and all(is_prefix(a, b) for a, b in zip(p, f))
    if isinstance(f, str):
        return isinstance(p, str) and f.startswith(p)
    return p == f and type(p) is type(f)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(JSON_VALUES, st.sampled_from([None, 1]), st.booleans())
def test_every_prefix_is_a_prefix_of_the_value(value, indent, ascii_only):
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only).encode()
    for i in range(len(text)):
        assert is_prefix(parse_partial(text[:i]), value), text[:i]
    assert parse_partial(text, final=True) == value


def test_what_a_prefix_shows():
    assert parse_partial(b'{"name": "Ad') == {"name": "Ad"}
    assert parse_partial(b'{"name": "Ada", "ag') == {"name": "Ada"}  # a key being written is not shown
    assert parse_partial(b'{"a": [1, 2') == {"a": [1]}  # 2 may still become 25
    assert parse_partial(b'{"a": tr') == {}
    assert parse_partial('{"e": "caf\u00e9'.encode()[:-1]) == {"e": "caf"}  # a cut character waits
    assert parse_partial(b'["\\u00') == [""] and parse_partial(b"") is MISSING


def test_text_that_is_no_json_prefix_is_an_error():
    with pytest.raises(ValueError):
        parse_partial(b'{"a" 1}')
