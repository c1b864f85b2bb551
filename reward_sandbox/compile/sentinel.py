"""The end-of-run sentinel's body, compiled once per process into a tiny rlib every test build links.

Each test binary ends with a sentinel test that reads the run's nonce from a root-owned file whose
name only the (exec-only) binary holds, and prints it (``assemble._sentinel_test``); a run whose
output does not end with it was cut short or forged (``testlog``). Written inline, the few lines of
file reading and locked stdout writing make rustc instantiate and generate std's generic I/O code in
every test build: measured ~15 ms of ~88 ms CPU per build of a small program (2026-12-05). Here the
body is compiled once, as ``rg_sentinel::done(path)``, and each test build links that rlib; the
sentinel test shrinks to one call and the build costs what it costs without a sentinel (~1 ms more).

What a program can do with it: nothing it could not do before. It reaches the crate only under a
random per-job name (``--extern {tag}_k=...``, ``Assembly.sentinel_crate``), so it cannot call or
shadow the sentinel's helper by name; and the helper holds no secret (the nonce file's path is
the call's argument, in the sentinel's source, which is deleted before any test runs). The rlib is
written into the job's read-only sources, root-owned, and deleted with them; a program may read it
while it compiles (``include_bytes!``), so it names no host path (``--remap-path-prefix``). Its own
``-C metadata`` keeps its crate id apart from a job's crate that shares its name (job crates get
none): an integration test crate links the job's library and this crate side by side.
"""

from __future__ import annotations

import functools
import subprocess
import tempfile
from pathlib import Path

from .toolchain import ToolchainError, find_toolchain

RLIB = "librg_sentinel.rlib"  # rustc wants `lib*.rlib` for an --extern path
METADATA = "reward-sandbox-sentinel"  # no job crate has it (they get none): never a job crate's id

# One write of the whole line under stdout's lock: no other thread's output can land inside it.
SOURCE = """\
//! The body of every test binary's sentinel test (reward_sandbox/compile/sentinel.py).
pub fn done(path: &str) {
    use std::io::Write;
    let nonce = std::fs::read(path).unwrap_or_default();
    let mut line = b"\\nRG_SENTINEL_".to_vec();
    line.extend_from_slice(nonce.trim_ascii());
    line.push(b'\\n');
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&line);
    let _ = out.flush();
}
"""


@functools.lru_cache(maxsize=1)
def sentinel_rlib() -> bytes | None:
    """The compiled sentinel crate, built by the toolchain's rustc once per process; None when it
    cannot be built here (test builds then carry the sentinel inline, as the cargo backend does)."""
    try:
        rustc = str(find_toolchain().rustc)
    except ToolchainError:
        return None
    with tempfile.TemporaryDirectory(prefix="rg-sentinel-") as tmp:
        (Path(tmp) / "lib.rs").write_text(SOURCE)
        argv = [rustc, "--edition", "2021", "--crate-type", "rlib", "--crate-name", "rg_sentinel"]
        # Job crates are built without -C metadata: a job's library named `rg_sentinel` would have
        # this crate's id, and a test crate linking both would not build (integration mode).
        argv += ["-C", f"metadata={METADATA}", f"--remap-path-prefix={tmp}=rg_sentinel"]
        argv += ["-C", "debuginfo=0", "lib.rs", "-o", RLIB]
        try:
            built = subprocess.run(argv, cwd=tmp, capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return None
        if built.returncode != 0:
            return None
        return (Path(tmp) / RLIB).read_bytes()


def extern_flags(aliases: list[str], src: str) -> list[str]:
    """``--extern`` for each job's name of the sentinel crate, all to the one rlib in ``src``."""
    return [flag for alias in aliases for flag in ("--extern", f"{alias}={src}/{RLIB}")]


def write_rlib(src_dir: Path) -> None:
    """Put the sentinel crate among a job's sources (root-owned, read-only to the job, deleted with
    the sources before any test runs)."""
    data = sentinel_rlib()
    if data is None:
        raise ToolchainError("the sentinel crate could not be built with this toolchain")
    path = src_dir / RLIB
    path.write_bytes(data)
    path.chmod(0o644)
