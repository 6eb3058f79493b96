"""The fuzzer's language reference for Lark grammars: agrees with lark where lark's lexer is complete,
and accepts the longer lexemes lark's one-match-per-position lexer misses."""
import random
from pathlib import Path

import lark
import pytest

from structgen.bench.lark_language import LanguageRecognizer

ROOT = Path(__file__).resolve().parents[2]


def _parses(parser, text: str) -> bool:
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


def test_accepts_a_longer_lexeme_lark_misses():
    src = 'start: T2 | "k" T2\nT2: /(?:[\\w.-]{3,7}){2,}/\n%import common.WS\n%ignore WS\n'
    parser = lark.Lark(src, parser="earley", lexer="dynamic_complete")
    rec = LanguageRecognizer(parser)
    # the regex engine's match takes two groups of 7 characters and stops at 14 of 16
    assert not _parses(parser, "criptionskeyword")
    assert rec.accepts("criptionskeyword") and rec.accepts("k criptionskeyword ")
    assert not rec.accepts("ab") and not rec.accepts("criptionskeyword!") and not rec.accepts("")


def test_nullable_rules_and_ignored_text():
    parser = lark.Lark('start: a b "x"\na: "y"?\nb: a a\n%ignore " "\n', parser="earley", lexer="dynamic_complete")
    rec = LanguageRecognizer(parser)
    for text in ("x", " x ", "yx", "y y y x", "yyyx"):
        assert rec.accepts(text) == _parses(parser, text), text
    assert not rec.accepts("yyyyx")


@pytest.mark.parametrize("seed", range(3))
def test_agrees_with_lark_on_json(seed):
    parser = lark.Lark((ROOT / "grammars" / "json.lark").read_text(), parser="earley", lexer="dynamic_complete")
    rec = LanguageRecognizer(parser)
    rng = random.Random(seed)
    base = '{"a": [1, -2.5e3, {"b": null}], "c": "x y", "d": true}'
    texts = [base]
    for _ in range(40):  # mutations: some still JSON, most not
        t = list(base)
        for _ in range(rng.randint(1, 2)):
            i = rng.randrange(len(t))
            op = rng.random()
            if op < 0.4:
                del t[i]
            elif op < 0.8:
                t.insert(i, rng.choice('{}[],:" 01a.e-'))
            else:
                t[i] = rng.choice('{}[],:" 01a')
        texts.append("".join(t))
    verdicts = [(_parses(parser, t), rec.accepts(t)) for t in texts]
    assert all(a == b for a, b in verdicts), [t for t, (a, b) in zip(texts, verdicts) if a != b]
    assert any(a for a, _ in verdicts) and not all(a for a, _ in verdicts)
