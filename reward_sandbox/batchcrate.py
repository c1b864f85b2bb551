"""Lay out several jobs that share their tests as one crate: each program is a module of its own.

Every program is assembled exactly as when it is graded alone (``assemble.py``: its own random
tag, hidden-test module, sentinel and nonce), in a directory named by its tag, and the batch's
root (itself under a random name, so no program can ``include_str!`` it) declares it as
``pub mod {tag}_m``. libtest runs tests sorted by name, one at a time, so each program's tests
form one contiguous stretch of the run. Between two stretches sits a *gate*, a test of ours that
sorts just before the next program (``{tag}_g``): it resets the panic hook, flushes stdout, and
fails unless the process is as a fresh one would be: no thread left running, the same
environment, working directory and open files, no file created or changed under ``/tmp`` or
``/dev/shm``, and no more than a little memory kept. A program counts from the batch only when
the gates on both sides of its stretch passed: before it nothing of its neighbours ran on, and
after it nothing of its own did. A baseline test that sorts first records the fresh state; a last
gate, under a name only the binary knows, closes the run.

Every hidden module ends in the batch's secret marker ``_rg{secret}_hidden``, so one filter,
``rg{secret}_hidden::``, selects the hidden run and ``--skip`` of it the own run, without naming any
program's tag on the command line; the filter has the shape and length of a single run's own
(``{tag}_hidden::``), so a program's command line looks as it does alone.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from .assemble import Assembly, assemble
from .jobs import Job

RSS_SLACK_KB = 64 * 1024  # memory a gate lets a previous program keep (allocator caches)
VM_SLACK_KB = 32 * 1024  # address space it may keep: reserved, untouched memory counts against RLIMIT_AS

GATE_RS = """\
#![allow(warnings, clippy::all)]
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

type Files = Vec<(PathBuf, u64, Option<SystemTime>)>;

struct Snapshot {
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    cwd: Option<PathBuf>,
    fds: usize,
    threads: usize,
    files: Files,
    rss_kb: u64,
    vm_kb: u64,
}

static BASE: Mutex<Option<Snapshot>> = Mutex::new(None);

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(usize::MAX)
}

fn walk(dir: &Path, out: &mut Files) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(_) => return,
    };
    for entry in entries.flatten() {
        if out.len() > 10_000 {
            out.push((PathBuf::new(), u64::MAX, None));
            return;
        }
        let path = entry.path();
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            out.push((path.clone(), meta.len(), meta.modified().ok()));
            if meta.is_dir() {
                walk(&path, out);
            }
        }
    }
}

fn status_kb(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap_or("");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(u64::MAX)
}

fn snapshot() -> Snapshot {
    let mut files = Vec::new();
    for root in ["/tmp", "/dev/shm", "/var/tmp"] {
        walk(Path::new(root), &mut files);
    }
    files.sort();
    let mut env: Vec<_> = std::env::vars_os().collect();
    env.sort();
    Snapshot {
        env,
        cwd: std::env::current_dir().ok(),
        fds: count("/proc/self/fd"),
        threads: count("/proc/self/task"),
        files,
        rss_kb: status_kb("VmRSS:"),
        vm_kb: status_kb("VmSize:"),
    }
}

pub fn base() {
    use std::hash::{Hash, Hasher};
    drop(std::panic::take_hook());
    let snap = snapshot();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    snap.files.hash(&mut hasher);
    let mut out = std::io::stdout();
    let _ = out.write_all(format!("\nRG_BASE_{:016x}\n", hasher.finish()).as_bytes());
    let _ = out.flush();
    *BASE.lock().unwrap_or_else(|e| e.into_inner()) = Some(snap);
}

