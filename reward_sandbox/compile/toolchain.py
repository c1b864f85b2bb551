"""Find the Rust toolchain once, and describe it for the cache key.

The sandbox binds the toolchain's sysroot read-only at a fixed path, so we need the real
sysroot directory (not rustup's proxies in ~/.cargo/bin, which need $HOME and network).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class ToolchainError(RuntimeError):
    """The Rust toolchain (rustc, clippy-driver, a C linker) is missing or broken."""


@dataclass(frozen=True)
class Toolchain:
    sysroot: Path
    rustc: Path
    clippy_driver: Path
    cargo: Path | None
    linker: Path
    version: str  # `rustc -vV` + `clippy-driver -V`, part of every cache key

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.version.encode()).hexdigest()[:16]


def _find_executable(name: str, env_var: str) -> str | None:
    override = os.environ.get(env_var)
    if override:
        return override
    found = shutil.which(name)
    if found:
        return found
    candidate = Path.home() / ".cargo" / "bin" / name
    return str(candidate) if candidate.exists() else None


@functools.lru_cache(maxsize=1)
def find_toolchain() -> Toolchain:
    """Locate rustc's sysroot, clippy-driver, cargo and the system linker, or explain what is missing."""
    rustc = _find_executable("rustc", "REWARD_SANDBOX_RUSTC")
    if rustc is None:
        raise ToolchainError("rustc not found: install Rust (rustup) or set REWARD_SANDBOX_RUSTC")
    try:
        sysroot = Path(
            subprocess.run([rustc, "--print", "sysroot"], check=True, capture_output=True, text=True).stdout.strip()
        )
        version = subprocess.run([rustc, "-vV"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ToolchainError(f"rustc at {rustc} does not run: {exc}") from exc
    clippy = sysroot / "bin" / "clippy-driver"
    if not clippy.exists():
        raise ToolchainError(f"clippy-driver not found in {sysroot}/bin: run `rustup component add clippy`")
    clippy_version = subprocess.run(
        [str(clippy), "-V"], capture_output=True, text=True, env={**os.environ, "LD_LIBRARY_PATH": str(sysroot / "lib")}
    ).stdout
    cargo = sysroot / "bin" / "cargo"
    linker_name = shutil.which("cc") or shutil.which("gcc")
    if linker_name is None:
        raise ToolchainError("no C linker (cc/gcc) found: install gcc (Debian: apt-get install gcc)")
    return Toolchain(
        sysroot=sysroot,
        rustc=sysroot / "bin" / "rustc",
        clippy_driver=clippy,
        cargo=cargo if cargo.exists() else None,
        linker=Path(os.path.realpath(linker_name)),
        version=version + clippy_version,
    )
