"""Text to SQL with ``generate_grammar`` and ``grammars/sql.lark``, run on a small SQLite database.

The Lark grammar (a SELECT subset) guarantees a query that parses; SQLite then
runs it.  A grammar cannot know which columns exist, so a query may still name
a wrong one: that error is SQLite's, and it is printed rather than hidden.

Run: ``python examples/sql_query.py [--model PATH]``.
"""
from __future__ import annotations

import argparse
import os
import sqlite3

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from structgen import generate_grammar, load_model  # noqa: E402

GRAMMAR = "sql"  # the shipped grammars/sql.lark, by name
# COLLATE NOCASE: 'Paris' and 'paris' compare equal, whatever case the model writes
DDL = ("CREATE TABLE employees (id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE, "
       "department TEXT COLLATE NOCASE, salary INTEGER, city TEXT COLLATE NOCASE);")
ROWS = [
    (1, "alice", "engineering", 120000, "paris"),
    (2, "bob", "engineering", 95000, "berlin"),
    (3, "carla", "sales", 70000, "paris"),
    (4, "dan", "sales", 65000, "madrid"),
    (5, "eve", "marketing", 80000, "berlin"),
]
QUESTIONS = [
    "List the names of all employees who work in Paris.",
    "What is the average salary per department?",
    "Who are the three best-paid employees?",
]


def database() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute(DDL)
    db.executemany("INSERT INTO employees VALUES (?, ?, ?, ?, ?)", ROWS)
    return db


def main(model=None, *, questions: list[str] = QUESTIONS, max_tokens: int = 80) -> list[tuple[str, str, object]]:
    """Write and run a query per question; returns ``(question, sql, rows or the SQLite error)``."""
    model = model if hasattr(model, "hf_model") else load_model(model)
    db = database()
    out = []
    for question in questions:
        prompt = (f"Database schema:\n{DDL}\nExample row: {ROWS[0]}\n"
                  f"Write one SQLite SELECT query that answers: {question}")
        sql = generate_grammar(model, GRAMMAR, prompt, max_tokens=max_tokens)
        try:
            result: object = db.execute(sql).fetchall()
        except sqlite3.Error as e:
            result = e
        print(f"--- {question}\n{sql}\n-> {result!r}")
        out.append((question, sql, result))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None,
                    help="transformers model folder, hub id or .gguf (default: the embedded SmolLM2-135M-Instruct)")
    main(ap.parse_args().model)
