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
# rustup-init by version and checksum (the SHA-256 sums the official rust images pin for 1.28.2); rustup
# then checks every toolchain component against the channel manifest's own SHA-256 sums
ARG RUSTUP_VERSION=1.28.2
ARG RUSTUP_SHA256_AMD64=20a06e644b0d9bd2fbdbfd52d42540bdde820ea7df86e92e533c073da0cdd43c
ARG RUSTUP_SHA256_ARM64=e3853c5a252fca15252d07cb23a1bdd9377a8c6f3efa01531109281ae47f841c
ENV RUSTUP_HOME=/opt/rust/rustup CARGO_HOME=/opt/rust/cargo PATH=/opt/rust/cargo/bin:$PATH
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && case "$(dpkg --print-architecture)" in \
      amd64) triple=x86_64-unknown-linux-gnu; sum="${RUSTUP_SHA256_AMD64}" ;; \
      arm64) triple=aarch64-unknown-linux-gnu; sum="${RUSTUP_SHA256_ARM64}" ;; \
      *) echo "no rustup-init checksum for $(dpkg --print-architecture)" >&2; exit 1 ;; \
    esac \
 && curl -sSf -o /tmp/rustup-init "https://static.rust-lang.org/rustup/archive/${RUSTUP_VERSION}/${triple}/rustup-init" \
 && echo "${sum}  /tmp/rustup-init" | sha256sum -c - \
 && chmod +x /tmp/rustup-init \
 && /tmp/rustup-init -y --no-modify-path --profile minimal --default-toolchain "${RUST_VERSION}" --component clippy \
 && rm /tmp/rustup-init \
 && chmod -R a+rX /opt/rust

# ---- CPU image: the sandbox, the scorer (with its PNG report) and the reward server ----
# The default command serves on 0.0.0.0 so that `docker run -p 8808:8808` reaches it; the server
# refuses a non-loopback address without a token, so it needs `-e REWARD_SANDBOX_TOKEN=...` (or
# REWARD_SANDBOX_TOKEN_FILE naming a mounted secret) and otherwise exits 2 with one line saying so.
FROM ${CPU_BASE} AS cpu
ENV RUSTUP_HOME=/opt/rust/rustup CARGO_HOME=/opt/rust/cargo PATH=/opt/rust/cargo/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_BREAK_SYSTEM_PACKAGES=1
# the librust-*-dev packages: the sources of the crate set graded programs may use (reward_sandbox/compile/crates.py),
# and regex's own (aho-corasick, memchr: apt leaves them out as "recommends", then the crate set cannot build)
ARG CRATE_PACKAGES="librust-itertools-dev librust-lazy-static-dev librust-md5-dev librust-num-dev librust-once-cell-dev librust-rand-dev librust-regex-dev librust-serde-dev librust-serde-json-dev librust-serde-derive-dev librust-aho-corasick-dev librust-memchr-dev"
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap gcc libc6-dev util-linux ${CRATE_PACKAGES} \
 && rm -rf /var/lib/apt/lists/*
COPY --from=rust /opt/rust /opt/rust
WORKDIR /app
# PIP_CERT: a CA bundle for builds behind a TLS-inspecting proxy (scripts/docker_check.sh passes the host's)
ARG PIP_CERT=""
# every Python file by version and SHA-256 (locks/, made by scripts/lock_images.sh from constraints.txt):
# serve + report (matplotlib for `rust-grpo score`'s report.png); score needs no torch, so none is installed
COPY locks/cpu-image.txt /tmp/lock.txt
RUN if [ -z "$PIP_CERT" ]; then unset PIP_CERT; fi \
 && python3 -m pip install --no-compile --require-hashes --no-deps -r /tmp/lock.txt && rm /tmp/lock.txt
COPY pyproject.toml README.md constraints.txt ./
COPY reward_sandbox ./reward_sandbox
COPY rust_grpo ./rust_grpo
COPY data ./data
RUN python3 -m pip install --no-compile --no-deps --no-build-isolation .
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
ARG CRATE_PACKAGES="librust-itertools-dev librust-lazy-static-dev librust-md5-dev librust-num-dev librust-once-cell-dev librust-rand-dev librust-regex-dev librust-serde-dev librust-serde-json-dev librust-serde-derive-dev librust-aho-corasick-dev librust-memchr-dev"
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap gcc libc6-dev util-linux ${CRATE_PACKAGES} \
 && rm -rf /var/lib/apt/lists/*
COPY --from=rust /opt/rust /opt/rust
WORKDIR /app
# every Python file by version and SHA-256: train + serve + vLLM's CUDA build and the CUDA torch it
# needs, resolved for this image's CPython 3.11 (locks/gpu-image.txt; `make docker-check` resolves it again)
COPY locks/gpu-image.txt /tmp/lock.txt
RUN python3 -m pip install --no-compile --require-hashes --no-deps -r /tmp/lock.txt && rm /tmp/lock.txt
COPY . .
RUN python3 -m pip install --no-compile --no-deps --no-build-isolation .
# The mount points exist and belong to the user, so the named volume hf-cache inherits that owner;
# a bind mount (./runs) keeps its host owner: `mkdir -p runs && sudo chown 10001 runs` first.
RUN useradd --create-home --uid 10001 trainer \
 && mkdir -p /app/runs /cache/hf \
 && chown -R 10001:10001 /app /cache/hf
USER 10001
CMD ["rust-grpo", "train", "--config", "configs/modern-1.5b.toml"]
