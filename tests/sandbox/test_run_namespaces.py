"""Each test run has kernel state of its own (``runner.c``: RG_FRESH_NS): the programs of a batch
share a build, never a pid counter, a tmpfs or machine-wide /proc counters (nor System V IPC, which
safe code cannot reach: FFI jobs are never batched), so no
member can leave a signal for a later one (colluding copies of a wrong program). And no host path
shows inside the sandbox: not on ``/proc/1/cmdline`` (bubblewrap reads its options from a pipe),
nor on the compiler's command line (the crate set is at ``/crates``).

Every channel is tried the same way: each member of a batch first reads the state an earlier member
would have written, then writes it; the hidden test asserts it read nothing. Batched and alone, the
verdicts must be the same: all pass."""

from __future__ import annotations

import os
import subprocess

import pytest

from reward_sandbox import Grader, Status
from reward_sandbox.cache import ResultCache

from ..conftest import TEST_LIMITS, needs_bwrap
from .batch.test_batched import was_batched

pytestmark = needs_bwrap

# Each channel: (program, hidden test). The program's `probe()` says whether an earlier run left
# anything, then leaves something itself.
CHANNELS: dict[str, tuple[str, str]] = {
    # pids count up in a shared namespace: 64 threads move the next pid far ahead for a later run
    "pid counter": (
        "pub fn probe() -> u32 {\n"
        "    let me = std::process::id();\n"
        "    for _ in 0..64 {\n        std::thread::spawn(|| ()).join().unwrap();\n    }\n"
        "    me\n}\n",
        '#[test]\nfn fresh() {\n    assert!(probe() < 8, "pid {}", probe());\n}\n',
    ),
    # a shared tmpfs hands out inode numbers in order, whatever the driver deletes between runs
    "tmpfs inode counter": (
        "use std::os::unix::fs::MetadataExt;\n"
        "pub fn probe() -> u64 {\n"
        '    let dir = std::env::temp_dir().join("probe");\n'
        "    std::fs::create_dir_all(&dir).unwrap();\n"
        "    let first = std::fs::metadata(&dir).unwrap().ino();\n"
        "    for i in 0..200 {\n"
        '        std::fs::write(dir.join(i.to_string()), "x").unwrap();\n'
        "    }\n"
        "    first\n}\n",
        "#[test]\nfn fresh() {\n    assert!(probe() < 100);\n}\n",
    ),
    # machine-wide counters (forks since boot, the last pid): a run sees no /proc at all
    "machine-wide /proc": (
        "pub fn probe() -> bool {\n"
        '    ["/proc/stat", "/proc/loadavg", "/proc/sys/kernel/ns_last_pid", "/proc/vmstat"]\n'
        "        .iter()\n"
        "        .any(|p| std::fs::read_to_string(p).is_ok())\n}\n",
        "#[test]\nfn fresh() {\n    assert!(!probe());\n}\n",
    ),
}


@pytest.fixture(scope="module")
def batched() -> Grader:
    with Grader(workers=1, limits=TEST_LIMITS, cache=ResultCache()) as g:
        yield g


@pytest.fixture(scope="module")
def single() -> Grader:
    with Grader(workers=1, limits=TEST_LIMITS, cache=ResultCache(), batch=False) as g:
        yield g


def _members(program: str, tests: str) -> list[dict]:  # type: ignore[type-arg]
    # copies told apart by a comment: one batch (same tests), distinct cache keys
    return [{"id": f"m{i}", "source": f"// copy {i}\n{program}", "tests": tests} for i in range(3)]


@pytest.mark.parametrize("channel", list(CHANNELS))
def test_no_run_reads_what_an_earlier_member_left(batched, single, channel):
    program, tests = CHANNELS[channel]
    together = batched.grade(_members(program, tests))
    assert all(was_batched(r) for r in together)
    alone = single.grade(_members(program, tests))
    for results in (together, alone):
        assert [r.status for r in results] == [Status.OK] * 3, [(r.reason, r.output_tail[-400:]) for r in results]


def test_the_sandbox_shows_no_host_path(batched, tmp_path):
    """bubblewrap's own command line (``/proc/1/cmdline`` of the sandbox, seen at compile time) and
    the compiler's (the crate set's flags) name only sandbox paths; at run time /proc/1 is the run's
    own init."""
    from reward_sandbox.cachedir import default_cache_dir

    host_marks = [str(default_cache_dir()), "/root", "/home", "rustup", str(tmp_path.parent)]
    program = (
        "use regex::Regex;\n"
        'pub const BWRAP: &str = include_str!("/proc/1/cmdline");\n'
        'pub const RUSTC: &str = include_str!("/proc/self/cmdline");\n'
        "pub fn run_time() -> String {\n"
        '    std::fs::read_to_string("/proc/1/cmdline").unwrap_or_default()\n}\n'
        'pub fn ok() -> bool {\n    Regex::new("a").is_ok()\n}\n'
    )
    tests = (
        "#[test]\nfn shown() {\n    assert!(ok());\n"
        '    for text in [BWRAP, RUSTC, &run_time()] {\n        println!("SEEN {}", text.replace(\'\\0\', " "));\n    }\n'
        '    panic!("show");\n}\n'
    )
    (result,) = batched.grade([{"id": "paths", "source": program, "tests": tests}])
    seen = result.output_tail
    assert "SEEN" in seen and "/crates/lib" in seen, seen[-2000:]
    for mark in host_marks:
        assert mark not in seen, (mark, seen[-2000:])


@pytest.mark.skipif(os.geteuid() != 0, reason="the root side exists only when grading as root")
def test_the_root_side_keeps_only_the_capabilities_it_uses():
    """bubblewrap leaves the bounding set whole and a root exec gets it back as its capabilities:
    rg-run drops all but the ones it uses, for itself and whatever it starts (a run's init too).
    Here rg-run starts `cat` keeping root's uid (UID -1), which shows what survives an exec."""
    from reward_sandbox.isolation.runner import runner_path

    report_r, report_w = os.pipe()
    argv = [str(runner_path()), str(report_w), "caps", "-1", "512", "5", "16", "8", "64", "8", "-"]
    proc = subprocess.run(
        [*argv, "--", "cat", "/proc/self/status"], capture_output=True, text=True, pass_fds=(report_w,), check=False
    )
    os.close(report_w)
    os.close(report_r)
    assert proc.returncode == 0, proc.stderr
    caps = dict(line.split(":\t", 1) for line in proc.stdout.splitlines() if line.startswith("Cap"))
    used = {0, 1, 3, 5, 6, 7, 21}  # chown, dac_override, fowner, kill, setgid, setuid, sys_admin
    assert int(caps["CapBnd"], 16) == sum(1 << c for c in used), caps
    assert int(caps["CapEff"], 16) & ~sum(1 << c for c in used) == 0, caps
