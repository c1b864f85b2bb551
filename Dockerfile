# syntax=docker/dockerfile:1
# Two images from one file:
#   docker build --target cpu -t rust-grpo:cpu .    scoring / reward serving (no torch)
#   docker build --target gpu -t rust-grpo:gpu .    training with vLLM on a CUDA host
# Base images are build ARGs, so air-gapped builds can point at a local mirror or a debootstrap base.
ARG CPU_BASE=python:3.11-slim-bookworm
# The GPU image needs no CUDA base: torch's and vLLM's CUDA wheels carry their CUDA libraries, and the
# NVIDIA container runtime brings the driver. Python 3.11 as in the CPU image, which every pin needs
# (transformers, trl, accelerate, pyarrow, fastapi require >= 3.11; Ubuntu 22.04's python3 is 3.10).
ARG GPU_BASE=python:3.11-slim-bookworm
ARG RUST_VERSION=1.95.0

# ---- Rust toolchain with clippy, installed once and copied into both images ----
FROM ${CPU_BASE} AS rust
ARG RUST_VERSION
ENV RUSTUP_HOME=/opt/rust/rustup CARGO_HOME=/opt/rust/cargo PATH=/opt/rust/cargo/bin:$PATH
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && curl -sSf https://sh.rustup.rs -o /tmp/rustup.sh \
 && sh /tmp/rustup.sh -y --no-modify-path --profile minimal --default-toolchain "${RUST_VERSION}" --component clippy \
 && rm /tmp/rustup.sh \
 && chmod -R a+rX /opt/rust

# ---- CPU image: the sandbox, the scorer (with its PNG report) and the reward server ----
# The default command serves on 0.0.0.0 so that `docker run -p 8808:8808` reaches it; the server
# refuses a non-loopback address without a token, so it needs `-e REWARD_SANDBOX_TOKEN=...` (or
# REWARD_SANDBOX_TOKEN_FILE naming a mounted secret) and otherwise exits 2 with one line saying so.
FROM ${CPU_BASE} AS cpu
ENV RUSTUP_HOME=/opt/rust/rustup CARGO_HOME=/opt/rust/cargo PATH=/opt/rust/cargo/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_BREAK_SYSTEM_PACKAGES=1
# the librust-*-dev packages: the sources of the crate set graded programs may use (reward_sandbox/compile/crates.py)
ARG CRATE_PACKAGES="librust-itertools-dev librust-lazy-static-dev librust-md5-dev librust-num-dev librust-once-cell-dev librust-rand-dev librust-regex-dev librust-serde-dev librust-serde-json-dev librust-serde-derive-dev"
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap gcc libc6-dev util-linux ${CRATE_PACKAGES} \
 && rm -rf /var/lib/apt/lists/*
COPY --from=rust /opt/rust /opt/rust
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY reward_sandbox ./reward_sandbox
COPY rust_grpo ./rust_grpo
COPY data ./data
# PIP_CERT: a CA bundle for builds behind a TLS-inspecting proxy (scripts/docker_check.sh passes the host's)
ARG PIP_CERT=""
# report: matplotlib for `rust-grpo score`'s report.png; score needs no torch, so none is installed
RUN if [ -z "$PIP_CERT" ]; then unset PIP_CERT; fi && python3 -m pip install --no-compile -c constraints.txt ".[serve,report]"
COPY configs ./configs
# /app/runs (score's default --out) owned by the user: a named volume mounted there inherits it
RUN useradd --create-home --uid 10001 grader && mkdir -p /app/runs && chown 10001:10001 /app/runs
USER 10001
# the crate set's rlibs, built once for this toolchain (~/.cache/reward-sandbox/crates-<key>): workers start warm
RUN reward-sandbox crates
EXPOSE 8808
HEALTHCHECK --interval=30s --timeout=5s CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8808/healthz')"]
CMD ["reward-sandbox", "serve", "--host", "0.0.0.0", "--port", "8808"]

# ---- GPU image: training with TRL + PEFT + vLLM ----
FROM ${GPU_BASE} AS gpu
ENV RUSTUP_HOME=/opt/rust/rustup CARGO_HOME=/opt/rust/cargo PATH=/opt/rust/cargo/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 DEBIAN_FRONTEND=noninteractive \
    HF_HOME=/cache/hf
# the crate set's sources: the same Debian packages as the CPU image (the same crate-set key)
ARG CRATE_PACKAGES="librust-itertools-dev librust-lazy-static-dev librust-md5-dev librust-num-dev librust-once-cell-dev librust-rand-dev librust-regex-dev librust-serde-dev librust-serde-json-dev librust-serde-derive-dev"
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap gcc libc6-dev util-linux ${CRATE_PACKAGES} \
 && rm -rf /var/lib/apt/lists/*
COPY --from=rust /opt/rust /opt/rust
WORKDIR /app
COPY . .
# pinned as tested (constraints.txt), except torch: vLLM brings the CUDA torch it was built against
RUN grep -v '^torch==' constraints.txt > /tmp/constraints-gpu.txt \
 && python3 -m pip install --no-compile -c /tmp/constraints-gpu.txt ".[train,serve,vllm]" \
 && rm /tmp/constraints-gpu.txt
# The mount points exist and belong to the user, so the named volume hf-cache inherits that owner;
# a bind mount (./runs) keeps its host owner: `mkdir -p runs && sudo chown 10001 runs` first.
RUN useradd --create-home --uid 10001 trainer \
 && mkdir -p /app/runs /cache/hf \
 && chown -R 10001:10001 /app /cache/hf
USER 10001
CMD ["rust-grpo", "train", "--config", "configs/modern-1.5b.toml"]
