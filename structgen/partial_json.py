"""The value a prefix of a JSON text already holds, for streaming partial structured output.

``parse_partial(b'{"name": "Ad')`` is ``{"name": "Ad"}``: what has been written so far, as Python
values, so a UI can show an object filling in.  Every part of the partial value is a prefix of the
final one: a string being written is its text so far, a list holds its finished items and the
one being written, an object the members whose key is complete and whose value has begun.
Numbers and ``true``/``false``/``null`` appear only once complete (``1`` may become ``12``).
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["parse_partial", "MISSING"]


class _Missing:
    """No value yet (the text stops before a value begins)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_WS = b" \t\r\n"
_ESCAPES = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b", ord("f"): "\f", ord("n"): "\n",
            ord("r"): "\r", ord("t"): "\t"}


class _End(Exception):
    """The text ended inside a value; ``value`` is what it holds so far."""

    def __init__(self, value: Any = MISSING):
        self.value = value


def parse_partial(text: bytes | str, *, final: bool = False) -> Any:
    """The (partial) value of a prefix of one JSON text; :data:`MISSING` when no value has begun.
    ``final``: the text is whole (a number at its end is complete).  Raises ``ValueError`` on text
    that is not a prefix of any JSON value."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    p = _Parser(data, final)
    try:
        value = p.value()
    except _End as e:
        return e.value
    return value


class _Parser:
    def __init__(self, data: bytes, final: bool = False):
        self.d = data
        self.i = 0
        self.final = final

    def _ws(self) -> None:
        while self.i < len(self.d) and self.d[self.i] in _WS:
            self.i += 1
        if self.i >= len(self.d):
            raise _End()

    def value(self) -> Any:
        self._ws()
        c = self.d[self.i]
        if c == ord("{"):
            return self._object()
        if c == ord("["):
            return self._array()
        if c == ord('"'):
            return self._string()
        return self._scalar()

    def _object(self) -> dict:
        return self._container({}, ord("}"), self._member)

    def _array(self) -> list:
        return self._container([], ord("]"), self._item)

    def _container(self, out, close: int, read):
        """Members or items up to ``close``; ``read(out)`` adds one (raising ``_End(out)`` when the
        text ends inside it)."""
        self.i += 1
        while True:
            try:
                self._ws()
            except _End:
                raise _End(out) from None
            c = self.d[self.i]
            if c == close:
                self.i += 1
                return out
            if c == ord(","):
                self.i += 1
                continue
            read(out)

    def _member(self, out: dict) -> None:
        try:
            key = self._string()
        except _End:
            raise _End(out) from None  # a key being written: not shown yet
        try:
            self._ws()
            if self.d[self.i] != ord(":"):
                raise ValueError(f"expected ':' at byte {self.i}")
            self.i += 1
            out[key] = self.value()
        except _End as e:
            if e.value is not MISSING:
                out[key] = e.value
            raise _End(out) from None

    def _item(self, out: list) -> None:
        try:
            out.append(self.value())
        except _End as e:
            if e.value is not MISSING:
                out.append(e.value)
            raise _End(out) from None

    def _string(self) -> str:
        d = self.d
        if d[self.i] != ord('"'):
            raise ValueError(f"expected a string at byte {self.i}")
        self.i += 1
        chunks: list[str] = []
        start = self.i
        while self.i < len(d):
            c = d[self.i]
            if c == ord('"'):
                chunks.append(d[start:self.i].decode("utf-8"))
                self.i += 1
                return "".join(chunks)
            if c == ord("\\"):
                chunks.append(d[start:self.i].decode("utf-8"))
                start = self.i
                escaped = self._escape()
                if escaped is None:  # the escape is cut: it shows once complete
                    raise _End("".join(chunks))
                chunks.append(escaped)
                start = self.i
                continue
            self.i += 1
        tail = d[start:self.i].decode("utf-8", errors="ignore")  # a character cut in its bytes waits
        raise _End("".join(chunks) + tail)

    def _escape(self) -> str | None:
        """The character of the escape at ``self.i`` (moving past it), None when the text ends in it."""
        d = self.d
        if self.i + 1 >= len(d):
            return None
        e = d[self.i + 1]
        if e != ord("u"):
            self.i += 2
            return _ESCAPES[e]
        if self.i + 6 > len(d):
            return None
        code = int(d[self.i + 2:self.i + 6], 16)
        if 0xD800 <= code < 0xDC00:  # a surrogate pair: both halves, or nothing yet
            if self.i + 12 > len(d):
                return None
            low = int(d[self.i + 8:self.i + 12], 16)
            self.i += 12
            return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
        self.i += 6
        return chr(code)

    def _scalar(self) -> Any:
        d = self.d
        j = self.i
        while j < len(d) and d[j] not in b",]} \t\r\n":
            j += 1
        if j == len(d) and not self.final:
            raise _End()  # a number or literal may still grow
        token = d[self.i:j]
        self.i = j
        return json.loads(token)
