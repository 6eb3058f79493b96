"""String ``format`` values as regular languages.

Each regex accepts a *subset* of what common validators (Python's jsonschema
with its format checkers: RFC 3339 dates, ``ipaddress``, RFC 3986 URIs ...)
accept, so generated or matched strings always validate; dates are checked
to the calendar (month lengths, leap years).  Formats that no regular
language captures (``regex``) raise ``UnsupportedFeature``; formats that
validators do not assert (``int32``, ``path`` ...) are annotations and add no
constraint, as the specification says.
"""
from __future__ import annotations

import functools

from ..errors import UnsupportedFeature
from ..automata.fsa import DFA
from .regex import compile_regex

_D2 = r"[0-9]{2}"
_YEAR = r"[0-9]{4}"
# leap years: divisible by 4, centuries only when divisible by 400
_LEAP_YEAR = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    r"(" + _YEAR + r"-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
    r"|" + _YEAR + r"-(0[469]|11)-(0[1-9]|[12][0-9]|30)"
    r"|" + _YEAR + r"-02-(0[1-9]|1[0-9]|2[0-8])"
    r"|" + _LEAP_YEAR + r"-02-29)"
)
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4 = rf"{_OCTET}(\.{_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"({_H16}:{_H16}|{_IPV4})"
_IPV6 = (
    rf"(({_H16}:){{6}}{_LS32}"
    rf"|::({_H16}:){{5}}{_LS32}"
    rf"|({_H16})?::({_H16}:){{4}}{_LS32}"
    rf"|(({_H16}:){{0,1}}{_H16})?::({_H16}:){{3}}{_LS32}"
    rf"|(({_H16}:){{0,2}}{_H16})?::({_H16}:){{2}}{_LS32}"
    rf"|(({_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}"
    rf"|(({_H16}:){{0,4}}{_H16})?::{_LS32}"
    rf"|(({_H16}:){{0,5}}{_H16})?::{_H16}"
    rf"|(({_H16}:){{0,6}}{_H16})?::)"
)
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_URI_CHAR = r"([A-Za-z0-9\-._~:/?#@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"

FORMAT_REGEXES: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE + r"[Tt]" + _TIME,
    "duration": r"P(([0-9]+Y)?([0-9]+M)?([0-9]+D)?T(([0-9]+H)([0-9]+M)?([0-9]+S)?|([0-9]+M)([0-9]+S)?|([0-9]+S))"
                r"|([0-9]+Y)([0-9]+M)?([0-9]+D)?|([0-9]+M)([0-9]+D)?|([0-9]+D)|[0-9]+W)",
    "email": r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@" + _LABEL + r"(\." + _LABEL + r")*",
    "idn-email": r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@" + _LABEL + r"(\." + _LABEL + r")*",
    "uuid": r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "hostname": _LABEL + r"(\." + _LABEL + r")*",
    "uri": r"[A-Za-z][A-Za-z0-9+.-]*:" + r"([A-Za-z0-9\-._~:/?#@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*",
    "iri": r"[A-Za-z][A-Za-z0-9+.-]*:" + r"([A-Za-z0-9\-._~:/?#@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*",
    "uri-reference": r"([A-Za-z][A-Za-z0-9+.-]*:)?" + r"([A-Za-z0-9\-._~/?#@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"
                     + r"([A-Za-z0-9\-._~:/?#@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*|",
    "iri-reference": r"([A-Za-z][A-Za-z0-9+.-]*:)?" + r"([A-Za-z0-9\-._~/?#@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"
                     + r"([A-Za-z0-9\-._~:/?#@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*|",
    "json-pointer": r"(/([^/~]|~[01])*)*",
    "relative-json-pointer": r"(0|[1-9][0-9]*)(#|(/([^/~]|~[01])*)*)",
}
#: Formats validators check but a regular language cannot express.
UNSUPPORTED_FORMATS = {"regex": "checking a regex's syntax needs a parser", "idn-hostname": "IDNA rules",
                       "uri-template": "URI template syntax"}


def is_asserted(fmt: str) -> bool:
    return fmt in FORMAT_REGEXES or fmt in UNSUPPORTED_FORMATS


@functools.lru_cache(maxsize=None)
def format_content(fmt: str) -> DFA:
    """Content DFA (JSON-string encoded, without quotes) of a format; unknown formats: any string."""
    if fmt in UNSUPPORTED_FORMATS:
        raise UnsupportedFeature(f"format {fmt!r} cannot be enforced by an automaton ({UNSUPPORTED_FORMATS[fmt]})",
                                 keyword="format")
    rx = FORMAT_REGEXES.get(fmt)
    if rx is None:
        return compile_regex(r"(?s:.*)", json_string=True)
    return compile_regex(rx, json_string=True)
