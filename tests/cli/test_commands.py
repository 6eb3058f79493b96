"""The command line's layout (``structgen/cli/``: one module per command group): every command
runs a function of its group's module, the commands and benchmarks keep their names and order in
``--help``, ``python -m structgen.cli`` is the console script, and the shared helpers."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from structgen.cli import build_parser, main
from structgen.cli.common import command_line, offline
from structgen.shipped import shipped_grammar_names, shipped_schema_names

BENCHMARKS = ["mask", "test-suite", "grammar", "regex", "dead-ends", "decode", "jsonschemabench", "samplers",
              "fuzz", "load", "memory", "startup", "values", "real-schemas", "decog", "vllm", "batch-masks", "gpu-masks",
              "kgqa", "page"]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def _leaves(parser: argparse.ArgumentParser, path=()):
    subs = _subcommands(parser)
    if not subs:
        yield path, parser
    for name, sub in subs.items():
        yield from _leaves(sub, (*path, name))


def test_the_commands_and_benchmarks_keep_their_names_and_order():
    parser = build_parser()
    assert list(_subcommands(parser)) == ["bench", "generate", "hmm", "kernels", "kg"]
    assert list(_subcommands(_subcommands(parser)["bench"])) == BENCHMARKS
    assert list(_subcommands(_subcommands(parser)["hmm"])) == ["distill"]
    assert list(_subcommands(_subcommands(parser)["kg"])) == ["serve"]
    assert list(_subcommands(_subcommands(parser)["kernels"])) == ["build", "_workload", "status"]


def test_every_command_runs_a_function_of_its_group():
    leaves = list(_leaves(build_parser()))
    assert len(leaves) == len(BENCHMARKS) + 6
    for path, parser in leaves:
        func = parser.get_default("func")
        assert callable(func), path
        assert func.__module__.startswith("structgen.cli."), (path, func.__module__)


def test_the_constraint_options_name_what_ships():
    generate = _subcommands(build_parser())["generate"]
    helps = {a.dest: a.help for a in generate._actions}
    assert all(name in helps["schema"] for name in shipped_schema_names())
    assert all(name in helps["grammar"] for name in shipped_grammar_names())


def test_python_dash_m_is_the_console_script(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    in_process = capsys.readouterr().out
    env = {**os.environ, "COLUMNS": os.environ.get("COLUMNS", "80")}
    out = subprocess.run([sys.executable, "-m", "structgen.cli", "--help"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == in_process.split()  # the same text, whatever the terminal's width


def test_command_line_quotes_what_a_shell_would_split():
    args = argparse.Namespace(_argv=["bench", "mask", "--engines", "structgen,xgrammar", "--output", "my results"])
    assert command_line(args) == "structgen bench mask --engines structgen,xgrammar --output 'my results'"


def test_offline_keeps_a_setting_the_user_made(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    offline()
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    offline()
    assert os.environ["HF_HUB_OFFLINE"] == "0"
