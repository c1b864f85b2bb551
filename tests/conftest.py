"""Shared fixtures: one real grader per isolation level (real cargo toolchain, real sandbox)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reward_sandbox import Grader, Limits
from reward_sandbox.cache import ResultCache
from reward_sandbox.isolation.levels import bwrap_problem

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"

os.environ.setdefault("PATH", "")
if shutil.which("cargo") is None:
    os.environ["PATH"] = f"{Path.home() / '.cargo' / 'bin'}:{os.environ['PATH']}"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """A repository script (``benchmarks/...``, ``scripts/...``) run from the root, as a user runs it."""
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=False)


TEST_LIMITS = Limits(run_wall_s=10.0, run_cpu_s=5, compile_wall_s=60.0)


def _reachable_toolchain_copy() -> None:
    """The rlimits fallback refuses to run untrusted code as root, so its unprivileged uid must reach
    the toolchain. rustup under /root (mode 0700) is out of its reach: give the whole test session a
    hard-link copy where it can (no bytes copied), as the refusal message tells users to do."""
    if os.geteuid() != 0 or os.environ.get("REWARD_SANDBOX_RUSTC") or shutil.which("rustc") is None:
        return
    sysroot = Path(
        subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, check=False).stdout.strip()
    )
    if not sysroot.is_dir() or all(os.stat(p).st_mode & 0o001 for p in [sysroot, *sysroot.parents]):
        return
    copy = Path("/var/tmp/reward-sandbox-toolchain") / sysroot.name
    if not (copy / "bin" / "rustc").exists():
        copy.parent.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["cp", "-al", str(sysroot), str(copy)], capture_output=True, check=False).returncode != 0:
            return
    os.environ["REWARD_SANDBOX_RUSTC"] = str(copy / "bin" / "rustc")


_reachable_toolchain_copy()


def bwrap_available() -> bool:
    return shutil.which("cargo") is not None and bwrap_problem() is None


needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap unavailable here")


@pytest.fixture(scope="session")
def grader() -> Grader:
    """The default: best isolation available, fresh in-memory cache (so tests really compile)."""
    with Grader(workers=2, limits=TEST_LIMITS, cache=ResultCache()) as g:
        yield g


@pytest.fixture(scope="session")
def strict_grader() -> Grader:
    if not bwrap_available():
        pytest.skip("bubblewrap unavailable here")
    with Grader(workers=2, isolation="strict", limits=TEST_LIMITS, cache=ResultCache()) as g:
        yield g


@pytest.fixture(scope="session")
def fallback_grader() -> Grader:
    with Grader(workers=2, isolation="rlimits", limits=TEST_LIMITS, cache=ResultCache()) as g:
        yield g


@pytest.fixture(scope="session")
def cargo_grader() -> Grader:
    with Grader(workers=2, backend="cargo", limits=TEST_LIMITS, cache=ResultCache()) as g:
        yield g


@pytest.fixture
def foreground() -> Iterator[None]:
    """Python's own SIGINT handler, as in a process started from a terminal. A suite started in the
    background (`make test &`) begins with SIGINT ignored; an ignored signal stays ignored in every
    child it starts (a handled one is reset by exec), and the training guard rightly leaves it so."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def grade_one(grader: Grader, **job):
    job.setdefault("id", "job")
    (result,) = grader.grade([job])
    return result
