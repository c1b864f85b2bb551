"""One test per sandbox guarantee: hostile programs are contained and get the right status.

Each program is real Rust run through the real sandbox (bubblewrap); the host is checked
afterwards for what must not have happened.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from reward_sandbox import Limits, Status
from reward_sandbox.isolation.slots import UID_BASE, UID_COUNT

from ..conftest import TEST_LIMITS, grade_one

pytestmark = [pytest.mark.cargo, pytest.mark.bwrap]


def attack_job(body: str, prelude: str = "") -> dict:
    """A job whose single own test runs ``body``."""
    source = f"{prelude}\npub fn noop() {{}}\n\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn attack() {{\n{body}\n    }}\n}}\n"
    return {"source": source}


def sandbox_processes(grader=None) -> list[str]:
    """Processes on the host owned by the grader's sandbox uids (any grader's by default: other
    graders, in other test processes, may be running), or carrying our markers."""
    uids = set(grader.uids) if grader is not None else set(range(UID_BASE, UID_BASE + UID_COUNT))
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        uid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:")))
        if uid in uids or "301.5" in cmdline:
            found.append(f"{pid} uid={uid} {cmdline}")
    return found


def test_infinite_loop_times_out(strict_grader):
    start = time.monotonic()
    r = grade_one(strict_grader, **attack_job("loop { std::hint::black_box(0); }"), timeout_s=1.5)
    assert r.status is Status.TIMEOUT
    assert r.build.ok and not r.tests.ok
    assert time.monotonic() - start < 20
    assert sandbox_processes(strict_grader) == []


def test_process_count_is_bounded(strict_grader):
    body = """
        let mut spawned = 0;
        for _ in 0..5000 {
            match std::process::Command::new("/bin/sleep").arg("301.5").spawn() {
                Ok(child) => { spawned += 1; std::mem::forget(child); }
                Err(_) => break,
            }
        }
        assert!(spawned < 64, "spawned {spawned} processes");
    """
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.OK, (r.reason, r.output_tail)
    assert sandbox_processes(strict_grader) == []


def test_shell_fork_bomb_is_contained(strict_grader):
    body = 'let _ = std::process::Command::new("/bin/sh").arg("-c").arg("b(){ b|b& }; b; sleep 301.5").status();'
    r = grade_one(strict_grader, **attack_job(body), timeout_s=3)
    assert r.status in (Status.OK, Status.TIMEOUT, Status.TEST_FAILURE)
    assert sandbox_processes(strict_grader) == []


def test_memory_bomb_hits_the_memory_limit(strict_grader):
    r = grade_one(strict_grader, **attack_job("let v = vec![1u8; 3 << 30];\n assert!(v[12345] == 1);"))
    assert r.status is Status.MEMORY_LIMIT, (r.reason, r.output_tail)


def test_no_network_even_to_a_local_listener(strict_grader):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    connections: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connections.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    body = f'assert!(std::net::TcpStream::connect("127.0.0.1:{port}").is_err(), "connected to the host");'
    try:
        r = grade_one(strict_grader, **attack_job(body))
    finally:
        stop.set()
        thread.join()
        server.close()
    assert connections == []
    assert r.status is Status.OK, r.output_tail


def test_host_files_cannot_be_read_at_run_time_or_compile_time(strict_grader, tmp_path):
    secret = Path("/tmp") / f"rg-secret-{uuid.uuid4().hex}"
    secret.write_text("hunter2")
    try:
        body = f'assert!(std::fs::read_to_string("{secret}").is_err());\nassert!(std::fs::read_to_string("/etc/passwd").is_err());'
        assert grade_one(strict_grader, **attack_job(body)).status is Status.OK
        r = grade_one(strict_grader, source=f'pub const S: &str = include_str!("{secret}");')
        assert r.status is Status.COMPILE_ERROR
        assert "hunter2" not in r.output_tail
    finally:
        secret.unlink()


def test_host_files_cannot_be_written(strict_grader):
    target = Path("/tmp") / f"rg-written-{uuid.uuid4().hex}"
    body = f'let _ = std::fs::write("{target}", "pwned");\nlet _ = std::fs::write("/usr/rg-pwned", "x");'
    grade_one(strict_grader, **attack_job(body))
    assert not target.exists()
    assert not Path("/usr/rg-pwned").exists()


def test_huge_output_is_cut_off(strict_grader):
    body = "use std::io::Write;\nlet line = [b'x'; 4096];\nloop { std::io::stdout().write_all(&line).unwrap(); }"
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.OUTPUT_LIMIT
    assert len(r.output_tail) <= 2000


def test_big_files_are_capped(strict_grader):
    body = 'let data = vec![0u8; 1 << 20];\nfor i in 0..400 { std::fs::write(format!("/tmp/f{i}"), &data).unwrap(); }'
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.TEST_FAILURE  # the tmpfs fills up (ENOSPC): the write fails inside the sandbox


def test_tests_cannot_start_processes_so_none_outlives_its_job(strict_grader):
    """Test runs may start threads, not processes (seccomp): a test that could start its own binary
    again could run the sentinel alone and read the nonce. Whatever a step leaves is killed anyway."""
    body = """
        let spawned = std::process::Command::new("/bin/sh").arg("-c").arg("(setsid sleep 301.5 &) ; sleep 301.5 &").status();
        assert!(spawned.is_err(), "started a process: {spawned:?}");
        std::thread::spawn(|| ()).join().unwrap();  // threads are fine
    """
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.OK, (r.reason, r.output_tail)
    time.sleep(0.2)
    assert sandbox_processes(strict_grader) == []


def test_host_environment_does_not_leak(strict_grader, monkeypatch):
    monkeypatch.setenv("RG_SECRET_TOKEN", "hunter2")
    body = 'assert!(std::env::var("RG_SECRET_TOKEN").is_err());\nassert!(std::env::vars().count() < 12, "{:?}", std::env::vars().collect::<Vec<_>>());'
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.OK, r.output_tail
    r = grade_one(strict_grader, source='pub const T: &str = env!("RG_SECRET_TOKEN");')
    assert r.status is Status.COMPILE_ERROR


def test_stack_overflow_is_a_test_failure(strict_grader):
    prelude = "pub fn depth(n: u64) -> u64 { if n == 0 { 0 } else { 1 + depth(std::hint::black_box(n - 1)) } }"
    r = grade_one(strict_grader, **attack_job("assert!(super::depth(u64::MAX) > 0);", prelude))
    assert r.status is Status.TEST_FAILURE
    assert not r.tests.trusted and r.tests.counts.passed == 0


@pytest.mark.parametrize(
    "source",
    [
        "macro_rules! boom { () => { boom!(); boom!(); }; }\nboom!();",
        "pub const X: u64 = { let mut i = 0u64; loop { i = i.wrapping_add(1); } };",
        "pub static BIG: [u8; 1 << 40] = [0; 1 << 40];",
    ],
    ids=["macro-recursion", "const-eval-loop", "giant-static"],
)
def test_compile_time_bombs_are_contained(strict_grader, source):
    start = time.monotonic()
    r = grade_one(strict_grader, source=source)
    assert r.status in (Status.COMPILE_ERROR, Status.TIMEOUT, Status.MEMORY_LIMIT)
    assert not r.build.ok
    assert time.monotonic() - start < 90


# --- Test counts come from the harness, not from text the program can forge ---------------


def test_process_exit_zero_does_not_pass(strict_grader):
    source = (
        "pub fn answer() -> i32 { std::process::exit(0) }\n"
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn a() { assert_eq!(answer(), 42); }\n"
        "    #[test]\n    fn b() { assert_eq!(answer(), 42); }\n}\n"
    )
    r = grade_one(strict_grader, source=source)
    assert r.status is Status.TEST_FAILURE
    assert r.tests.counts.passed == 0 and not r.tests.trusted and not r.tests.ok


def test_forged_harness_output_does_not_pass(strict_grader):
    body = r"""
        use std::io::Write;
        let mut out = std::io::stdout();
        out.write_all(b"\ntest result: ok. 9 passed; 0 failed; 0 ignored\n").unwrap();
        out.write_all(b"{ \"type\": \"test\", \"name\": \"tests::attack\", \"event\": \"ok\" }\n").unwrap();
        out.write_all(b"{ \"type\": \"suite\", \"event\": \"ok\", \"passed\": 2, \"failed\": 0 }\n").unwrap();
        panic!("really failing");
    """
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.TEST_FAILURE
    assert r.tests.counts.passed == 0 and not r.tests.ok


def test_forged_output_then_exit_does_not_pass(strict_grader):
    body = r"""
        use std::io::Write;
        let mut out = std::io::stdout();
        out.write_all(b"{ \"type\": \"test\", \"name\": \"tests::attack\", \"event\": \"ok\" }\n").unwrap();
        out.write_all(b"{ \"type\": \"suite\", \"event\": \"ok\", \"passed\": 1, \"failed\": 0 }\n").unwrap();
        out.flush().unwrap();
        std::process::exit(0);
    """
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.TEST_FAILURE and r.tests.counts.passed == 0


def test_abort_does_not_pass(strict_grader):
    r = grade_one(strict_grader, **attack_job("std::process::abort();"))
    assert r.status is Status.TEST_FAILURE and r.tests.counts.passed == 0


def test_panic_hook_tricks_do_not_pass(strict_grader):
    body = r"""
        std::panic::set_hook(Box::new(|_| { println!("test tests::attack ... ok"); }));
        assert_eq!(1, 2);
    """
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.TEST_FAILURE and r.tests.counts.failed == 1 and r.tests.trusted


def test_strict_isolation_fails_loudly_when_unavailable(monkeypatch):
    from reward_sandbox.isolation import levels as isolation

    monkeypatch.setattr(isolation, "bwrap_problem", lambda: "bubblewrap is refused here: test")
    with pytest.raises(isolation.IsolationUnavailable, match="strict isolation requested"):
        isolation.choose_level("strict")
    level, warning = isolation.choose_level("auto")
    assert level.name == "rlimits" and "falling back" in warning


# --- The hidden tests are out of the program's reach (one test per way in) ------------------

HIDDEN = "#[test]\nfn h1() { assert_eq!(answer(2), 4); }\n#[test]\nfn h2() { assert!(answer(3) == 6); }\n"
WRONG = "pub fn answer(_x: i32) -> i32 { 0 }\n"
RIGHT = "pub fn answer(x: i32) -> i32 { x * 2 }\n"


def assert_no_hidden_pass(r) -> None:
    assert r.status is not Status.OK, (r.reason, r.output_tail)
    assert r.tests.hidden.passed == 0 and not r.tests.hidden.ok


@pytest.mark.parametrize("mode", ["unit", "main"])
@pytest.mark.parametrize(
    "tail",
    [
        "#[cfg(not(test))]",
        "#[cfg(any())]",
        "#[cfg(not(test))]\n#[cfg(test)]\nmod rg_hidden {\n    #[test]\n    fn h1() {}\n    #[test]\n    fn h2() {}\n}",
    ],
    ids=["cfg-not-test", "cfg-any", "replacement-module"],
)
def test_a_trailing_attribute_cannot_remove_or_replace_the_hidden_tests(strict_grader, mode, tail):
    tests = HIDDEN if mode == "unit" else "fn main() {\n    assert_eq!(answer(2), 4);\n}\n"
    assert_no_hidden_pass(grade_one(strict_grader, source=WRONG + tail, tests=tests, test_mode=mode))


def test_an_inner_cfg_that_empties_the_crate_is_not_a_pass(strict_grader):
    assert_no_hidden_pass(grade_one(strict_grader, source="#![cfg(not(test))]\n" + WRONG, tests=HIDDEN))


@pytest.mark.parametrize(
    "hijack",
    [
        "#[macro_export]\nmacro_rules! assert_eq { ($($t:tt)*) => {} }\n#[macro_export]\nmacro_rules! assert { ($($t:tt)*) => {} }\n",
        "macro_rules! r#assert_eq { ($($t:tt)*) => {} }\nmacro_rules! r#assert { ($($t:tt)*) => {} }\n",
        "pub use core::column as assert_eq;\n",
    ],
    ids=["macro-export", "raw-identifier", "reexport"],
)
@pytest.mark.parametrize("mode", ["unit", "integration"])
def test_assertion_macros_cannot_be_redefined_for_the_hidden_tests(strict_grader, hijack, mode):
    tests = HIDDEN if mode == "unit" else "use solution::*;\n" + HIDDEN
    r = grade_one(strict_grader, source=hijack + WRONG, tests=tests, test_mode=mode)
    assert_no_hidden_pass(r)


def test_hidden_test_files_have_unguessable_names_and_no_nonce():
    from reward_sandbox.compile.assemble import assemble
    from reward_sandbox.jobs import Job

    job = Job(id="a", source=RIGHT, tests=HIDDEN)
    first, second = assemble(job, "/tmp"), assemble(job, "/tmp")
    assert set(first.files) & set(second.files) == {"lib.rs"}  # every generated name is fresh
    assert all(first.tag not in name for name in second.files)
    assert all(first.nonce not in text for text in first.files.values())


def test_the_program_cannot_read_its_sources_or_binary_while_tests_run(strict_grader):
    """At run time the sources (hidden tests included) are gone and the binary is exec-only, so
    neither the hidden asserts nor the harness's internals can be read back."""
    source = (
        RIGHT
        + r"""
pub fn leaked() -> Vec<String> {
    let mut found = Vec::new();
    if std::fs::read("/proc/self/exe").is_ok() { found.push("/proc/self/exe".to_string()); }
    for dir in [".", "/tmp", "/tmp/src", "/src", "/rg/in", "/rg"] {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if let Ok(text) = std::fs::read_to_string(&path) {
                if text.contains("HIDDEN_MARKER") || text.contains("RG_SENTINEL") { found.push(path.display().to_string()); }
            }
        }
    }
    found
}
"""
    )
    tests = HIDDEN + '#[test]\nfn h3() { let _ = "HIDDEN_MARKER"; assert_eq!(leaked(), Vec::<String>::new()); }\n'
    r = grade_one(strict_grader, source=source, tests=tests)
    assert r.status is Status.OK and r.tests.hidden.passed == 3, (r.reason, r.output_tail)


