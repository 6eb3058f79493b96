"""Where the benchmark data lives: the benchmarks read data they do not ship (MaskBench,
JSONSchemaBench, the JSON Schema Test Suite), from a path the user gives or from a shared data
folder, and say where they looked when it is missing."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Iterator

from ..errors import StructgenError

__all__ = ["DataNotFound", "data_path", "data_folders", "read_jsonl"]

#: what each data file is, for the message when it is missing
_WHAT = {
    "maskbench-dev.jsonl.gz": "MaskBench (schemas with valid and invalid instances)",
    "jsonschemabench-dev.jsonl.gz": "JSONSchemaBench (schemas by dataset)",
    "json-schema-test-suite": "the JSON Schema Test Suite (a checkout of json-schema-org/JSON-Schema-Test-Suite)",
}


class DataNotFound(StructgenError, FileNotFoundError):
    """A benchmark's data file is not where it was looked for."""


def data_folders() -> list[Path]:
    """Folders searched, in order: ``$STRUCTGEN_DATA``, ``shared/data`` beside a source checkout, and
    ``shared/data`` / ``../shared/data`` from the working directory."""
    out = []
    if os.environ.get("STRUCTGEN_DATA"):
        out.append(Path(os.environ["STRUCTGEN_DATA"]))
    out.append(Path(__file__).resolve().parents[3] / "shared" / "data")  # <checkout>/../shared/data
    out += [Path.cwd() / "shared" / "data", Path.cwd().parent / "shared" / "data"]
    return list(dict.fromkeys(out))


def data_path(name: str, given: str | Path | None = None, *, flag: str = "--data") -> Path:
    """``given`` if it exists, else ``name`` in the first data folder that holds it; otherwise
    :class:`DataNotFound` saying what the data is, where it was looked for and how to point at it."""
    what = _WHAT.get(name, name)
    if given is not None:
        p = Path(given)
        if not p.exists():
            raise DataNotFound(f"{what}: {p} does not exist")
        return p
    for folder in data_folders():
        if (folder / name).exists():
            return folder / name
    looked = ", ".join(str(f) for f in data_folders())
    raise DataNotFound(f"{what} not found: looked for {name} in {looked}; pass {flag} PATH, or set "
                       "STRUCTGEN_DATA to the folder that holds it")


def read_jsonl(name: str, path: str | os.PathLike[str] | None = None) -> Iterator[dict]:
    """The records of the data file ``name`` (``.jsonl`` or ``.jsonl.gz``), at ``path`` or found by
    :func:`data_path`; blank lines skipped."""
    p = data_path(name, path)
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
