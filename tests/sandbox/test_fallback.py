"""The rlimits-only fallback (used where bubblewrap is refused, e.g. in some containers) still
bounds time, memory, output and environment, and reports that it is the weaker level."""

import pytest

from reward_sandbox import Status

from ..conftest import grade_one
from .test_adversarial import attack_job

pytestmark = pytest.mark.cargo


def test_fallback_reports_its_level(fallback_grader):
    r = grade_one(fallback_grader, source="pub fn f() -> u8 { 1 }")
    assert r.status is Status.OK and r.isolation == "rlimits"


def test_fallback_kills_infinite_loops(fallback_grader):
    r = grade_one(fallback_grader, **attack_job("loop { std::hint::black_box(1); }"), timeout_s=1.5)
    assert r.status is Status.TIMEOUT


def test_fallback_caps_output(fallback_grader):
    body = "use std::io::Write;\nloop { std::io::stdout().write_all(&[b'y'; 4096]).unwrap(); }"
    assert grade_one(fallback_grader, **attack_job(body)).status is Status.OUTPUT_LIMIT


def test_fallback_caps_memory(fallback_grader):
    r = grade_one(fallback_grader, **attack_job("let v = vec![7u8; 3 << 30];\nassert!(v[99] == 7);"))
    assert r.status is Status.MEMORY_LIMIT


def test_fallback_clears_the_environment(fallback_grader, monkeypatch):
    monkeypatch.setenv("RG_SECRET_TOKEN", "hunter2")
    r = grade_one(fallback_grader, **attack_job('assert!(std::env::var("RG_SECRET_TOKEN").is_err());'))
    assert r.status is Status.OK


def test_fallback_still_refuses_forged_passes(fallback_grader):
    source = "pub fn f() -> i32 { std::process::exit(0) }\n#[cfg(test)]\nmod t {\n    #[test]\n    fn a() { assert_eq!(super::f(), 1); }\n}\n"
    r = grade_one(fallback_grader, source=source)
    assert r.status is Status.TEST_FAILURE and r.tests.counts.passed == 0


def test_fallback_blocks_the_network_and_leaves_nothing_on_the_host(fallback_grader):
    import socket
    import uuid
    from pathlib import Path

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    leftover = Path("/tmp") / f"rg-leftover-{uuid.uuid4().hex}"
    body = (
        f'assert!(std::net::TcpStream::connect("127.0.0.1:{server.getsockname()[1]}").is_err(), "connected");\n'
        f'std::fs::write("{leftover}", "x").unwrap();'
    )
    try:
        r = grade_one(fallback_grader, **attack_job(body))
    finally:
        server.close()
    assert r.status is Status.OK, (r.reason, r.output_tail)
    assert not leftover.exists()


def test_fallback_refuses_to_run_untrusted_code_as_root(monkeypatch):
    from reward_sandbox.isolation import levels as isolation

    monkeypatch.setattr(isolation, "toolchain_reachable", lambda: False)
    with pytest.raises(isolation.IsolationUnavailable, match="never run as root"):
        isolation.choose_level("rlimits")
