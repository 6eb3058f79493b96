"""The ``structgen`` command: argument errors are usage errors; a real (fast) benchmark runs
end to end through ``main``."""
from __future__ import annotations

import json

import pytest

from structgen.cli import build_parser, main


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "generate" in out and "bench" in out


def test_bad_arguments_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["generate", "--regex", "a", "--sampler", "nope", "prompt"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "no-such-benchmark"])


def test_generate_has_the_sampler_options():
    args = build_parser().parse_args(["generate", "--regex", "a|b", "--sampler", "smc", "--particles", "3", "hi"])
    assert args.sampler == "smc" and args.particles == 3 and args.temperature is None


def test_bench_samplers_toy_part_runs(tmp_path, capsys):
    assert main(["bench", "samplers", "--parts", "toy", "--toy-samples", "200", "--particles", "4",
                 "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| asap |" in out and "| smc |" in out
    res = json.loads((tmp_path / "samplers.json").read_text())
    assert {r["method"] for r in res["toy"]["rows"]} == {"masked", "asap", "awrs", "smc"}
    assert (tmp_path / "samplers-tv.png").stat().st_size > 1000


@pytest.mark.parametrize("argv, said", [
    (["--schema", "missing.json"], "schema file missing.json not found"),
    (["--schema", '{"type": "strin"}'], "#/type"),
    (["--regex", "("], "invalid regular expression"),
    (["--grammar", "start: undefined_rule"], "undefined_rule"),
    (["--grammar", "jsonn"], "no shipped grammar or file named 'jsonn' (did you mean 'json'?)"),
    (["--schema", "persn"], "no shipped schema or file named 'persn' (did you mean 'person'?)"),
])
def test_a_bad_constraint_is_said_before_the_model_loads(argv, said, capsys, monkeypatch):
    import structgen.models

    def no_load(*a, **k):
        raise AssertionError("the model was loaded before the constraint was checked")

    monkeypatch.setattr(structgen.models, "load_model", no_load)
    assert main(["generate", *argv, "a prompt"]) == 1
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_generate_finds_a_shipped_schema_by_name(tmp_path, monkeypatch):
    from structgen.cli.generate import _checked_constraint
    from structgen.shipped import schema_file

    monkeypatch.chdir(tmp_path)  # outside a checkout: no schemas/ folder beside
    args = build_parser().parse_args(["generate", "--schema", "person", "Invent a person."])
    assert _checked_constraint(args) == json.loads(schema_file("person").read_text())
