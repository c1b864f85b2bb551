"""Isolation levels and the command line that puts a driver script inside them.

Two levels, strongest first:

``bwrap``
    bubblewrap with fresh pid, ipc, uts, network (no interfaces but loopback) and cgroup
    namespaces; the filesystem is only /usr and the toolchain (read-only), the job's sources
    (read-only) and a size-capped tmpfs; no host environment variable passes. When we run as
    root the program runs as a per-worker unprivileged uid, so RLIMIT_NPROC really binds and
    no file outside the sandbox is writable even by mistake. The namespace dies with its
    first process, so nothing outlives the job.
``rlimits``
    the fallback where bubblewrap is refused (typical inside Docker without
    ``--security-opt seccomp=unconfined``/user namespaces): setsid, the same rlimits, an empty
    environment, private directories and, as root, the per-worker uid (all its processes are
    killed after each job). The host filesystem stays readable and the network is NOT
    blocked: rely on the container for those.

``strict`` demands ``bwrap`` and fails loudly without it; ``auto`` takes the best available.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .toolchain import Toolchain

BWRAP = "bwrap"
RLIMITS = "rlimits"
SLOT_UID_BASE = 61000  # worker slot k runs untrusted code as uid SLOT_UID_BASE + k


class IsolationUnavailable(RuntimeError):
    """Strict isolation was demanded but bubblewrap cannot create its namespaces here."""


@dataclass(frozen=True)
class Layout:
    """Where the driver sees the sources, the writable work dir and the toolchain."""

    src: str
    work: str
    toolchain: str


def _runs_as_root() -> bool:
    return os.geteuid() == 0


def slot_uid(slot: int, level: str = BWRAP) -> int | None:
    """The uid for untrusted code in worker ``slot``, or None when we cannot switch uids
    (not root, or, in the fallback level, the toolchain is not readable by other users)."""
    if not _runs_as_root():
        return None
    if level != BWRAP and not _toolchain_readable_by_others():
        return None
    return SLOT_UID_BASE + slot


@functools.lru_cache(maxsize=1)
def _toolchain_readable_by_others() -> bool:
    """Without a mount namespace the unprivileged uid must reach the toolchain itself
    (rustup under /root, mode 700, is not reachable; /usr/local/rustup in Docker is)."""
    from .toolchain import find_toolchain

    clippy = str(find_toolchain().clippy_driver)
    probe = [*_setpriv(SLOT_UID_BASE), "/bin/sh", "-c", f'test -x "{clippy}"']
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def _setpriv(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]


def bwrap_argv(toolchain: Toolchain, src_dir: Path, disk_mb: int, uid: int | None) -> list[str]:
    """The bubblewrap prefix; the driver script follows it."""
    argv = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent", "--new-session", "--clearenv",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
        "--perms", "0755", "--dir", "/etc", "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",  # `cc` -> gcc: rustc then links with rust-lld
        "--ro-bind", str(toolchain.sysroot), "/toolchain",
        "--ro-bind", str(src_dir), "/src",
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(disk_mb * 1024 * 1024), "--perms", "1777", "--tmpfs", "/tmp",
        "--chdir", "/tmp",
        "--setenv", "PATH", "/toolchain/bin:/usr/bin",
        "--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp", "--setenv", "LANG", "C.UTF-8",
    ]  # fmt: skip
    if uid is None:
        argv += ["--unshare-user-try", "--"]
    else:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", *_setpriv(uid)]
    return argv


def rlimits_argv(uid: int | None) -> list[str]:
    """The fallback prefix: only the uid switch (rlimits are applied per step by the driver)."""
    return _setpriv(uid) if uid is not None else []


def host_env(toolchain: Toolchain, work_dir: str) -> dict[str, str]:
    """The only environment variables untrusted code sees in the fallback level."""
    return {"PATH": f"{toolchain.sysroot}/bin:/usr/bin:/bin", "HOME": work_dir, "TMPDIR": work_dir, "LANG": "C.UTF-8"}


@functools.lru_cache(maxsize=1)
def bwrap_problem() -> str | None:
    """None when bubblewrap works here; else why not (shown to the user on fallback)."""
    from .toolchain import find_toolchain

    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    if _runs_as_root() and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing, so the sandbox could not drop root"
    probe = Path("/tmp") if Path("/tmp").is_dir() else Path.cwd()
    argv = [*bwrap_argv(find_toolchain(), probe, 16, slot_uid(0)), "/bin/true"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap did not run: {exc}"
    if proc.returncode != 0:
        return f"bubblewrap is refused here: {proc.stderr.strip() or f'exit {proc.returncode}'}"
    return None


def choose_level(requested: str) -> tuple[str, str | None]:
    """Resolve ``auto``/``strict``/``bwrap``/``rlimits`` into a level and an optional warning."""
    if requested == RLIMITS:
        return RLIMITS, _fallback_caveat()
    if requested not in ("auto", "strict", BWRAP):
        raise ValueError(f"isolation must be auto, strict or rlimits, got {requested!r}")
    problem = bwrap_problem()
    if problem is None:
        return BWRAP, None
    if requested in ("strict", BWRAP):
        raise IsolationUnavailable(f"strict isolation requested but {problem}")
    caveat = _fallback_caveat()
    warning = f"falling back to rlimits-only isolation (no network or filesystem namespace): {problem}"
    return RLIMITS, warning + (f"; {caveat}" if caveat else "")


def _fallback_caveat() -> str | None:
    if _runs_as_root() and not _toolchain_readable_by_others():
        return "the toolchain is not readable by other users, so untrusted code runs as root (process limit cannot bind)"
    return None


def layout_for(level: str, toolchain: Toolchain, src_dir: Path, work_dir: Path) -> Layout:
    if level == BWRAP:
        return Layout(src="/src", work="/tmp", toolchain="/toolchain")
    return Layout(src=str(src_dir), work=str(work_dir), toolchain=str(toolchain.sysroot))
