"""The parser over rule automata (``structgen.engine.parser``): configurations are sets of stacks,
so ambiguity is carried, not resolved early; ignored lexemes may come between any two others."""
from __future__ import annotations

import pytest

from structgen.compiler import GrammarCompiler

GRAMMAR = r"""
start: pair | triple
pair: "(" NUM ")"
triple: "(" NUM NUM ")"
NUM: /[0-9]/
%ignore " "
"""


@pytest.fixture(scope="module")
def g(smol_info):
    return GrammarCompiler(smol_info).compile_lark(GRAMMAR)


def _t(g, name):
    return (g.term_names.index(name),)


def _lit(g, text):
    """The terminal lark named for a literal (e.g. "(" -> LPAR)."""
    names = {"(": "LPAR", ")": "RPAR"}
    return _t(g, names[text])


def test_ambiguity_is_kept_until_a_lexeme_decides(g):
    p = g.parser
    c = p.scan(p.initial, _lit(g, "("))
    c = p.scan(c, _t(g, "NUM"))
    assert c >= 0 and len(p.stacks[c]) == 2  # a pair or a triple: both stacks live
    assert not p.can_end[c]
    closed = p.scan(c, _lit(g, ")"))
    assert closed >= 0 and p.can_end[closed] and set(p.allowed[closed]) <= p.ignore_set  # only blanks may follow
    more = p.scan(c, _t(g, "NUM"))
    assert len(p.stacks[more]) == 1 and p.scan(p.scan(more, _lit(g, ")")), _t(g, "NUM")) == -1


def test_without_stacks_drops_readings(g):
    p = g.parser
    c = p.scan(p.scan(p.initial, _lit(g, "(")), _t(g, "NUM"))
    one = p.without_stacks(c, {0})
    assert len(p.stacks[one]) == 1 and p.without_stacks(c, {0, 1}) == -1


def test_ignored_lexemes_may_repeat_in_lark_grammars(g):
    """Lark lets ignored lexemes follow each other (``%ignore " "``: two blanks are two lexemes)."""
    p = g.parser
    ws = tuple(sorted(p.ignore))
    assert ws and p.ignore_repeats
    c = p.scan(p.initial, ws)
    assert c >= 0 and p.scan(c, ws) == c
    assert p.scan(c, _lit(g, "(")) >= 0


def test_ignored_lexemes_never_twice_in_a_row_without_repeats(smol_info):
    """JSON Schema's bounded whitespace is one ignored lexeme, or its bound would mean nothing."""
    from structgen.grammar.lark import lark_to_ir

    ir = lark_to_ir(GRAMMAR)
    ir.ignore_repeats = False
    g2 = GrammarCompiler(smol_info).compile_ir(ir)
    p = g2.parser
    ws = tuple(sorted(p.ignore))
    c = p.scan(p.initial, ws)
    assert c >= 0 and p.scan(c, ws) == -1
    assert p.scan(c, _lit(g2, "(")) >= 0


NESTED = r"""
start: e
e: a | b | c
a: "(" e ")"
b: "(" e "]"
c: "(" e "}" | "x"
"""


def test_nesting_adds_items_instead_of_multiplying_stacks(smol_info):
    """Each "(" opens three readings; the graph-structured stack packs them into one call of ``e``
    with three returns, so 40 levels hold 3 items (whole stacks would be 3^40), and the closing
    brackets still decide exactly which readings were right."""
    g = GrammarCompiler(smol_info).compile_lark(NESTED)
    p = g.parser
    names = {"(": "LPAR", ")": "RPAR", "]": "RSQB", "}": "RBRACE", "x": "X"}

    def run(text):
        c = p.initial
        for ch in text:
            c = p.scan(c, _t(g, names[ch]))
            if c < 0:
                return c
        return c

    deep = run("(" * 40)
    assert len(p.stacks[deep]) == 3 and len(p.positions) < 100
    closers = ")]}" * 14
    done = run("(" * 40 + "x" + closers[:40])
    assert done >= 0 and p.can_end[done]
    assert not p.can_end[run("(" * 40 + "x" + closers[:39])]
    assert p.can_end[run("((x)]")] and run("((x))x") < 0