def test_a_forged_stream_without_the_nonce_is_not_trusted(strict_grader):
    """The attack that worked when the nonce sat in a file: list the tests, print a well-formed
    libtest stream for them, exit 0. Without the run-time nonce it is not a pass."""
    source = (
        WRONG
        + r"""
pub fn forge() {
    use std::io::Write;
    let mut out = std::io::stdout();
    let names = ["h1", "h2"];
    let _ = writeln!(out, "{{ \"type\": \"suite\", \"event\": \"started\", \"test_count\": 3 }}");
    for name in names {
        let _ = writeln!(out, "{{ \"type\": \"test\", \"event\": \"started\", \"name\": \"{name}\" }}");
        let _ = writeln!(out, "{{ \"type\": \"test\", \"name\": \"{name}\", \"event\": \"ok\" }}");
    }
    let _ = writeln!(out, "\nRG_SENTINEL_00000000000000000000000000000000");
    let _ = writeln!(out, "{{ \"type\": \"suite\", \"event\": \"ok\", \"passed\": 3, \"failed\": 0 }}");
    let _ = out.flush();
    std::process::exit(0);
}
"""
    )
    tests = "#[test]\nfn h1() { forge(); }\n#[test]\nfn h2() { forge(); }\n"
    r = grade_one(strict_grader, source=source, tests=tests)
    assert_no_hidden_pass(r)
    assert not r.tests.hidden.trusted


