"""Short answers in an exact format with ``generate_regex``: dates, yes/no, numbers, codes.

A regular expression is the cheapest constraint there is, and often all an
application needs to parse an answer without guesswork.

Run: ``python examples/regex_answer.py [--model PATH]``.
"""
from __future__ import annotations

import argparse
import os
import re

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from structgen import generate_regex, load_model  # noqa: E402

QUESTIONS = [
    ("On which date did Apollo 11 land on the Moon? Answer with a date (YYYY-MM-DD).",
     r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"),
    ("Is Paris the capital of France? Answer yes or no.", r"(yes|no)"),
    ("What is 12 times 12? Answer with a number.", r"[0-9]{1,5}"),
    ("What is the hex color code of pure red?", r"#[0-9A-F]{6}"),
    ("Which airport code is used for London Heathrow?", r"[A-Z]{3}"),
]


def main(model=None, *, max_tokens: int = 24) -> list[tuple[str, str]]:
    """Answer each question in its format; returns ``(question, answer)`` pairs."""
    model = model if hasattr(model, "hf_model") else load_model(model)
    answers = []
    for question, pattern in QUESTIONS:
        answer = generate_regex(model, pattern, question, max_tokens=max_tokens)
        assert re.fullmatch(pattern, answer)
        print(f"{question}\n  /{pattern}/ -> {answer}")
        answers.append((question, answer))
    return answers


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None,
                    help="transformers model folder, hub id or .gguf (default: the embedded SmolLM2-135M-Instruct)")
    main(ap.parse_args().model)
