"""SynCode as a peer of ``structgen bench grammar``: run by ``make test-syncode`` in structgen's
virtualenv, with SynCode in its own (``make syncode-venv``; ``$STRUCTGEN_SYNCODE_PYTHON``).

The tokenizer is a small byte-level BPE trained here, so SynCode's mask store (a Python loop over
lexer states and tokens) builds in seconds; the bench itself uses DeepSeek-V4's 129k tokens."""
from __future__ import annotations

import os

import pytest

from structgen.bench.grammar_bench import _common_ratio, format_grammar_table
from structgen.bench.syncode_peer import run_syncode, syncode_python

PROGRAMS = [
    "def add(a, b):\n    return a + b\n",
    "import os\n\nclass Box:\n    def __init__(self, x):\n        self.x = [x, (x, {x: 1})]\n\n"
    "    def get(self):\n        if self.x:\n            return self.x[0]\n        return None\n",
    "for i in range(3):\n    print(i, 'a', \"b\")\n",
]


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(PROGRAMS * 20, trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path, tok


@pytest.fixture(scope="module")
def python():
    exe = syncode_python()
    assert exe is not None, (f"SynCode's virtualenv not found ({os.environ.get('STRUCTGEN_SYNCODE_PYTHON')}): "
                             "run make syncode-venv")
    return exe


def test_syncode_steps_through_programs_its_grammar_accepts(tokenizer_file, python, tmp_path):
    path, tok = tokenizer_file
    texts = [tok.encode(p).ids for p in PROGRAMS]
    r = run_syncode(texts, path, grammar="python", python=python, cache=tmp_path)
    assert "skipped" not in r, r
    assert r["outcomes"] == ["accepted"] * len(PROGRAMS)
    assert [len(d) for d in r["per_doc_us"]] == [len(t) for t in texts]
    assert all(x > 0 for d in r["per_doc_us"] for x in d)
    assert not r["store_cached"] and r["peak_rss_mb"] > 0
    again = run_syncode(texts[:1], path, grammar="python", python=python, cache=tmp_path)
    assert again["store_cached"] and again["outcomes"] == ["accepted"]


def test_syncode_refuses_a_syntax_error_where_it_occurs(tokenizer_file, python, tmp_path):
    """Its mask refuses the second number at once; after a newline it over-approximates (its
    default grammar_mask mode) and allows the stray bracket, so the parse fails a step later."""
    path, tok = tokenizer_file
    two_numbers = tok.encode("x = 1 1").ids
    stray = tok.encode("x = 1\n").ids + tok.encode(")").ids + tok.encode("\n").ids
    r = run_syncode([two_numbers, stray], path, grammar="python", python=python, cache=tmp_path)
    assert r["outcomes"] == [f"token {len(two_numbers) - 1} masked", f"parse failed at token {len(stray) - 1}"]
    assert [len(d) for d in r["per_doc_us"]] == [len(two_numbers), len(stray)]


def test_the_table_gives_ratios_over_the_steps_both_engines_masked():
    a = {"per_doc_us": [[10.0, 20.0], [5.0, 5.0, 5.0]], "outcomes": ["accepted", "accepted"]}
    b = {"per_doc_us": [[100.0, 200.0], [5.0]], "outcomes": ["accepted", "token 0 masked"]}
    assert "over the 3 steps both masked (1 of 2 texts whole)" in _common_ratio(a, b)
    assert "max 0.1x" in _common_ratio(a, b)


def test_module_docstrings_are_removed_for_syncode_and_the_code_kept():
    from structgen.bench.grammar_bench import without_module_docstring

    text = '"""Doc\nmore."""\n\nimport os\n\ndef f():\n    """Kept."""\n    return os\n'
    assert without_module_docstring(text) == 'import os\n\ndef f():\n    """Kept."""\n    return os\n'
    assert without_module_docstring("x = 1\n") == "x = 1\n"
    table = format_grammar_table({"syncode": {"skipped": "SynCode's virtualenv not found"}})
    assert "skipped: SynCode's virtualenv not found" in table


def test_a_missing_virtualenv_is_reported_not_raised(tmp_path):
    r = run_syncode([[1]], tmp_path / "tokenizer.json", python=tmp_path / "nope" / "python")
    assert r == {"skipped": f"SynCode's virtualenv not found ({tmp_path / 'nope' / 'python'}): make syncode-venv"}
