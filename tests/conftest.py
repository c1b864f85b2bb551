"""Shared fixtures: one real grader per isolation level (real cargo toolchain, real sandbox)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from reward_sandbox import Grader, Limits
from reward_sandbox.cache import ResultCache
from reward_sandbox.isolation import bwrap_problem

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"

os.environ.setdefault("PATH", "")
if shutil.which("cargo") is None:
    os.environ["PATH"] = f"{Path.home() / '.cargo' / 'bin'}:{os.environ['PATH']}"

TEST_LIMITS = Limits(run_wall_s=5.0, run_cpu_s=5, compile_wall_s=60.0)


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


def grade_one(grader: Grader, **job):
    job.setdefault("id", "job")
    (result,) = grader.grade([job])
    return result
