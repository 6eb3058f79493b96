"""Token strings to the bytes they stand for: GPT-2's byte<->unicode table (byte-level BPE) and
SentencePiece's ``▁`` and ``<0xNN>`` byte fallback."""
from __future__ import annotations

import re



# --------------------------------------------------------------------------- byte maps


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table used by byte-level BPE vocabularies.

    Printable Latin-1 bytes map to themselves; the other 68 bytes (controls,
    space, 0x7F-0xA0, 0xAD) map to U+0100 onwards, in byte order.
    """
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1)
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


_UNICODE_TO_BYTE: dict[str, int] = {c: b for b, c in bytes_to_unicode().items()}
_BYTE_FALLBACK_RE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _byte_level_bytes(s: str) -> bytes | None:
    """Bytes of a byte-level BPE token string, or ``None`` if it uses characters outside the map."""
    try:
        return bytes([_UNICODE_TO_BYTE[c] for c in s])
    except KeyError:
        return None


def _sentencepiece_bytes(s: str, byte_fallback: bool) -> bytes:
    if byte_fallback:
        m = _BYTE_FALLBACK_RE.fullmatch(s)
        if m:
            return bytes([int(m.group(1), 16)])
    return s.replace("▁", " ").encode("utf-8")


# --------------------------------------------------------------------------- the table