def test_a_cut_keeps_the_top_of_the_stack_and_never_guesses_below(smol_info):
    """``cut`` replaces what lies two positions below the items by one opaque return: the cut
    configuration allows what the whole one allows, scans that stay above the cut agree, and one
    that pops below raises BelowCut instead of answering for a stack it cannot see."""
    from structgen.engine.parser import BelowCut

    g = GrammarCompiler(smol_info).compile_lark(NESTED)
    p = g.parser
    x, close = _t(g, "X"), _t(g, "RPAR")
    deep = p.initial
    for _ in range(5):
        deep = p.scan(deep, _t(g, "LPAR"))
    cut = p.cut(deep, 2)
    assert cut != deep and p.cut(deep, 2) == cut  # memoised
    assert p.allowed[cut] == p.allowed[deep] and p.can_end[cut] == p.can_end[deep]
    one = p.scan(p.initial, _t(g, "LPAR"))  # its items' position, the start's, the start rule's
    assert p.cut(one, 3) == one and p.cut(one, 2) != one and p.cut(p.initial, 2) == p.initial  # nothing below
    after_x = p.scan(cut, x)
    assert p.allowed[after_x] == p.allowed[p.scan(deep, x)]  # "x" completes e, returning one position down
    with pytest.raises(BelowCut):
        p.scan(after_x, close)  # ")" closes a, returning two positions down: below the cut
    with pytest.raises(BelowCut):
        p.scan(after_x, close)  # memoised as such
    assert p.scan(p.scan(deep, x), close) >= 0
    assert p.cut(deep, 8) == deep  # seven positions: nothing below eight


def test_masks_through_cut_configurations_equal_whole_ones(smol_info, smol_hf_tokenizer, monkeypatch):
    """json.lark over nested documents: every mask computed from cut configurations (shared by
    configurations that differ only deeper, made deeper when a token pops below) is the mask of
    the whole configuration, step by step."""
    import structgen.engine.compiled as compiled
    from structgen.engine.matcher import Matcher
    from structgen.shipped import shipped_grammar

    docs = ['[[[[{"a": [1, {"b": []}]}]]], [[[{"c": {"d": [[2]]}}]]]]',
            '{"x": [[{"y": [[[{"z": [3, 4]}]]]}]], "w": {"v": {"u": [[], [[]], {"t": {}}]}}}',
            '[{"a": [{"a": [{"a": [{"a": [true, null]}]}]}]}, [[[[[[false]]]]]], {"b": {"b": {"b": 0}}}]']

    def masks(g) -> list[bytes]:
        m, out = Matcher(g), []
        for doc in docs:
            m.reset()
            for t in smol_hf_tokenizer.encode(doc, add_special_tokens=False):
                out.append(m.next_token_mask().tobytes())
                assert m.accept_token(t)
        return out

    path = shipped_grammar("json").path
    monkeypatch.setattr(compiled, "CUT_AFTER", 10 ** 9)
    whole = masks(GrammarCompiler(smol_info).compile_lark(path))
    monkeypatch.setattr(compiled, "CUT_AFTER", 0)
    monkeypatch.setattr(compiled, "CUT_MIN_SHARE", 0)
    g = GrammarCompiler(smol_info).compile_lark(path)
    assert masks(g) == whole
    assert g._mask_alias  # masks were shared through cuts
    assert max(g._cut_depth.values(), default=0) > compiled.CUT_DEPTH  # and some token popped below one


PYTHON_TEXT = '''def f(a, b=-1):
    x = [[(a, -(-(-b)))], {"k": ((1, 2), [3])}]
    if not not x and a[0][0]:
        return f(g(h(i(j(k(1)))))) ** ---a
    return {"y": [x, (b,)]}["y"]
'''


@pytest.mark.parametrize("depth", [1, 3])
def test_follow_cuts_share_the_lexemes_past_a_tokens_first_and_never_change_a_mask(smol_info, smol_hf_tokenizer,
                                                                                   monkeypatch, depth):
    """python.lark: a first mask follows the lexemes past each token's first boundary from the
    configuration cut ``depth`` positions deep (``CompiledGrammar.follow_boundaries``), redoing from
    the whole configuration every scan that pops below the cut.  Masks equal those followed whole at
    every step, fewer configurations are made, and pops below the cut did happen (the test fails if
    a scan below the cut were answered instead of redone)."""
    import structgen.engine.compiled as compiled
    from structgen.bench.lark_corpora import CORPORA
    from structgen.engine.matcher import Matcher

    corpus = CORPORA["python"]
    ids = smol_hf_tokenizer.encode(PYTHON_TEXT, add_special_tokens=False)

    def masks(follow_depth: int):
        monkeypatch.setattr(compiled, "FOLLOW_CUT_DEPTH", follow_depth)
        g = GrammarCompiler(smol_info).compile_lark(corpus.grammar, start=corpus.start, indenter=corpus.indenter)
        redone = []
        whole = g._whole
        monkeypatch.setattr(g, "_whole", lambda w: redone.append(w) or whole(w))
        m, out = Matcher(g), []
        for t in ids:
            out.append(m.next_token_mask().tobytes())
            assert m.accept_token(t)
        assert m.is_accepting()
        return out, g.parser.n_configs, len(redone)

    plain, plain_configs, none_redone = masks(0)
    cut, cut_configs, redone = masks(depth)
    assert none_redone == 0 and redone > 0
    assert cut == plain and cut_configs < plain_configs
