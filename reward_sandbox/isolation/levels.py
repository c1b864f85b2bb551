"""Isolation levels: each one a small class that says whether it works here and how to start a job.

``bwrap`` (strongest)
    bubblewrap with fresh pid, ipc, uts, network (loopback only, nothing listening) and cgroup
    namespaces; the filesystem is /usr and the toolchain read-only, the job's sources and a
    size-capped tmpfs; no host environment variable passes. The driver runs as sandbox root with only
    the capabilities to switch uid, kill, make binaries exec-only and give each test run namespaces
    of its own; every step runs through ``rg-run`` as the slot's unprivileged uid, under a seccomp
    filter (no namespaces, mounts, ptrace, keyrings, bpf), in the slot's memory cgroup. Each test run
    gets a pid, ipc and mount namespace of its own, with a fresh work dir and no /proc (``runner.c``):
    the programs of a batch share a build, never kernel state. The crate set is at ``/crates`` and
    bubblewrap reads its arguments from a pipe, so neither the compiler's command line nor
    ``/proc/1/cmdline`` names a host path (``/proc/self/mountinfo`` does, at compile time: a residual).
``rlimits`` (fallback)
    where bubblewrap is refused (some containers): the same runner, uid, seccomp filter, rlimits
    and memory cgroup, an empty environment and private 0700 directories, but the host filesystem
    stays readable where its modes allow and the network is NOT blocked: rely on the container.
    As root it refuses to start when the slot uid cannot reach the toolchain, rather than run
    untrusted code as root.

``strict`` demands ``bwrap`` and fails loudly without it; ``auto`` takes the best available.
A new level is one more subclass of :class:`Isolation`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from ..compile.crates import REGISTRY, cargo_replacement
from ..compile.crates import current as current_crates
from ..compile.toolchain import Toolchain, find_toolchain
from .cgroups import SlotMemory
from .layout import JobDir, Layout
from .runner import runner_path
from .slots import UidLease

AUTO, STRICT = "auto", "strict"
BWRAP = "bwrap"
RLIMITS = "rlimits"
CHOICES = (AUTO, STRICT, RLIMITS)


class IsolationUnavailable(RuntimeError):
    """The requested isolation level cannot run here; the message says why and how to fix it."""


def runs_as_root() -> bool:
    return os.geteuid() == 0


# Namespaces and the read-only system every sandbox gets (jobs, and the probe that checks bwrap works).
_BWRAP_BASE = [
    *("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"),
    *("--die-with-parent", "--new-session", "--clearenv"),
    *("--ro-bind", "/usr", "/usr"),
    *("--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin"),
]


class Isolation(ABC):
    """How a job's driver script is started, and where it finds its files."""

    name: ClassVar[str]

    @abstractmethod
    def problem(self) -> str | None:
        """None when this level works here; else why not (shown to the user)."""

    @abstractmethod
    def layout(self, job: JobDir, toolchain: Toolchain, memory: SlotMemory | None) -> Layout:
        """The paths the driver and its steps use."""

    @abstractmethod
    def command(
        self, job: JobDir, toolchain: Toolchain, memory: SlotMemory | None, disk_mb: int
    ) -> tuple[list[str], dict[str, str]]:
        """The argv that runs the driver script, and its environment."""

    def caveat(self) -> str | None:
        """What this level does not guarantee, when that is worth a warning."""
        return None

    def protect_sources(self, job: JobDir, uid: int | None) -> None:
        """Make the written sources readable by the job's uid and nobody else's, where that matters."""
        return None

    def after_job(self, uid: int | None) -> None:
        """Undo what a job could leave on the host."""
        return None

    def between_runs(self, job: JobDir, uid: int | None) -> None:
        """Before each test run: remove what an earlier run could have left outside the work dir
        (the driver empties that), so that no run finds another's files."""
        return None

    def exit_ends_all(self) -> bool:
        """Whether a sandbox that ended by itself (its driver said ``done`` and exited) has taken
        every process it started with it, so the host's sweep of the slot's uid has nothing left."""
        return False


