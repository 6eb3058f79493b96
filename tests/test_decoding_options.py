"""DecodingOptions: one set of decoding settings, checked once, for every entry point."""
from __future__ import annotations

import inspect

import pytest

from structgen import DecodingOptions, InvalidArgument
from structgen.decoding_options import DEFAULT_MAX_TOKENS, OPTION_NAMES


@pytest.mark.parametrize("bad", [dict(temperature=-1), dict(temperature=float("nan")), dict(top_p=0), dict(top_p=1.5),
                                 dict(top_k=-1), dict(max_tokens=0), dict(max_tokens=2.5), dict(particles=0),
                                 dict(sampler="beam"), dict(timeout=0), dict(seed="x"), dict(speculative="yes")])
def test_a_bad_setting_is_an_invalid_argument_naming_it(bad):
    name = next(iter(bad))
    with pytest.raises(InvalidArgument, match=name if name != "sampler" else "sampling method"):
        DecodingOptions(**bad)


def test_defaults_and_replace():
    o = DecodingOptions()
    assert o.max_tokens == DEFAULT_MAX_TOKENS and o.temperature is None and o.speculative
    assert o.replace(seed=3).seed == 3 and o.seed is None
    with pytest.raises(InvalidArgument):
        o.replace(top_p=2)
    assert tuple(o.as_kwargs()) == OPTION_NAMES


def test_every_entry_point_takes_every_setting():
    from structgen import api
    from structgen.integrations.langchain import model as lc

    for fn in (api.generate_json, api.generate_regex, api.generate_grammar, api.generate_structural_tag):
        params = inspect.signature(fn).parameters
        assert set(OPTION_NAMES) <= set(params), fn.__name__
        for name in OPTION_NAMES:  # the same defaults as the options object
            assert params[name].default == getattr(DecodingOptions(), name), (fn.__name__, name)
    assert lc._CALL_KWARGS == frozenset(OPTION_NAMES)


def test_the_api_refuses_a_bad_setting_before_it_loads_or_compiles(tmp_path):
    from structgen import generate_json

    # a model path that does not exist: the setting is refused first, so no ModelNotFound
    with pytest.raises(InvalidArgument, match="temperature"):
        generate_json(str(tmp_path / "no-model"), {"type": "integer"}, "x", temperature=-1)