pub fn gate() {
    drop(std::panic::take_hook());
    let mut out = std::io::stdout();
    let _ = out.write_all(b"\\n");
    let _ = out.flush();
    let guard = BASE.lock().unwrap_or_else(|e| e.into_inner());
    let base = guard.as_ref().expect("no baseline");
    let deadline = Instant::now() + Duration::from_millis(2000);
    while count("/proc/self/task") > base.threads {
        assert!(Instant::now() < deadline, "a thread is still running");
        std::thread::sleep(Duration::from_millis(1));
    }
    let now = snapshot();
    assert!(now.threads == base.threads, "threads changed");
    assert!(now.env == base.env, "the environment changed");
    assert!(now.cwd == base.cwd, "the working directory changed");
    assert!(now.fds == base.fds, "files left open");
    assert!(now.files == base.files, "files changed");
    assert!(now.rss_kb <= base.rss_kb.saturating_add(RSS_SLACK_KB), "memory kept");
    assert!(now.vm_kb <= base.vm_kb.saturating_add(VM_SLACK_KB), "address space kept");
}
"""


@dataclass(frozen=True)
class Member:
    """One program of a batch: its single-grading assembly, written under ``{tag}/``."""

    job: Job
    asm: Assembly

    @property
    def tag(self) -> str:
        return self.asm.tag

    @property
    def module(self) -> str:
        return f"{self.asm.tag}_m"


@dataclass(frozen=True)
class BatchCrate:
    files: dict[str, str]  # relative to the sources directory
    root: str  # the crate root's file name
    members: tuple[Member, ...]  # sorted by tag: the order their tests run in
    secret: str
    final: str  # the last gate's module (hidden run: + marker)

    @property
    def marker(self) -> str:
        """Ends every module of the hidden run (the programs' hidden tests, its gates)."""
        return f"_rg{self.secret}_hidden"

    @property
    def filter(self) -> str:
        """In every hidden-run test name, in no own-run test name."""
        return f"rg{self.secret}_hidden::"

    def gate(self, index: int, hidden: bool) -> str:
        """The gate just before member ``index`` (``len(members)``: the last gate)."""
        name = self.final if index == len(self.members) else f"{self.members[index].tag}_g"
        return f"{name}{self.marker if hidden else ''}::gate"

    def base(self, hidden: bool) -> str:
        return f"a{self.marker if hidden else self.secret}::base"


def _test_module(name: str, gates: str, call: str) -> str:
    return f"#[cfg(test)] #[allow(warnings)] mod {name} {{ #[test] fn {call}() {{ super::{gates}::{call}() }} }}\n"


def build_batch(jobs: list[Job], work_dir: str) -> BatchCrate:
    """The batch's files: each program as alone, under its tag, plus the root and the gates."""
    secret = secrets.token_hex(8)
    marker = f"_rg{secret}_hidden"
    hidden_tail = secrets.token_hex(8)
    gates, final = f"rg{hidden_tail}_gates", f"zzzz{hidden_tail}"
    members = sorted((Member(job, assemble(job, work_dir, marker=marker)) for job in jobs), key=lambda m: m.tag)
    root = f"rg{hidden_tail}.rs"
    files: dict[str, str] = {
        f"rg{hidden_tail}_gates.rs": GATE_RS.replace("RSS_SLACK_KB", str(RSS_SLACK_KB)).replace(
            "VM_SLACK_KB", str(VM_SLACK_KB)
        )
    }
    lines = [f'#[cfg(test)] #[path = "rg{hidden_tail}_gates.rs"] mod {gates};\n']
    lines += [_test_module(f"a{marker}", gates, "base"), _test_module(f"a{secret}", gates, "base")]
    for member in members:
        for name, text in member.asm.files.items():
            if name != member.asm.hidden_root:
                files[f"{member.tag}/{name}"] = text
        lines.append(f'#[path = "{member.tag}/{member.asm.lib_path}"] pub mod {member.module};\n')
        lines += [
            _test_module(f"{member.tag}_g{marker}", gates, "gate"),
            _test_module(f"{member.tag}_g", gates, "gate"),
        ]
    lines += [_test_module(f"{final}{marker}", gates, "gate"), _test_module(final, gates, "gate")]
    files[root] = "".join(lines)
    return BatchCrate(files=files, root=root, members=tuple(members), secret=secret, final=final)
