"""Every grammar lark ships, against lark itself (``structgen.grammar.lark``, the indenter).

* ``lark.lark`` (lark's grammar of grammars) on real ``.lark`` files: lark's own and this
  project's;
* ``python.lark`` (start ``file_input``, ``indenter="python"``) on real Python files: this
  project's and the standard library's;
* ``common.lark`` / ``unicode.lark`` through ``%import``.

Every text lark parses is accepted token by token under the SmolLM2 and DeepSeek-V4 tokenizers;
random mutations lark rejects are rejected by the end; masks equal brute force on sampled states.
"""
from __future__ import annotations

import ast
import random

import pytest

from structgen.bench.lark_corpora import CORPORA, lark_parses
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import GrammarError

from engine_helpers import brute_force_mask, mask_set

#: texts per corpus (lark's .lark files are 8 in all; Python files half ours, half the stdlib's)
N_TEXTS = {"lark": 8, "python": 50}


def _accepts_bytes(g, text: str) -> bool:
    m = Matcher(g)
    return m.accept_bytes(text.encode()) and m.is_accepting()


def _accepts_tokens(g, ids: list[int]) -> bool:
    m = Matcher(g)
    return all(m.accept_token(t) for t in ids) and m.is_accepting()


def _mutations(rng: random.Random, text: str, n: int) -> list[str]:
    alphabet = " \n\t:()[]{}'\"#=.,_aZ0\\?*|/-+"
    out = []
    for _ in range(n):
        i = rng.randrange(len(text))
        op = rng.random()
        if op < 0.4:
            out.append(text[:i] + text[i + 1:])
        elif op < 0.8:
            out.append(text[:i] + rng.choice(alphabet) + text[i:])
        else:
            out.append(text[:i] + rng.choice(alphabet) + text[i + 1:])
    return out


@pytest.fixture(scope="module", params=[pytest.param(n, marks=pytest.mark.minutes) if n == "python" else n
                                        for n in sorted(CORPORA)])  # python.lark: 40 s a test
def case(request):
    c = CORPORA[request.param]
    return c, c.lark_parser(), c.parsed_texts(N_TEXTS[c.name])


@pytest.fixture(scope="module")
def compilers(smol_info, deepseek_info):
    return {"smollm2": GrammarCompiler(smol_info), "deepseek": GrammarCompiler(deepseek_info)}


def _compile(compiler, c):
    return compiler.compile_lark(c.grammar, start=c.start, indenter=c.indenter)


def test_texts_lark_parses_are_accepted_token_by_token(case, compilers, smol_hf_tokenizer, deepseek_tokenizer):
    c, _, texts = case
    assert len(texts) >= (8 if c.name == "lark" else 40)
    encoders = {"smollm2": lambda t: smol_hf_tokenizer.encode(t, add_special_tokens=False),
                "deepseek": lambda t: deepseek_tokenizer.encode(t, add_special_tokens=False).ids}
    for tok, compiler in compilers.items():
        g = _compile(compiler, c)
        refused = [t[:80] for t in texts if not _accepts_tokens(g, encoders[tok](t))]
        assert not refused, (tok, refused[:3])


def test_mutations_agree_with_lark(case, compilers):
    c, parser, texts = case
    g = _compile(compilers["smollm2"], c)
    rng = random.Random(1)
    texts = [t for t in texts if len(t) < 4000][:12]
    rejected = 0
    for text in texts:
        for mutant in _mutations(rng, text, 25):
            expected = lark_parses(parser, mutant)
            rejected += not expected
            assert _accepts_bytes(g, mutant) == expected, (c.name, expected, mutant)
    assert rejected >= 50  # the mutations do exercise rejection


def test_masks_equal_brute_force_on_sampled_states(case, compilers, smol_hf_tokenizer):
    c, _, texts = case
    g = _compile(compilers["smollm2"], c)
    rng = random.Random(2)
    checked = 0
    for text in rng.sample(texts, 3):
        ids = smol_hf_tokenizer.encode(text, add_special_tokens=False)
        stops = set(rng.sample(range(len(ids)), min(3, len(ids))))
        m = Matcher(g)
        for i, t in enumerate(ids):
            if i in stops:
                assert mask_set(m) == brute_force_mask(m), (c.name, m.output_bytes()[-80:])
                checked += 1
            assert m.accept_token(t)
    assert checked >= 6


SOFT_KEYWORDS_AS_NAMES = ["a = _\n", "_ = 2\n", "for _ in range(3):\n    pass\n", "caps, _ = f(fp, None)\n",
                          "match = re.match(p, s)\n", "case = 1\n", "type = int\n", "print(match, case, type, _)\n",
                          "match x:\n    case [_, y]:\n        pass\n    case _:\n        pass\n"]
HARD_KEYWORDS_MISUSED = ["as = 1\n", "a isnot b\n", "def = 2\n", "x = a if b elsec\n", "import a asb\n"]


