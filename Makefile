# One-command entry points. `make test` and `make demo` set everything up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TORCH  ?= torch==2.13.0

.PHONY: setup test test-fast demo bench bench-learning lint docker-check clean

$(STAMP): pyproject.toml constraints.txt
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust with clippy (rustup component add clippy)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -c constraints.txt -e ".[train,serve,dev]"
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

demo: $(STAMP)
	$(VENV)/bin/rust-grpo demo --out runs/demo --overwrite

bench: $(STAMP)
	$(PY) benchmarks/bench_sandbox.py
	$(PY) benchmarks/bench_batched.py
	$(PY) benchmarks/bench_learning.py
	$(PY) benchmarks/bench_exercism.py
	$(PY) benchmarks/bench_server.py

bench-learning: $(STAMP)
	$(PY) benchmarks/bench_learning.py

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/hadolint Dockerfile

docker-check: $(STAMP)
	bash scripts/docker_check.sh

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
