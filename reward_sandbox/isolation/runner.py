"""Build ``rg-run`` (``runner.c``), the small root-side helper that starts each step confined.

It is compiled once per machine with the C compiler the Rust linker needs anyway, and kept in
the cache directory under a name that carries the source's hash, so an edit rebuilds it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from ..cachedir import default_cache_dir
from ..compile.toolchain import ToolchainError

SOURCE = Path(__file__).with_name("runner.c")


@functools.lru_cache(maxsize=1)
def runner_path() -> Path:
    """The compiled runner, built on first use; raises :class:`ToolchainError` without a C compiler."""
    code = SOURCE.read_bytes()
    target = default_cache_dir() / "bin" / f"rg-run-{hashlib.sha256(code).hexdigest()[:16]}"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / "rg-run"
        proc = subprocess.run(["cc", "-O2", "-o", str(out), str(SOURCE)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ToolchainError(f"could not build the sandbox runner with cc: {proc.stderr.strip()[-500:]}")
        out.chmod(0o755)
        os.replace(out, target)
    return target
