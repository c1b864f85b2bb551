"""Resource limits for untrusted code, each with its unit and what the program sees on breach.

| limit              | default | breach                                              |
|--------------------|---------|-----------------------------------------------------|
| compile_wall_s     | 60 s    | the step's processes killed, status ``timeout``     |
| run_wall_s         | 20 s    | the step's processes killed, status ``timeout``     |
| compile_cpu_s      | 60 s    | SIGXCPU/SIGKILL, status ``timeout``                 |
| run_cpu_s          | 10 s    | SIGXCPU/SIGKILL, status ``timeout``                 |
| compile_memory_mb  | 4096    | per process (RLIMIT_AS) and per job (cgroup): ``memory_limit`` |
| run_memory_mb      | 512     | per process (RLIMIT_AS) and for all of the job's test processes together (cgroup) |
| stack_mb           | 64      | RLIMIT_STACK of every step's main thread            |
| compile_procs      | 256     | fork/thread creation fails (rustc and the linker need threads) |
| run_procs          | 32      | fork/thread creation fails (fork bombs stop here)   |
| file_size_mb       | 64      | SIGXFSZ, status ``output_limit``                    |
| open_files         | 256     | open() fails with EMFILE                            |
| disk_mb            | 256     | the private tmpfs is full (ENOSPC)                  |
| output_kb          | 1024    | per stream; sandbox killed, status ``output_limit`` |

Wall time is twice CPU time by default, as judges do, so a sleeping program is stopped but a
busy machine does not turn correct code into a timeout. Memory is limited per process as address
space (RLIMIT_AS) and, where cgroup v1 is writable (root), per job for the whole process tree,
kernel memory (inodes, pipes) included; see ``cgroups.py``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class Limits:
    """Per-job resource limits. Frozen so a batch cannot change them under a running job."""

    compile_wall_s: float = 60.0
    run_wall_s: float = 20.0
    compile_cpu_s: int = 60
    run_cpu_s: int = 10
    compile_memory_mb: int = 4096
    run_memory_mb: int = 512
    compile_procs: int = 256
    run_procs: int = 32
    file_size_mb: int = 64
    open_files: int = 256
    disk_mb: int = 256
    output_kb: int = 1024
    stack_mb: int = 64

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Limits.{f.name} must be a positive number, got {value!r}")

    def with_run_timeout(self, timeout_s: float | None) -> Limits:
        """The same limits with a job's own ``timeout_s`` as the test run's CPU time (wall: twice that)."""
        if timeout_s is None:
            return self
        return replace(self, run_wall_s=max(2.0 * timeout_s, timeout_s + 1.0), run_cpu_s=max(1, math.ceil(timeout_s)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Limits:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown limit(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
        return cls(**data)