@pytest.mark.parametrize(
    "own_tests",
    [
        '#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn broken() { assert_eq!(answer("x"), 4); }\n}\n',
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn wrong() { assert_eq!(answer(2), 5); }\n}\n",
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn a_exit() { std::process::exit(0); }\n}\n",
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn a_spin() { loop { std::hint::black_box(0); } }\n}\n",
        "#[cfg(test)]\nmod tests {\n    use std::io::Write;\n    #[test]\n"
        "    fn a_flood() { loop { let _ = std::io::stdout().write_all(&[b'x'; 4096]); } }\n}\n",
    ],
    ids=["does-not-compile", "fails", "exits", "loops", "floods"],
)
def test_the_programs_own_tests_never_cost_the_hidden_verdict(strict_grader, own_tests):
    r = grade_one(strict_grader, source=RIGHT + own_tests, tests=HIDDEN, timeout_s=1.5)
    assert r.tests.hidden.ok and r.tests.hidden.passed == 2, (r.reason, r.output_tail)
    assert not r.tests.own.ok and r.status is not Status.OK


def test_a_run_with_fewer_hidden_tests_than_the_job_holds_is_never_ok():
    from reward_sandbox.compile.testlog import parse_test_log

    events = [
        '{ "type": "suite", "event": "started", "test_count": 2 }',
        '{ "type": "test", "event": "started", "name": "h1" }',
        '{ "type": "test", "name": "h1", "event": "ok" }',
        '{ "type": "test", "event": "started", "name": "z::done" }',
        "RG_SENTINEL_n",
        '{ "type": "test", "name": "z::done", "event": "ok" }',
        '{ "type": "suite", "event": "ok", "passed": 2, "failed": 0, "ignored": 0, "measured": 0, "filtered_out": 0 }',
    ]
    report, _ = parse_test_log("\n".join(events).encode(), "n", 0, "z::done", expected=2)
    assert report.trusted and report.passed == 1 and not report.ok
    report, _ = parse_test_log("\n".join(events).encode(), "n", 0, "z::done", expected=1)
    assert report.ok


