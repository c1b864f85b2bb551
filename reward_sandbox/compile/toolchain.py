"""Find the Rust toolchain once, and describe it for the cache key.

The sandbox binds the toolchain's sysroot read-only at a fixed path, so we need the real
sysroot directory (not rustup's proxies in ~/.cargo/bin, which need $HOME and network).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
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


def host_triple(toolchain: Toolchain) -> str:
    """The host's target triple (``host:`` in ``rustc -vV``), '' if rustc did not say."""
    lines = toolchain.version.splitlines()
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("host:")), "")


@dataclass(frozen=True)
class DirectLink:
    """How a test binary is linked by the toolchain's own ``rust-lld``, called by rustc directly.

    rustc links through ``cc``, which starts ``collect2``, which starts lld: three processes and the
    C driver's spec handling before the linker reads a byte (~5 ms of a ~85 ms test build here).
    Calling lld directly needs what ``cc`` would add: the C runtime's start files, library dirs and
    the dynamic loader, which ``cc -###`` prints. ``args`` are those, in the order ``cc`` gives them.
    """

    lld: str  # rust-lld, relative to the sysroot
    args: tuple[str, ...]


_PROBE_OBJECT = "rg_probe.o"
_PROBE_TESTS = """
#[test] fn passes() { assert_eq!(1 + 1, 2); }
#[test] fn fails() { let v: Vec<i32> = Vec::new(); let _ = v[std::hint::black_box(3)]; }
"""


def _cc_link_args(linker: Path) -> tuple[str, ...] | None:
    """The linker arguments ``cc`` adds around a PIE's objects (x86-64 only), or None when its
    ``-###`` output holds anything this parser does not know (then rustc keeps linking via cc)."""
    try:
        shown = subprocess.run(
            [str(linker), "-###", "-m64", "-pie", "-nodefaultlibs", "-fuse-ld=lld", _PROBE_OBJECT, "-o", "rg_probe"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln for ln in shown.splitlines() if ln.startswith(" ") and "collect2" in ln.split()[0]]
    if len(lines) != 1:
        return None
    tokens = shlex.split(lines[0])[1:]
    pre: list[str] = []
    post: list[str] = []
    seen_probe = False
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in ("-plugin", "-o"):  # gcc's LTO plugin (lld ignores it), the output
            i += 2
            continue
        if token in ("-m", "-dynamic-linker", "-z"):
            pre += tokens[i : i + 2]
            i += 2
            continue
        if token == _PROBE_OBJECT:
            seen_probe = True
        elif token.endswith(".o"):
            (post if seen_probe else pre).append(token)
        elif token.startswith(("-plugin-opt", "-fuse-ld")) or token in ("-pie", "--as-needed", "--eh-frame-hdr"):
            pass  # the plugin's options; what rustc passes itself
        elif token.startswith(("-L", "--hash-style=", "--sysroot=")) or token in ("--build-id", "--enable-new-dtags"):
            pre.append(token)
        else:
            return None
        i += 1
    return tuple(pre + post) if seen_probe else None


@functools.lru_cache(maxsize=1)
def direct_link() -> DirectLink | None:
    """The direct link, if it works here: checked once per process by building and running a test
    binary whose one test passes and one panics (unwinding through the C runtime must work, or a
    failing test would abort the run). None on anything but x86-64 Linux with glibc, or when the
    check fails: test binaries are then linked through ``cc`` as rustc does by default."""
    toolchain = find_toolchain()
    host = host_triple(toolchain)
    lld = Path("lib") / "rustlib" / host / "bin" / "rust-lld"
    if host != "x86_64-unknown-linux-gnu" or not (toolchain.sysroot / lld).exists():
        return None
    args = _cc_link_args(toolchain.linker)
    if args is None:
        return None
    link = DirectLink(lld=str(lld), args=args)
    with tempfile.TemporaryDirectory(prefix="rg-link-") as tmp:
        (Path(tmp) / "probe.rs").write_text(_PROBE_TESTS)
        build = [str(toolchain.rustc), "--test", "-C", "debuginfo=0", *link_flags(link, str(toolchain.sysroot), host)]
        try:
            built = subprocess.run([*build, "probe.rs", "-o", "probe"], cwd=tmp, capture_output=True, timeout=120)
            ran = subprocess.run(["./probe", "--test-threads=1"], cwd=tmp, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
    if built.returncode != 0 or ran.returncode != 101 or "1 passed; 1 failed" not in ran.stdout:
        return None
    return link


def link_flags(link: DirectLink | None, sysroot: str, host: str) -> list[str]:
    """rustc flags that link a test binary against std as a shared library, found at run time
    through the binary's rpath into ``sysroot`` (the sandbox's view of the toolchain), by lld
    directly when ``link`` is given, else through ``cc``."""
    std = f"{sysroot}/lib/rustlib/{host}/lib"
    if link is None:
        return ["-C", "prefer-dynamic", "-C", f"link-arg=-Wl,-rpath,{std}"]
    lld = ["-C", f"linker={sysroot}/{link.lld}", "-C", "linker-flavor=ld.lld"]
    return ["-C", "prefer-dynamic", *lld, *(f"-Clink-arg={arg}" for arg in (*link.args, f"-rpath={std}"))]
