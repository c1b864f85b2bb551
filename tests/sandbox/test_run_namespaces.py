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
        "    let hs: Vec<_> = (0..64).map(|_| std::thread::spawn(|| ())).collect();\n"
        "    for h in hs {\n        h.join().unwrap();\n    }\n"
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
    # machine-wide counters (forks since boot, the last pid) are not shown at all
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
    from reward_sandbox.cache import default_cache_dir

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