def test_soft_keywords_are_names_where_a_name_fits_and_hard_keywords_never(compilers):
    """Python's soft keywords (``_``, ``match``, ``case``, ``type``) are names except where a statement
    makes them keywords; hard keywords are reserved (Python's tokenizer, lark's basic lexer)."""
    c = CORPORA["python"]
    parser = c.lark_parser()
    g = _compile(compilers["smollm2"], c)
    for text in SOFT_KEYWORDS_AS_NAMES:
        ast.parse(text)
        assert lark_parses(parser, text), text
        assert _accepts_bytes(g, text), text
    for text in HARD_KEYWORDS_MISUSED:
        with pytest.raises(SyntaxError):
            ast.parse(text)
        assert not lark_parses(parser, text), text
        assert not _accepts_bytes(g, text), text


def test_a_hundred_nested_brackets_are_accepted(compilers):
    """The parser's graph-structured stack packs the readings each bracket opens (python.lark's
    call, tuple, generator and subscript all start an expression), so depth adds items, never
    multiplies them: 100 levels of calls, lists and tuples parse, and the mask inside is exact."""
    c = CORPORA["python"]
    parser = c.lark_parser()
    g = _compile(compilers["smollm2"], c)
    text = "x = " + "".join("f([(" for _ in range(34)) + "1" + "".join(")])" for _ in range(34)) + "\n"
    assert text.count("(") + text.count("[") >= 100 and lark_parses(parser, text)
    assert _accepts_bytes(g, text)
    m = Matcher(g)
    assert m.accept_bytes(text[:text.index("1")].encode())
    assert len(g.parser.stacks[m._state[0]]) < 200
    allowed = mask_set(m)
    assert allowed == brute_force_mask(m)
    assert not _accepts_bytes(g, text[:-2] + "\n")  # one bracket short


def test_lines_past_max_column_are_refused_outside_brackets_only(compilers):
    """A block indented past the indenter's ``max_column`` (64) is refused; inside brackets, where
    lark drops newlines, any indentation is taken (both read as the newline at any column)."""
    g = _compile(compilers["smollm2"], CORPORA["python"])
    assert _accepts_bytes(g, "if x:\n" + " " * 64 + "pass\n")
    assert not _accepts_bytes(g, "if x:\n" + " " * 70 + "pass\n")
    assert _accepts_bytes(g, "x = f(1,\n" + " " * 70 + "2)\n")


LIBRARY_USER = r"""
start: pair ("," pair)*
pair: ESCAPED_STRING ":" (SIGNED_NUMBER | CNAME | LETTER+)
%import common (ESCAPED_STRING, SIGNED_NUMBER, CNAME, LETTER)
%import WSLIB.WS
%ignore WS
"""


def test_the_shipped_libraries_import(smol_info):
    g = GrammarCompiler(smol_info).compile_lark(LIBRARY_USER.replace("WSLIB", "common"))
    assert _accepts_bytes(g, '"a": -1.5e3, "b" : x_1')
    assert not _accepts_bytes(g, '"a": -') and not _accepts_bytes(g, '"a": 1e')
    u = GrammarCompiler(smol_info).compile_lark(LIBRARY_USER.replace("WSLIB", "unicode"))
    assert _accepts_bytes(u, '"a":\xa0x, "b": 2'.replace("\\xa0", "\xa0"))  # unicode.lark's WS has NBSP


def test_start_as_a_list(smol_info):
    g = GrammarCompiler(smol_info).compile_lark("a: \"x\"+\nb: \"y\"+\n", start=["a", "b"])
    assert _accepts_bytes(g, "xx") and _accepts_bytes(g, "yy") and not _accepts_bytes(g, "xy")


def test_relative_imports_and_missing_files(smol_info, tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "words.lark").write_text('WORD: /[a-z]+/\npair: WORD "=" WORD\n')
    main = tmp_path / "main.lark"
    main.write_text('start: pair (";" pair)*\n%import .lib.words (pair, WORD)\n')
    g = GrammarCompiler(smol_info).compile_lark(main)
    assert _accepts_bytes(g, "a=b;c=d") and not _accepts_bytes(g, "a=b;")
    bad = tmp_path / "bad.lark"
    bad.write_text("start: pair\n%import .nowhere (pair)\n")
    with pytest.raises(GrammarError, match="nowhere"):
        GrammarCompiler(smol_info).compile_lark(bad)


def test_templates_override_extend_priorities_flags(smol_info):
    text = r"""
start: _list{item, ";"} | KW
_list{x, sep}: x (sep x)*
item: WORD | NUM
WORD.2: /[a-z]+/i
NUM: /[0-9]+/
KW: "Yes"i
%extend NUM: /0x[0-9a-f]+/
%override WORD: /[a-z]+ # letters only
                 (?:_[a-z]+)?/x
"""
    g = GrammarCompiler(smol_info).compile_lark(text)
    for ok in ("ab;0x1f;12", "a_b", "yes", "YES"):
        assert _accepts_bytes(g, ok), ok
    for bad in ("AB", "ab;", "0x"):
        assert not _accepts_bytes(g, bad), bad


def test_declared_terminals_need_an_indenter(smol_info):
    text = 'start: "a" _INDENT "b"\n%declare _INDENT\n'
    with pytest.raises(GrammarError, match="%declare"):
        GrammarCompiler(smol_info).compile_lark(text)


def test_a_bad_regex_names_its_terminal(smol_info):
    with pytest.raises(GrammarError, match="BROKEN"):
        GrammarCompiler(smol_info).compile_lark('start: BROKEN\nBROKEN: /a(b/\n')
