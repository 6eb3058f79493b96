"""The engine's value-boundary hook runs any typed check of the IR, not only JSON Schema's.

A check written here -- not by the JSON Schema front end -- is attached to a rule of a regex
grammar, and the Matcher, its masks' EOS bit and the one ``advance`` path all obey it.
"""
from __future__ import annotations

import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.grammar.ir import CheckContext, DistinctItems, GrammarIR, Repeat, Sym, ValueCheck, alt, seq
from structgen.grammar.regex import compile_regex


class EvenNumber(ValueCheck):
    """The completed value, read as an integer, is even (counts its calls)."""

    def __init__(self, rule):
        super().__init__(rule)
        self.calls = []

    def accepts(self, value: bytes, context: CheckContext) -> bool:
        self.calls.append((value, context.start, context.end))
        return int(value) % 2 == 0


class FirstDigitIdentity(DistinctItems):
    """Items are the same when their first digit is (a deliberately coarse identity)."""

    def identity(self, value: bytes):
        return value[:1] or None


def _even_grammar(compiler, check):
    ir = GrammarIR(rules={}, terminals={}, start="start", source="test:even")
    digits = ir.add_terminal("INT", compile_regex(r"[1-9][0-9]{0,5}"))
    ir.rules["num"] = digits
    ir.rules["start"] = Sym("num")
    ir.checks.append(check)
    return compiler.compile_ir(ir)


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


def test_a_value_check_decides_whether_the_output_may_end(compiler):
    check = EvenNumber("num")
    g = _even_grammar(compiler, check)
    m = Matcher(g)
    assert m.may_dead_end
    assert m.accept_string("13") and not m.is_accepting()  # odd: the number may grow, but not end
    eos = g.eos_ids[0]
    assert not m.is_token_allowed(eos) and not m.accept_token(eos)
    assert (b"13", 0, 2) in check.calls  # the value's bytes and where it sits in the output
    assert m.accept_string("4") and m.is_accepting() and m.accept_token(eos)


def test_a_failing_check_drops_only_the_failing_reading(compiler):
    """Under ambiguity (two readings of the same digits) the check prunes one parser stack."""
    ir = GrammarIR(rules={}, terminals={}, start="start", source="test:amb")
    two = ir.add_terminal("A", compile_regex(r"[0-9]{2}"))
    ir.rules["checked"] = two
    ir.rules["free"] = two
    ir.rules["start"] = alt(Sym("checked"), Sym("free"))
    ir.checks.append(EvenNumber("checked"))
    m = Matcher(compiler.compile_ir(ir))
    assert m.accept_string("13") and m.is_accepting()  # the unchecked reading still ends
    ir.rules["start"] = Sym("checked")
    m = Matcher(compiler.compile_ir(ir))
    # no other reading: the byte completing an odd two-digit value is refused at once
    assert m.accept_string("1") and not m.accept_string("3") and m.accept_string("2") and m.is_accepting()


def test_distinct_items_use_the_checks_identity(compiler):
    ir = GrammarIR(rules={}, terminals={}, start="start", source="test:distinct")
    lb, rb = ir.add_terminal("LB", compile_regex(r"\[")), ir.add_terminal("RB", compile_regex(r"\]"))
    comma = ir.add_terminal("C", compile_regex(","))
    ir.rules["item"] = ir.add_terminal("N", compile_regex(r"[1-9][0-9]?"))
    ir.rules["start"] = seq(lb, Sym("item"), Repeat(seq(comma, Sym("item"))), rb)
    ir.checks.append(FirstDigitIdentity("item"))
    g = compiler.compile_ir(ir)
    m = Matcher(g)
    assert m.accept_string("[12,34,5]") and m.is_accepting()
    m = Matcher(g)
    assert m.accept_string("[12,34,") and m.accept_string("1")  # a number may grow: not complete yet
    # every completion of an item starting with 1 repeats the identity of "12": the byte that
    # completes it is refused, whether the number ends by growing ("15") or at the next byte
    assert not m.accept_string("5") and not m.accept_string(",") and not m.accept_string("]")
    m.rollback(1)
    assert m.accept_string("5,6]") and m.is_accepting()  # "5" and "6" are new