# --- Resources are bounded per job; faults are the sandbox's, never the program's ------------


def test_memory_is_limited_for_the_job_as_a_whole(strict_grader):
    """Files in the job's tmpfs and the test process's heap share one limit: 250 MB of files (five,
    each under the file-size limit) and a 400 MB vector each fit their own limit (disk, RLIMIT_AS),
    together they must not pass 512 MB."""
    body = """
        for i in 0..5 {
            std::fs::write(format!("/tmp/big{i}"), vec![1u8; 50 << 20]).unwrap();
        }
        let v = vec![7u8; 400 << 20];
        assert!(v.iter().step_by(4096).all(|&b| b == 7));
    """
    r = grade_one(strict_grader, **attack_job(body), timeout_s=8)
    assert r.status in (Status.MEMORY_LIMIT, Status.TEST_FAILURE), (r.reason, r.output_tail)
    assert r.measures["run_peak_mb"] <= TEST_LIMITS.run_memory_mb + 1


def test_inode_bombs_are_bounded_by_the_job_memory(tmp_path):
    from reward_sandbox import Grader
    from reward_sandbox.cache import ResultCache

    limits = Limits(run_memory_mb=64, run_wall_s=20, run_cpu_s=10, disk_mb=256)
    body = 'for i in 0..2_000_000u32 { if std::fs::File::create(format!("/tmp/f{i}")).is_err() { break; } }'
    with Grader(workers=1, isolation="strict", limits=limits, cache=ResultCache()) as g:
        r = grade_one(g, **attack_job(body))
        assert sandbox_processes(g) == []
    assert r.measures["run_peak_mb"] <= 65, r.measures