class Bubblewrap(Isolation):
    name = BWRAP

    def exit_ends_all(self) -> bool:
        """Every step runs in the sandbox's pid namespace (seccomp refuses new namespaces), and
        bubblewrap exits only after the namespace's init has: the kernel has then killed and
        reaped every process in it. Not after a kill from the host: the init may still be dying."""
        return True

    def problem(self) -> str | None:
        return bwrap_problem()

    def layout(self, job: JobDir, toolchain: Toolchain, memory: SlotMemory | None) -> Layout:
        return Layout(
            src="/src",
            work="/tmp",
            toolchain="/toolchain",
            runner="/rg/run",
            memory_cgroup="/rg/memory" if memory is not None else None,
            crates=SANDBOX_CRATES if current_crates() is not None else None,
            fresh_runs=runs_as_root(),
        )

    def command(
        self, job: JobDir, toolchain: Toolchain, memory: SlotMemory | None, disk_mb: int
    ) -> tuple[list[str], dict[str, str]]:
        argv = [
            shutil.which("bwrap") or "bwrap",
            *_BWRAP_BASE,
            "--perms",
            "0755",
            "--dir",
            "/etc",
            "--ro-bind-try",
            "/etc/alternatives",
            "/etc/alternatives",  # `cc` -> gcc: rustc then links with rust-lld
            "--ro-bind",
            str(toolchain.sysroot),
            "/toolchain",
            "--ro-bind",
            str(job.src),
            "/src",  # emptied by the host before any test runs
            "--ro-bind",
            str(runner_path()),
            "/rg/run",
            "--ro-bind",
            str(job.driver),
            "/rg/driver.sh",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(disk_mb * 1024 * 1024),
            "--perms",
            "1777",
            "--tmpfs",
            "/tmp",
            "--chdir",
            "/tmp",
            "--setenv",
            "PATH",
            "/toolchain/bin:/usr/bin",
            "--setenv",
            "HOME",
            "/tmp",
            "--setenv",
            "TMPDIR",
            "/tmp",
            "--setenv",
            "LANG",
            "C.UTF-8",
        ]
        if memory is not None:
            argv += ["--bind", str(memory.procs), "/rg/memory"]
        argv += crate_binds()
        if runs_as_root():
            # root-side only: every step drops them with its uid (runner.c); CAP_SYS_ADMIN makes each
            # test run's namespaces, mounts its fresh work dir and /proc
            caps = (
                "CAP_SETUID",
                "CAP_SETGID",
                "CAP_KILL",
                "CAP_CHOWN",
                "CAP_FOWNER",
                "CAP_DAC_OVERRIDE",
                "CAP_SYS_ADMIN",
            )
            argv += ["--cap-drop", "ALL"]  # bubblewrap started by root keeps every capability unless told
            for cap in caps:
                argv += ["--cap-add", cap]
        else:
            argv += ["--unshare-user-try"]
        return [*argv, "--", "/bin/bash", "/rg/driver.sh"], {}


class RlimitsOnly(Isolation):
    name = RLIMITS

    def problem(self) -> str | None:
        if shutil.which("bash") is None:
            return "bash is missing"
        if runs_as_root() and not toolchain_reachable():
            sysroot = find_toolchain().sysroot
            return (
                f"the toolchain at {sysroot} is not reachable by an unprivileged uid (a parent directory is private), "
                "and untrusted code is never run as root: install Rust where other users can read it "
                f"(e.g. RUSTUP_HOME=/usr/local/rustup), or point REWARD_SANDBOX_RUSTC at a readable copy (cp -al {sysroot} /opt/rust)"
            )
        return None

    def caveat(self) -> str | None:
        if not runs_as_root():
            return "not running as root: untrusted code runs as this user and can read this user's files"
        return None

    def protect_sources(self, job: JobDir, uid: int | None) -> None:
        """No mount namespace hides the job dir here: it belongs to the slot uid alone (0700), so no
        other job, running as another uid, can read these hidden tests while they compile."""
        if uid is None:
            return
        for path in [job.src, *job.src.rglob("*")]:
            os.chown(path, uid, uid)
            path.chmod(0o700 if path.is_dir() else 0o600)

    def after_job(self, uid: int | None) -> None:
        """Files the job wrote to the host's world-writable directories go with it."""
        if uid is None:
            return
        for base in SHARED_WRITABLE:
            _remove_owned_by(Path(base), uid)

    def between_runs(self, job: JobDir, uid: int | None) -> None:
        """The sources (the runs' working directory) become root's, so no run can write there, and the
        slot uid's files in the host's shared directories go (the job's own directory stays)."""
        if uid is None:
            return
        for path in [job.src, *job.src.rglob("*")]:
            if not path.is_symlink():
                os.chown(path, 0, 0)
                path.chmod(0o755 if path.is_dir() else 0o644)
        for base in SHARED_WRITABLE:
            _remove_owned_by(Path(base), uid, keep=job.root)

    def layout(self, job: JobDir, toolchain: Toolchain, memory: SlotMemory | None) -> Layout:
        return Layout(
            src=str(job.src),
            work=str(job.work),
            toolchain=str(toolchain.sysroot),
            runner=str(runner_path()),
            memory_cgroup=str(memory.procs) if memory is not None else None,
            crates=str(built.root) if (built := current_crates()) is not None else None,
        )

    def command(
        self, job: JobDir, toolchain: Toolchain, memory: SlotMemory | None, disk_mb: int
    ) -> tuple[list[str], dict[str, str]]:
        env = {
            "PATH": f"{toolchain.sysroot}/bin:/usr/bin:/bin",
            "HOME": str(job.work),
            "TMPDIR": str(job.work),
            "LANG": "C.UTF-8",
        }
        return ["/bin/bash", str(job.driver)], env


SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")


SANDBOX_CRATES = "/crates"


