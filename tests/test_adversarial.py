"""One test per sandbox guarantee: hostile programs are contained and get the right status.

Each program is real Rust run through the real sandbox (bubblewrap); the host is checked
afterwards for what must not have happened.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from reward_sandbox import Status
from reward_sandbox.isolation import SLOT_UID_BASE

from .conftest import grade_one

pytestmark = [pytest.mark.cargo, pytest.mark.bwrap]


def attack_job(body: str, prelude: str = "") -> dict:
    """A job whose single own test runs ``body``."""
    source = f"{prelude}\npub fn noop() {{}}\n\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn attack() {{\n{body}\n    }}\n}}\n"
    return {"source": source}


def sandbox_processes() -> list[str]:
    """Processes on the host owned by the sandbox uids, or carrying our markers."""
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
        if SLOT_UID_BASE <= uid < SLOT_UID_BASE + 64 or "301.5" in cmdline:
            found.append(f"{pid} uid={uid} {cmdline}")
    return found


def test_infinite_loop_times_out(strict_grader):
    start = time.monotonic()
    r = grade_one(strict_grader, **attack_job("loop { std::hint::black_box(0); }"), timeout_s=1.5)
    assert r.status is Status.TIMEOUT
    assert r.build.ok and not r.tests.ok
    assert time.monotonic() - start < 20
    assert sandbox_processes() == []


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
    assert sandbox_processes() == []


def test_shell_fork_bomb_is_contained(strict_grader):
    body = 'let _ = std::process::Command::new("/bin/sh").arg("-c").arg("b(){ b|b& }; b; sleep 301.5").status();'
    r = grade_one(strict_grader, **attack_job(body), timeout_s=3)
    assert r.status in (Status.OK, Status.TIMEOUT, Status.TEST_FAILURE)
    assert sandbox_processes() == []


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
    body = 'use std::io::Write;\nlet line = [b\'x\'; 4096];\nloop { std::io::stdout().write_all(&line).unwrap(); }'
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.OUTPUT_LIMIT
    assert len(r.output_tail) <= 2000


def test_big_files_are_capped(strict_grader):
    body = 'let data = vec![0u8; 1 << 20];\nfor i in 0..400 { std::fs::write(format!("/tmp/f{i}"), &data).unwrap(); }'
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.TEST_FAILURE  # the tmpfs fills up (ENOSPC): the write fails inside the sandbox


def test_no_process_outlives_its_job(strict_grader):
    body = 'std::process::Command::new("/bin/sh").arg("-c").arg("(setsid sleep 301.5 &) ; sleep 301.5 &").status().unwrap();'
    r = grade_one(strict_grader, **attack_job(body))
    assert r.status is Status.OK
    time.sleep(0.2)
    assert sandbox_processes() == []


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
    from reward_sandbox import isolation

    monkeypatch.setattr(isolation, "bwrap_problem", lambda: "bubblewrap is refused here: test")
    with pytest.raises(isolation.IsolationUnavailable, match="strict isolation requested"):
        isolation.choose_level("strict")
    level, warning = isolation.choose_level("auto")
    assert level == "rlimits" and "falling back" in warning
