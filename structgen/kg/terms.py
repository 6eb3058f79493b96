"""RDF terms and the two ways a model writes them: as SPARQL (``c:France``, ``"Paris"@en``, ``42``)
and as a readable label (``France``) inside a reasoning chain.

Both surfaces must be unique per term -- the constraint maps the text back to one graph term -- and
must lex as one term in the grammar that carries them (``grammars/sparql.lark``; a chain's fact
slots).  A local name that is not a plain SPARQL ``PN_LOCAL`` (spaces, accents, dots) is written
as a full ``<iri>``; a label shared by several terms gets a disambiguating suffix."""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Term", "XSD_INTEGER", "XSD_STRING", "RDF_LANG", "sparql_surface", "literal_surface",
           "PLAIN_LOCAL", "label_text", "FACT_FORBIDDEN"]

XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_INTEGER = XSD + "integer"
XSD_STRING = XSD + "string"
RDF_LANG = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

#: a local name written after ``prefix:`` (what ``grammars/sparql.lark``'s PNAME takes)
PLAIN_LOCAL = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)\Z")
_IRI_OK = re.compile(r'[A-Za-z][A-Za-z0-9+.-]*:[^<>"{}|^`\\\x00-\x20]*\Z')  # absolute, as IRIREF takes
#: bytes a chain's fact slot cannot hold (its separators and the line break)
FACT_FORBIDDEN = re.compile(r"[\[\];\n]")


@dataclass(frozen=True)
class Term:
    """One RDF term: an IRI, or a literal with its datatype (``XSD_STRING`` for a plain one) and
    language tag."""

    kind: str  # "iri" | "literal"
    value: str
    datatype: str | None = None
    language: str | None = None

    def __str__(self) -> str:
        if self.kind == "iri":
            return f"<{self.value}>"
        return literal_surface(self) or f'"{self.value}"^^<{self.datatype}>'


def _escape_string(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")


def literal_surface(term: Term) -> str | None:
    """A literal as SPARQL writes it, or None when the grammar has no form for it."""
    if term.datatype == XSD_INTEGER and _INTEGER.match(term.value):
        return term.value
    body = '"' + _escape_string(term.value) + '"'
    if term.language:
        return body + "@" + term.language
    if term.datatype in (None, XSD_STRING):
        return body
    if _IRI_OK.match(term.datatype):
        return f"{body}^^<{term.datatype}>"
    return None


def sparql_surface(term: Term, prefixes: dict[str, str]) -> str | None:
    """``term`` written in a SPARQL triple pattern: a prefixed name where a prefix fits and the
    local part is plain, else ``<iri>``; None for an IRI SPARQL cannot write."""
    if term.kind == "literal":
        return literal_surface(term)
    if term.value.startswith("_:"):
        return None  # a blank node has no name a query could use
    best = None
    for p, ns in prefixes.items():
        if term.value.startswith(ns) and PLAIN_LOCAL.match(term.value[len(ns):]) and _PREFIX.match(p):
            if best is None or len(ns) > len(prefixes[best]):
                best = p
    if best is not None:
        return f"{best}:{term.value[len(prefixes[best]):]}"
    if _IRI_OK.match(term.value):
        return f"<{term.value}>"
    return None


def label_text(text: str) -> str:
    """A label as a chain writes it: one line, no fact separators, single spaces."""
    text = FACT_FORBIDDEN.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip()