@functools.lru_cache(maxsize=1)
def sandbox_cargo_config() -> Path:
    """The source replacement the sandbox's cargo reads (the vendored set at ``SANDBOX_CRATES``): the
    same text for every job, so written once per process (atomically) rather than once per job."""
    from ..cachedir import default_cache_dir

    text = cargo_replacement(Path(SANDBOX_CRATES) / "vendor")
    target = default_cache_dir() / "bin" / "sandbox-cargo-config.toml"
    if not (target.is_file() and target.read_text() == text):
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_name(f".{target.name}.{os.getpid()}")
        staged.write_text(text)
        staged.chmod(0o644)
        os.replace(staged, target)
    return target


def crate_binds() -> list[str]:
    """The crate registry under /usr is hidden (an empty tmpfs over it); the built crate set, when
    this process made one ready, is bound read-only at ``SANDBOX_CRATES`` (wherever the cache lives
    on the host, even under ``/tmp``, it never meets the sandbox's work dir, and no host path shows)
    and a source replacement naming its vendored copy there at ``/.cargo/config.toml``, the cargo
    config every cargo run under ``/tmp`` finds first, so the cargo backend builds the same versions."""
    out = ["--tmpfs", str(REGISTRY)] if REGISTRY.is_dir() and REGISTRY.is_relative_to("/usr") else []
    built = current_crates()
    if built is not None:
        out += ["--ro-bind", str(built.root), SANDBOX_CRATES]
        out += ["--perms", "0755", "--dir", "/.cargo", "--ro-bind", str(sandbox_cargo_config()), "/.cargo/config.toml"]
    return out


def _remove_owned_by(base: Path, uid: int, keep: Path | None = None) -> None:
    """Delete everything under ``base`` that ``uid`` owns (without following links), except ``keep``."""
    if not base.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(base):
        if keep is not None:
            dirnames[:] = [d for d in dirnames if Path(dirpath) / d != keep]
        for name in [*filenames, *dirnames]:
            path = Path(dirpath) / name
            try:
                owned = path.lstat().st_uid == uid
            except OSError:
                continue
            if not owned:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
                dirnames[:] = [d for d in dirnames if d != name]
            else:
                with contextlib.suppress(OSError):
                    path.unlink()


@functools.lru_cache(maxsize=1)
def toolchain_reachable() -> bool:
    """Whether an unprivileged uid can run clippy-driver where it is installed. The probe runs as a
    uid leased for it alone: the runner kills every process of its uid afterwards, and a fixed uid
    (it was the first slot's) would kill the job another grader on this host is running as that uid
    (its compiler gone mid-build: "do not compile: unknown error"), or fail to fork under that
    uid's process limit and call the toolchain unreachable."""
    lease = UidLease(1)
    try:
        return _probe_toolchain(lease.uids[0])
    finally:
        lease.release()


def _probe_toolchain(uid: int) -> bool:
    clippy = str(find_toolchain().clippy_driver)
    probe = [
        str(runner_path()),
        "2",
        "probe",
        str(uid),
        "512",
        "5",
        "8",
        "1",
        "64",
        "8",
        "-",
        "--",
        "test",
        "-x",
        clippy,
    ]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


@functools.lru_cache(maxsize=1)
def _bwrap_problem() -> str | None:
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    probe = Path("/tmp") if Path("/tmp").is_dir() else Path.cwd()
    toolchain = find_toolchain()
    argv = [
        shutil.which("bwrap") or "bwrap",
        *_BWRAP_BASE,
        "--ro-bind",
        str(toolchain.sysroot),
        "/toolchain",
        "--ro-bind",
        str(probe),
        "/src",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--",
        "/bin/true",
    ]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap did not run: {exc}"
    if proc.returncode != 0:
        return f"bubblewrap is refused here: {proc.stderr.strip() or f'exit {proc.returncode}'}"
    return None


def bwrap_problem() -> str | None:
    """None when bubblewrap works here; else why not."""
    return _bwrap_problem()


def choose_level(requested: str) -> tuple[Isolation, str | None]:
    """Resolve ``auto``/``strict``/``bwrap``/``rlimits`` into a level and an optional warning."""
    if requested not in (*CHOICES, BWRAP):
        raise ValueError(f"isolation must be one of {', '.join(CHOICES)}, got {requested!r}")
    if requested == RLIMITS:
        level: Isolation = RlimitsOnly()
        problem = level.problem()
        if problem:
            raise IsolationUnavailable(f"rlimits isolation cannot run here: {problem}")
        return level, level.caveat()
    bwrap = Bubblewrap()
    problem = bwrap.problem()
    if problem is None:
        return bwrap, None
    if requested in (STRICT, BWRAP):
        raise IsolationUnavailable(f"strict isolation requested but {problem}")
    fallback = RlimitsOnly()
    fallback_problem = fallback.problem()
    if fallback_problem:
        raise IsolationUnavailable(f"no isolation level works here: {problem}; and {fallback_problem}")
    warning = f"falling back to rlimits-only isolation (no network or filesystem namespace): {problem}"
    caveat = fallback.caveat()
    return fallback, warning + (f"; {caveat}" if caveat else "")
