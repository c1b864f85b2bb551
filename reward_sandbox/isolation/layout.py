"""Where a job's files live, on the host and as the sandboxed steps see them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layout:
    """Paths as the steps see them: sources (removed before tests run), work dir, toolchain, runner."""

    src: str
    work: str
    toolchain: str
    runner: str
    memory_cgroup: str | None  # the slot's cgroup.procs: the driver joins it before tests run
    crates: str | None = None  # the built crate set (``crates.py``), where the steps see it
    fresh_runs: bool = False  # each test run in namespaces of its own (runner.c: RG_FRESH_NS)


@dataclass(frozen=True)
class JobDir:
    """The host directories of one job: ``root`` (0711: the root-only driver script), ``src`` (the
    sources) and ``work`` (the slot uid's)."""

    root: Path

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def driver(self) -> Path:
        return self.root / "driver.sh"
