"""json_string_text: the fast path for plain literals gives json.loads's text, and anything that is
not exactly one JSON string literal is a ValueError."""
from __future__ import annotations

import json

import pytest

from structgen.json_text import json_string_text


@pytest.mark.parametrize("raw", [b'""', b'"key"', '"café ü"'.encode(), b'"a\\"b"', b'"\\u00e9"', b'"tab\\t"'])
def test_the_text_is_json_s(raw):
    assert json_string_text(raw) == json.loads(raw)


@pytest.mark.parametrize("raw", [b'"a" "b"', b'1', b'"a', b'"\xff"', b'"a\tb"', b'["a"]', b'"'])
def test_what_is_not_one_string_literal_is_a_value_error(raw):
    with pytest.raises(ValueError):
        json_string_text(raw)
