"""A per-job memory limit that holds for the whole tree of test processes (cgroup v1 memory).

RLIMIT_AS bounds one process; a test that spawns copies of itself multiplies it. Each worker
slot therefore owns one memory cgroup. Before the first step that runs untrusted code, the
driver moves itself into it (one migration per job: a migration costs a kernel RCU grace
period, ~5-10 ms here), so every test process is born inside and the job's test runs can never
use more than ``run_memory_mb`` together: anonymous memory, the files they write to the tmpfs,
and kernel memory for inodes and pipes. The cgroup outlives jobs; its peak and OOM counters are
read per job. Compile steps stay under their per-process RLIMIT_AS (the compiler runs no
program code). Processes are bounded per job by RLIMIT_NPROC: each slot has its own uid.

Where cgroup v1 memory is not writable (not root, or a container without it), memory stays
limited per process and :func:`cgroup_problem` says why.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup/memory")
PARENT = ROOT / "reward-sandbox"


@functools.lru_cache(maxsize=1)
def cgroup_problem() -> str | None:
    """None when per-job memory cgroups can be made here; else why not."""
    if not (ROOT / "memory.limit_in_bytes").exists():
        return f"no cgroup v1 memory hierarchy at {ROOT}"
    if not os.access(ROOT, os.W_OK):
        return f"{ROOT} is not writable (run as root to limit memory per job)"
    return None


def _read_int(path: Path, key: str | None = None) -> int:
    try:
        text = path.read_text()
    except OSError:
        return 0
    if key is None:
        return int(text.strip() or 0)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


class SlotMemory:
    """The memory cgroup of one worker slot."""

    def __init__(self, name: str) -> None:
        self.path = PARENT / name
        self.path.mkdir(parents=True, exist_ok=True)
        self._oom_before = 0

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def prepare(self, limit_mb: int) -> None:
        """Set this job's limit and zero the peak counter."""
        self.kill_all()
        (self.path / "memory.limit_in_bytes").write_text(str(limit_mb * 1024 * 1024))
        with contextlib.suppress(OSError):
            (self.path / "memory.max_usage_in_bytes").write_text("0")
        self._oom_before = self._oom_kills()

    def _oom_kills(self) -> int:
        return _read_int(self.path / "memory.oom_control", "oom_kill")

    def oom_killed(self) -> bool:
        """Whether the limit killed something since :meth:`prepare`."""
        return self._oom_kills() > self._oom_before

    def peak_mb(self) -> float:
        return _read_int(self.path / "memory.max_usage_in_bytes") / (1024 * 1024)

    def kill_all(self) -> int:
        """Kill every process still in the cgroup; how many there were."""
        killed = 0
        for _ in range(100):
            pids = [int(p) for p in self.procs.read_text().split()]
            if not pids:
                return killed
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed += len(pids)
            time.sleep(0.01)
        return killed

    def remove(self) -> None:
        self.kill_all()
        with contextlib.suppress(OSError):
            self.path.rmdir()
