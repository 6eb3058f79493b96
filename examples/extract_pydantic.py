"""Extraction: turn free text into a validated Pydantic object with ``generate_json``.

The grammar for ``Contact``'s JSON Schema masks every token, so the result
always parses and validates (types, the e-mail format, the phone pattern,
lengths): what is left to the model is reading the text well.

Run: ``python examples/extract_pydantic.py [--model PATH]``.
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pydantic import BaseModel, Field  # noqa: E402

from structgen import generate_json, load_model  # noqa: E402


class Contact(BaseModel):
    """Contact details found in a message."""

    # No field descriptions: the schema is shown to the model, and a 135M model tends to copy
    # descriptions into the answer; the field names say enough.
    name: str = Field(max_length=40)
    company: Optional[str] = Field(None, max_length=40)
    email: str = Field(json_schema_extra={"format": "email"}, max_length=60)
    phone: Optional[str] = Field(None, pattern=r"^\+?[0-9][0-9 ()-]{6,18}$")


TEXTS = [
    "Thanks for the demo yesterday! Best regards,\nJulia Moreau, Head of Data at Nordlys AS\n"
    "julia.moreau@nordlys.no | +47 22 33 44 55",
    "hey, it's Sam Patel from Brightwave. Reach me at sam@brightwave.io or call 415-555-0199 "
    "when the invoice is ready.",
]


def _model(model):
    return model if hasattr(model, "hf_model") else load_model(model)


def main(model=None, *, texts: list[str] = TEXTS, max_tokens: int = 160) -> list[Contact]:
    """Extract a ``Contact`` from each text; returns the validated objects."""
    model = _model(model)
    contacts = []
    for text in texts:
        t0 = time.perf_counter()
        contact = generate_json(model, Contact, f"Extract the contact details from this message:\n\n{text}",
                                max_tokens=max_tokens)
        contacts.append(contact)
        print(f"--- {text!r}\n{contact.model_dump_json(indent=2)}\n({time.perf_counter() - t0:.1f} s)")
    return contacts


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None,
                    help="transformers model folder, hub id or .gguf (default: the embedded SmolLM2-135M-Instruct)")
    main(ap.parse_args().model)
