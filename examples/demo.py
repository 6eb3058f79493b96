"""The README's first command: generate_json on the example schemas with the embedded SmolLM2 model.

Prints each validated object and the decoding speed.  Run: ``make demo``
(or ``python examples/demo.py`` inside the project's virtualenv).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from structgen import generate_json, load_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# (schema, request, source text or None): the last one is grounded extraction, its string values
# spans of the text and its numbers numbers the text writes
CASES = [
    ("person.json", "Invent a contact: a French engineer called Marie who speaks two languages.", None),
    ("invoice.json", "Write an invoice for two laptops and a mouse sold to a German company in March 2024.", None),
    ("tree.json", "Describe a small project folder with a src folder containing two files.", None),
    ("function_call.json", "What will the weather be in Paris tomorrow, in celsius?", None),
    ("person.json", "Extract the contact.",
     "Thanks for the call! As agreed, Jonas Becker (age 34) will join the project; write to him at "
     "jonas.becker@example.de. He speaks German and English."),
]


def main() -> None:
    t0 = time.perf_counter()
    model = load_model()
    print(f"loaded {model.name} in {time.perf_counter() - t0:.1f} s")
    for name, prompt, source in CASES:
        schema = json.loads((ROOT / "schemas" / name).read_text())
        value, result = generate_json(model, schema, prompt, max_tokens=256, source=source, return_result=True)
        print(f"\n== {name}: {prompt}" + (f"\n   source: {source}" if source else ""))
        print(json.dumps(value, indent=2, ensure_ascii=False))
        print(f"-- valid; {result.num_tokens} tokens in {result.seconds:.2f} s "
              f"({result.tokens_per_second:.1f} tokens/s)")


if __name__ == "__main__":
    main()