def test_a_killed_sandbox_is_a_sandbox_error_and_is_not_cached(strict_grader):
    import signal as signals
    import subprocess

    job = attack_job("std::thread::sleep(std::time::Duration::from_secs(3));")
    job["source"] += "\n// unique: " + uuid.uuid4().hex

    def kill_bwrap() -> None:
        time.sleep(1.5)
        # only this test process's own sandboxes: other graders on the host are none of its business
        pids = subprocess.run(
            ["pgrep", "-x", "-P", str(os.getpid()), "bwrap"], capture_output=True, text=True
        ).stdout.split()
        for pid in pids:
            os.kill(int(pid), signals.SIGKILL)

    killer = threading.Thread(target=kill_bwrap)
    killer.start()
    first = grade_one(strict_grader, **job)
    killer.join()
    assert first.status is Status.SANDBOX_ERROR, (first.status, first.reason)
    again = grade_one(strict_grader, **job)
    assert again.status is Status.OK and not again.cached


def test_timeouts_are_cached_with_their_limits(strict_grader):
    job = attack_job("loop { std::hint::black_box(0); }")
    job["source"] += "\n// unique: " + uuid.uuid4().hex
    first = grade_one(strict_grader, **job, timeout_s=1)
    assert first.status is Status.TIMEOUT
    assert grade_one(strict_grader, **job, timeout_s=1).cached
    assert not grade_one(strict_grader, **job, timeout_s=1.2).cached  # other limits, other verdict


def test_exit_152_is_not_a_cpu_timeout_and_results_carry_measurements(strict_grader):
    r = grade_one(strict_grader, **attack_job("std::process::exit(152);"))
    assert r.status is Status.TEST_FAILURE
    run = r.measures["steps"]["run_own"]
    assert run["exit_code"] == 152 and run["signal"] == 0 and run["cpu_s"] < 1
    assert {"cpu_s", "wall_s", "max_rss_mb"} <= set(run) and r.measures["run_peak_mb"] > 0


def test_wall_time_is_longer_than_cpu_time(strict_grader):
    r = grade_one(
        strict_grader, **attack_job("std::thread::sleep(std::time::Duration::from_millis(2500));"), timeout_s=2
    )
    assert r.status is Status.OK, (r.reason, r.output_tail)
    r = grade_one(strict_grader, **attack_job("std::thread::sleep(std::time::Duration::from_secs(60));"), timeout_s=1)
    assert r.status is Status.TIMEOUT and "wall-clock" in r.reason


@pytest.mark.skipif(os.geteuid() != 0, reason="the runner switches uids as root")
def test_every_step_is_confined_no_namespaces_no_sockets_a_stack_limit():
    """What rg-run gives every step (compile steps too, which may start processes): checked on the
    runner itself, since a test run cannot start the tools that would show it."""
    import subprocess

    from reward_sandbox.isolation.runner import runner_path

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        limits = ["2", "probe", str(UID_BASE + UID_COUNT - 1), "512", "5", "32", "8", "64", "64", "-", "--"]
        return subprocess.run([str(runner_path()), *limits, *argv], capture_output=True, text=True, check=False)

    assert run("/bin/sh", "-c", "ulimit -s").stdout.strip() == "65536"
    assert run("/bin/sh", "-c", "id -u").stdout.strip() == str(UID_BASE + UID_COUNT - 1)
    for cmd in (["unshare", "-Ur", "true"], ["unshare", "-m", "true"], ["unshare", "-n", "true"]):
        assert run(*cmd).returncode != 0, cmd
    python = "import socket; socket.create_connection(('127.0.0.1', 9), timeout=1)"
    assert "Permission denied" in run("python3", "-c", python).stderr


def test_two_graders_on_one_host_never_share_a_uid():
    from reward_sandbox.isolation.slots import UidLease

    first, second = UidLease(2), UidLease(2)
    try:
        assert len(set(first.uids) | set(second.uids)) == 4
    finally:
        first.release()
        second.release()


