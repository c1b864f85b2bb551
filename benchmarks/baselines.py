"""What the harness is measured against, shared by the sandbox benchmarks: the naive approach
(a fresh cargo project per program, build + clippy + test, as the Oxen run did) and the floor (a
bare, unsandboxed ``rustc --test`` and one run of the test binary)."""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def naive_one(source: str, cargo: str) -> None:
    with tempfile.TemporaryDirectory(prefix="rg-naive-") as tmp:
        root = Path(tmp)
        (root / "src").mkdir()
        (root / "Cargo.toml").write_text('[package]\nname = "solution"\nversion = "0.1.0"\nedition = "2021"\n')
        (root / "src" / "lib.rs").write_text(source)
        for command in (["build"], ["clippy"], ["test"]):
            subprocess.run([cargo, *command, "--offline", "-q"], cwd=root, capture_output=True, check=False)


def floor_one(source: str, rustc: str) -> None:
    with tempfile.TemporaryDirectory(prefix="rg-floor-") as tmp:
        src, binary = Path(tmp) / "lib.rs", Path(tmp) / "t"
        src.write_text(source)
        built = subprocess.run(
            [rustc, "--test", "--edition", "2021", "-C", "debuginfo=0", str(src), "-o", str(binary)],
            capture_output=True,
            check=False,
        )
        if built.returncode == 0:
            subprocess.run([str(binary), "-q"], capture_output=True, check=False)


def timed(fn: Callable[[str], None], sources: Sequence[str], workers: int) -> float:
    """Wall seconds to run ``fn`` on every source, ``workers`` at a time."""
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(fn, sources))
    return time.perf_counter() - start


def machine() -> dict[str, object]:
    """What a figure was measured on: cores, CPU model, date."""
    import datetime
    import os
    import platform

    model = ""
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = platform.processor()
    return {"cores": os.cpu_count(), "cpu": model, "date": datetime.date.today().isoformat()}


def provenance() -> dict[str, object]:
    """Where a results file came from: the machine, the commit (and whether the tree had edits), the
    command that wrote it, and when."""
    import datetime
    import platform
    import subprocess
    import sys

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    return {
        **machine(),
        "host": platform.node(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "command": " ".join(["python", *sys.argv]),
    }
