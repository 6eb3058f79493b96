"""String formats as regular languages (``structgen.grammar.formats``): every string an automaton
accepts is valid for Python's own parsers, and the calendar is respected."""
from __future__ import annotations

import datetime
import ipaddress
import json
import uuid

import pytest

from structgen.errors import UnsupportedFeature
from structgen.grammar.formats import FORMAT_REGEXES, format_content, is_asserted


def _accepts(fmt: str, s: str) -> bool:
    return format_content(fmt).matches(json.dumps(s)[1:-1].encode())


@pytest.mark.parametrize("s,ok", [("2024-02-29", True), ("2023-02-29", False), ("1900-02-29", False),
                                  ("2000-02-29", True), ("2024-04-31", False), ("2024-12-31", True),
                                  ("24-01-01", False)])
def test_dates_follow_the_calendar(s, ok):
    assert _accepts("date", s) == ok
    if ok:
        datetime.date.fromisoformat(s)


@pytest.mark.parametrize("s,ok", [("192.168.0.1", True), ("256.1.1.1", False), ("1.2.3", False),
                                  ("01.2.3.4", False)])
def test_ipv4(s, ok):
    assert _accepts("ipv4", s) == ok
    if ok:
        ipaddress.IPv4Address(s)


def test_accepted_samples_parse_with_python():
    for s in ("::1", "2001:db8::ff00:42:8329", "fe80::1"):
        assert _accepts("ipv6", s)
        ipaddress.IPv6Address(s)
    u = str(uuid.UUID(int=123456789))
    assert _accepts("uuid", u) and not _accepts("uuid", u[:-1])
    assert _accepts("date-time", "2024-05-06T07:08:09Z") and not _accepts("date-time", "2024-05-06 07:08")
    assert _accepts("email", "ada@example.org") and not _accepts("email", "ada.example.org")


def test_unsupported_and_annotation_formats():
    with pytest.raises(UnsupportedFeature):
        format_content("regex")
    assert is_asserted("date") and not is_asserted("int32")
    assert _accepts("int32", "anything at all")  # an annotation: no constraint
    assert set(FORMAT_REGEXES) >= {"date", "time", "date-time", "email", "uuid", "ipv4", "ipv6", "uri"}