@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox uids need root")
def test_the_toolchain_probe_never_runs_as_a_uid_another_grader_holds():
    """The probe's runner kills every process of its uid when done: run as a fixed uid, it killed
    the job of whichever grader on this host held that uid (a compile gone: "unknown error")."""
    import subprocess

    from reward_sandbox.isolation.levels import toolchain_reachable
    from reward_sandbox.isolation.slots import UidLease

    held = UidLease(1)  # the lowest free uid: the one a fixed probe uid lands on when graders are few
    job = subprocess.Popen(["sleep", "30"], user=held.uids[0])
    try:
        assert toolchain_reachable.__wrapped__()
        assert job.poll() is None, "the probe killed another grader's job"
    finally:
        job.kill()
        job.wait()
        held.release()


def test_a_verdict_from_a_weaker_isolation_level_is_never_served_to_a_stronger_one():
    from reward_sandbox.cache import job_key
    from reward_sandbox.jobs import Job

    job = Job(id="a", source=RIGHT)
    assert job_key(job, "v", "fast", Limits(), "rlimits") != job_key(job, "v", "fast", Limits(), "bwrap")


def test_one_bad_record_never_loses_the_batch(strict_grader, tmp_path):
    import json
    import subprocess
    import sys

    records = [
        {"id": "surrogate", "source": "pub fn f() {}\n// \ud800"},
        {"id": "bool-opt", "source": RIGHT, "opt_level": True},
        {"id": "good", "source": RIGHT, "tests": HIDDEN},
    ]
    results = strict_grader.grade(records)
    assert [r.status for r in results] == [Status.INVALID_INPUT, Status.INVALID_INPUT, Status.OK]
    assert "surrogate" in results[0].reason and "opt_level" in results[1].reason
    src, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    cli = [
        sys.executable,
        "-m",
        "reward_sandbox.cli",
        "run",
        "-i",
        str(src),
        "-o",
        str(out),
        "--no-cache",
        "--isolation",
        "strict",
    ]
    proc = subprocess.run(cli, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == [
        "invalid_input",
        "invalid_input",
        "ok",
    ]


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)")
def test_a_step_the_sandbox_cannot_set_up_is_its_fault_not_the_programs(tmp_path):
    """Under a hard open-files limit below what a compile step asks for, rg-run cannot set that
    limit: the job is a sandbox_error that names the step, not a compile error of the program."""
    import json
    import subprocess
    import sys

    src, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"id": "good", "source": RIGHT, "tests": HIDDEN}) + "\n")
    cli = [sys.executable, "-m", "reward_sandbox.cli", "run", "-i", str(src), "-o", str(out), "--no-cache", "-j", "1"]
    proc = subprocess.run(["prlimit", "--nofile=200:200", *cli], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    (result,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert result["status"] == "sandbox_error" and "could not start step" in result["reason"], result


# --- Found by red-teaming: lexing tricks, output takeover, crashes of our parser ----------------

SWALLOW = r"""#![allow /* " */ (unused)]
macro_rules! fake { ($a:ident $($n:ident)*) => { $( #[$a] fn $n() {} )* }; }
macro_rules! grab {
    ( [ $c:literal ] #[cfg(test)] #[path = $hp:tt] mod $hm:ident ; #[cfg(test)] #[path = $sp:tt] mod $sm:ident ; $($rest:tt)* ) => {
        #[cfg(test)] #[path = $sp] mod $sm;
        #[cfg(test)] mod $hm { fake!(test h1 h2 h3 h4 h5 h6 h7 h8 h9 h10 rg_main); }
        $($rest)*
    };
}
grab! { [ '"' ]
pub fn answer(_x: i32) -> i32 { 0 }
}
"""


@pytest.mark.parametrize("mode", ["unit", "main"])
def test_comments_and_char_literals_cannot_move_our_declarations_into_the_programs_macro(strict_grader, mode):
    """A `"` in a comment inside an inner attribute and a `'"'` char once made our placement land in
    the program's own macro call, which replaced the hidden tests with empty ones."""
    tests = HIDDEN if mode == "unit" else "fn main() {\n    assert_eq!(answer(2), 4);\n}\n"
    assert_no_hidden_pass(grade_one(strict_grader, source=SWALLOW, tests=tests, test_mode=mode))


@pytest.mark.parametrize(
    "attack",
    [
        'extern "C" { fn dup2(a: i32, b: i32) -> i32; }\npub fn answer(_x: i32) -> i32 { unsafe { dup2(2, 1); } 0 }\n',
        '#[used]\n#[link_section = ".init_array"]\nstatic INIT: extern "C" fn() = init;\nextern "C" fn init() {}\n'
        + WRONG,
        '#[no_mangle]\npub extern "C" fn main() -> i32 { 0 }\n' + WRONG,
    ],
    ids=["ffi", "link-section-constructor", "no-mangle-main"],
)
def test_the_program_may_not_use_unsafe_code_to_take_over_the_harness(strict_grader, attack):
    """With FFI a program can put a pipe in front of libtest's stdout and rewrite every `failed`
    into `ok` while the real sentinel still prints the nonce. `unsafe` is forbidden by default."""
    r = grade_one(strict_grader, source=attack, tests=HIDDEN)
    assert r.status is Status.COMPILE_ERROR and "unsafe" in (r.reason + r.output_tail).lower(), (
        r.reason,
        r.output_tail,
    )


def test_jobs_that_need_unsafe_can_allow_it(strict_grader):
    source = "pub fn answer(x: i32) -> i32 {\n    let p = &x as *const i32;\n    unsafe { *p * 2 }\n}\n"
    assert grade_one(strict_grader, source=source, tests=HIDDEN).status is Status.COMPILE_ERROR
    assert grade_one(strict_grader, source=source, tests=HIDDEN, allow_unsafe=True).status is Status.OK


@pytest.mark.parametrize(
    "noise",
    [
        'format!("{{\\"a\\":{}\\n", "[".repeat(100_000))',
        r'"{\"type\":\"suite\",\"event\":\"started\",\"test_count\":\"x\"}\n".to_string()',
        r'"{\"type\":\"suite\",\"event\":\"ok\",\"passed\":true,\"failed\":false}\n".to_string()',
    ],
    ids=["deeply-nested-json", "string-test-count", "boolean-totals"],
)
def test_output_our_parser_cannot_read_is_the_programs_failure_not_a_sandbox_error(strict_grader, noise):
    """A sandbox error gives reward None: a wrong program that could force one would trade its 0."""
    source = f"pub fn answer(_x: i32) -> i32 {{\n    use std::io::Write;\n    let _ = std::io::stdout().write_all({noise}.as_bytes());\n    0\n}}\n"
    r = grade_one(strict_grader, source=source, tests=HIDDEN)
    assert r.status is Status.TEST_FAILURE and not r.tests.hidden.ok, (r.status, r.reason)


@pytest.mark.parametrize(
    "source",
    [
        RIGHT + "/* an example:\n#[test]\nfn t() {}\n*/\n",
        "//! Doubles numbers.\n/*! Inner block doc. */\n#![allow(dead_code)]\n" + RIGHT,
        "//! Solution module.\n" + RIGHT,
        "\ufeff" + RIGHT,
        "#!/usr/bin/env rust\n" + RIGHT,
        RIGHT + "#[cfg(test)]\nmod tests {\n    #[test]\n    #[ignore]\n    fn slow() {}\n}\n",
        'pub fn answer(x: i32) -> i32 {\n    if "#[test] cfg(test)".len() == 17 { x * 2 } else { 0 }\n}\n'
        '#[cfg(test)]\nmod tests {\n    #[test]\n    fn broken() { let _: u8 = "no"; }\n}\n',
    ],
    ids=[
        "test-attribute-in-a-comment",
        "inner-doc-comments",
        "a-doc-line-first",
        "byte-order-mark",
        "shebang",
        "only-ignored-own-tests",
        "test-attribute-in-a-string",
    ],
)
def test_correct_programs_are_not_failed_by_what_looks_like_tests(strict_grader, source):
    r = grade_one(strict_grader, source=source, tests=HIDDEN)
    assert r.tests.hidden.ok and r.tests.hidden.passed == 2, (r.reason, r.output_tail)
    if "broken" not in source:
        assert r.status is Status.OK, r.reason


SELF_EXEC = r"""
use std::io::Write;
use std::process::Command;
fn forge() -> Option<()> {
    let args: Vec<String> = std::env::args().collect();
    let list = Command::new(&args[0]).arg("--list").output().ok()?;
    let text = String::from_utf8_lossy(&list.stdout).to_string();
    let sentinel = text.lines().filter_map(|l| l.strip_suffix(": test")).find(|n| n.ends_with("::zzzz_done"))?.to_string();
    let out = Command::new(&args[0]).args([sentinel.as_str(), "--exact", "--nocapture"]).output().ok()?;
    let nonce = String::from_utf8_lossy(&out.stdout).lines().find(|l| l.starts_with("RG_SENTINEL_"))?.to_string();
    let _ = std::io::stdout().lock().write_all(format!("\n{nonce}\n").as_bytes());
    Some(())
}
pub fn answer(_x: i32) -> i32 { let _ = forge(); 0 }
"""


def test_a_test_cannot_run_its_own_binary_to_get_the_nonce(strict_grader):
    """Found by red-teaming: the (exec-only) binary run again with the sentinel alone printed the
    nonce, and the rest of the stream was forged. Test runs can start no process at all now."""
    assert_no_hidden_pass(grade_one(strict_grader, source=SELF_EXEC, tests=HIDDEN))


EXEC_SELF = r"""
use std::os::unix::process::CommandExt;
pub fn answer(_x: i32) -> i32 {
    if std::env::var("RG_STAGE").is_err() {
        let exe = std::env::args().next().unwrap();
        let err = std::process::Command::new(exe).arg("zzzz").env("RG_STAGE", "b").exec();
        panic!("exec refused: {err}");
    }
    0
}
"""


def test_a_test_cannot_exec_its_binary_again(strict_grader):
    """Found by red-teaming: a test exec'd its binary in its own place (same pid, the grader's stdout
    kept on another descriptor), ran the real sentinel, then finished the stream by hand. Test runs
    may not exec: their binary starts through execveat, and execve is refused."""
    r = grade_one(strict_grader, source=EXEC_SELF, tests=HIDDEN)
    assert_no_hidden_pass(r)
    assert "exec refused" in r.output_tail, r.output_tail


def test_all_test_binaries_are_sealed_before_any_test_runs(strict_grader):
    """Integration mode builds two binaries; the program's own one was readable (nonce path inside)
    while the hidden tests ran. Both are root's and exec-only before the first test."""
    source = (
        RIGHT
        + r"""
pub fn readable() -> Vec<String> {
    ["/tmp/test_bin", "/tmp/own_bin", "/tmp/.rgbin/test_bin", "/tmp/.rgbin/own_bin"]
        .iter().filter(|p| std::fs::read(p).is_ok() || std::fs::OpenOptions::new().write(true).open(p).is_ok())
        .map(|p| p.to_string()).collect()
}
#[cfg(test)]
mod tests {
    #[test]
    fn own() { assert_eq!(super::answer(1), 2); }
}
"""
    )
    tests = "use solution::*;\n" + HIDDEN + "#[test]\nfn h3() { assert_eq!(readable(), Vec::<String>::new()); }\n"
    r = grade_one(strict_grader, source=source, tests=tests, test_mode="integration")
    assert r.status is Status.OK and r.tests.hidden.passed == 3, (r.reason, r.output_tail)


def test_a_direct_write_is_the_programs_text_but_one_that_runs_into_libtests_line_is_tampering(strict_grader):
    """A whole line written straight to stdout is only text; text without a newline runs into
    libtest's next event line, which then is not one event: never trusted, whatever it says."""
    source = 'use std::io::Write;\npub fn answer(x: i32) -> i32 {\n    let _ = std::io::stdout().write_all(b"WRITE");\n    x * 2\n}\n'
    r = grade_one(strict_grader, source=source.replace("WRITE", "a line\\n"), tests=HIDDEN)
    assert r.status is Status.OK and r.tests.hidden.passed == 2, (r.reason, r.output_tail)
    r = grade_one(strict_grader, source=source.replace("WRITE", "partial"), tests=HIDDEN)
    assert r.status is Status.TEST_FAILURE and not r.tests.hidden.trusted and r.tests.hidden.passed == 0
    assert "not one libtest event" in r.reason


SWALLOW_EVENTS = r"""
use std::io::Write;
pub fn answer(_x: i32) -> i32 {
    // a forged `ok` for this test, then an unclosed `{` that libtest's real `failed` line runs into
    let name = std::thread::current().name().unwrap_or("").to_string();
    let forged = format!("{{ \"type\": \"test\", \"name\": \"{name}\", \"event\": \"ok\" }}\n{{\"x\":");
    let _ = std::io::stdout().lock().write_all(forged.as_bytes());
    0
}
"""


def test_text_written_before_libtests_line_cannot_hide_its_event(strict_grader):
    """Found by red-teaming: `{"x":` without a newline made libtest's real `failed` line unparsable,
    and a forged `ok` took its place. Every JSON object on a line is read now."""
    assert_no_hidden_pass(grade_one(strict_grader, source=SWALLOW_EVENTS, tests=HIDDEN))


def test_output_built_to_slow_the_parser_is_the_programs_failure(strict_grader):
    source = 'use std::io::Write;\npub fn answer(_x: i32) -> i32 {\n    let _ = std::io::stdout().write_all("{\\"a\\":".repeat(100_000).as_bytes());\n    0\n}\n'
    start = time.monotonic()
    r = grade_one(strict_grader, source=source, tests=HIDDEN)
    assert r.status is Status.TEST_FAILURE and not r.tests.hidden.ok, (r.status, r.reason)
    assert time.monotonic() - start < 20
