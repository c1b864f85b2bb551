"""Batched grading gives every program the verdict grading it alone gives: on the parity corpus,
on GRPO-shaped groups, on the real Exercism suite (as unit-mode jobs) and against programs that
attack their neighbours from inside a batch."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from benchmarks.corpus import corpus, grouped
from reward_sandbox import Grader
from reward_sandbox.batch.sharing import alone_reason
from reward_sandbox.cache import ResultCache
from reward_sandbox.jobs import Job

from ...conftest import SHARED, TEST_LIMITS, needs_bwrap
from ..test_grading import ADD
from ..test_parity import EXTRA, LINT_CASES

pytestmark = [pytest.mark.bwrap, pytest.mark.slow, needs_bwrap]

_TAG = re.compile(r"rg[0-9a-f]{16}")


def verdict(r):  # type: ignore[no-untyped-def]
    """Everything a verdict says, with the random tags in test names blanked."""

    def suite(s):  # type: ignore[no-untyped-def]
        # an untrusted run's names are whatever the program printed (it may print its random argv)
        names = tuple(_TAG.sub("TAG", n) for n in s.failures + s.passes) if s.trusted else ()
        return (s.ran, s.trusted, s.passed, s.failed, s.ignored, s.expected, names, s.note)

    build = (r.build.ok, r.build.errors, tuple((d.code, d.message, d.line, d.file) for d in r.build.diagnostics))
    lints = (r.clippy.ok, r.clippy.warnings, tuple((d.code, d.message, d.line, d.file) for d in r.clippy.diagnostics))
    # which limit a loop hits first (CPU or wall clock) depends on the machine's load, not on batching
    reason = "" if r.status.value == "timeout" else _TAG.sub("TAG", r.reason)
    return (r.status.value, reason, build, lints, suite(r.tests.hidden), suite(r.tests.own))


@pytest.fixture(scope="module")
def batched() -> Grader:
    with Grader(workers=2, limits=TEST_LIMITS, cache=ResultCache()) as g:
        assert g.batch
        yield g


@pytest.fixture(scope="module")
def single() -> Grader:
    with Grader(workers=2, limits=TEST_LIMITS, cache=ResultCache(), batch=False) as g:
        yield g


def compare(jobs: list[dict], batched: Grader, single: Grader) -> list:  # type: ignore[type-arg]
    """Grade ``jobs`` both ways; assert equal verdicts; return the batched results."""
    together = batched.grade(jobs)
    alone = single.grade(jobs)
    assert all("batch" not in r.measures for r in alone)
    mismatches = [
        (j["id"], verdict(a), verdict(b)) for j, a, b in zip(jobs, together, alone) if verdict(a) != verdict(b)
    ]
    assert mismatches == []
    return together


def was_batched(result) -> bool:  # type: ignore[no-untyped-def]
    return "batch" in result.measures


# A hidden test per corpus template that does not depend on the seed, so each template is a group.
_SHARED_TESTS = [
    "#[test]\nfn h() { assert_eq!(scale(&[0]), vec![0]); }",
    "#[test]\nfn h() { assert!(gcd_plus(5, 0) >= 5); }",
    "#[test]\nfn h() { assert!(shout(\"a\").starts_with('A')); }",
    "#[test]\nfn h() { assert_eq!(count_over(&[]), 0); }",
]


def test_batched_equals_single_on_the_parity_corpus(batched, single):
    jobs = [
        {"id": j["id"], "source": j["source"], "tests": _SHARED_TESTS[i % 4]} for i, j in enumerate(corpus(16, seed=7))
    ]
    jobs += EXTRA + LINT_CASES
    results = compare(jobs, batched, single)
    assert sum(map(was_batched, results)) >= 8  # the groups really shared compiler runs


def test_batched_equals_single_on_grpo_groups(batched, single):
    jobs = [{k: v for k, v in j.items() if k != "kind"} for j in grouped(4, size=8, seed=3)]
    results = compare(jobs, batched, single)
    by_kind = {}
    for job, result in zip(grouped(4, size=8, seed=3), results):
        by_kind.setdefault(job["kind"], []).append(was_batched(result))
    assert all(by_kind["correct"]) and all(by_kind["failing"]) and all(by_kind["clippy_warning"])
    assert not any(by_kind["compile_error"])  # found from the diagnostics, graded alone


def _suite_path() -> Path:
    for base in (os.environ.get("RG_SHARED"), str(SHARED), "/work/shared"):
        if base and (Path(base) / "evalsets" / "exercism" / "exercism_rust.jsonl").exists():
            return Path(base) / "evalsets" / "exercism" / "exercism_rust.jsonl"
    pytest.skip("the Exercism suite (../shared/evalsets) is not here")


@pytest.mark.shared
def test_batched_equals_single_on_exercism_as_unit_jobs(batched, single):
    """Each exercise as a group: its reference, its stub and a broken reference, the tests made a
    unit-test module (``use <crate>::`` -> ``use super::``) so they can share one crate."""
    from rust_grpo.problems.importers import import_problems

    problems, _ = import_problems("exercism-jsonl", _suite_path())
    jobs: list[dict] = []  # type: ignore[type-arg]
    for p in problems:
        tests = re.sub(rf"\b{p.crate_name}::", "super::", p.tests)
        common = {"tests": tests, "edition": p.edition, "include_ignored": True, "opt_level": p.opt_level}
        if p.allow_unsafe:
            common["allow_unsafe"] = True
        jobs += [
            {"id": f"{p.id}/ref", "source": p.solution, **common},
            {"id": f"{p.id}/stub", "source": p.signature, **common},
            {"id": f"{p.id}/broken", "source": p.solution.rstrip().rstrip("}"), **common},
        ]
    results = compare(jobs, batched, single)
    assert sum(map(was_batched, results)) >= len(problems) // 2


# ---------------------------------------------------------------------------------------------
# Attacks from inside a batch: each group holds honest neighbours and one attacker.

_HIDDEN = "#[test]\nfn adds() { assert_eq!(add(2, 3), 5); }\n#[test]\nfn adds_zero() { assert_eq!(add(0, 7), 7); }"
_WRONG = "pub fn add(a: i64, b: i64) -> i64 {\n    a * b\n}\n"
_OWN = "\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn own() {\n        assert_eq!(add(1, 1), 2);\n    }\n}\n"


def _add_with(body: str, extra: str = "") -> str:
    return f"{extra}\npub fn add(a: i64, b: i64) -> i64 {{\n    {body}\n    a + b\n}}\n"


ATTACKS = {
    "exit": _add_with("if a == 2 { std::process::exit(0); }"),
    "abort": _add_with("if a == 2 { std::process::abort(); }"),
    "loop": _add_with("if a == 2 { loop { std::hint::black_box(a); } }"),
    "compile-error": 'pub fn add(a: i64, b: i64) -> i64 {\n    a + b + ""\n}\n',
    "no-std-attribute": "#![no_implicit_prelude]\npub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n",
    "allow-attribute": "#![allow(dead_code)]\nfn unused() {}\n" + ADD,
    "forged-events": _add_with(
        """use std::io::Write;
    let me = std::fs::read_to_string("/proc/thread-self/comm").unwrap_or_default();
    let marker = std::env::args().nth(1).unwrap_or_default();
    let mut out = std::io::stdout();
    for name in [format!("{}_m::tests::own", me.trim()), format!("rg0000000000000000_m::{marker}::adds")] {
        let _ = writeln!(out, "{{ \\"type\\": \\"test\\", \\"event\\": \\"started\\", \\"name\\": \\"{name}\\" }}");
        let _ = writeln!(out, "{{ \\"type\\": \\"test\\", \\"name\\": \\"{name}\\", \\"event\\": \\"failed\\" }}");
    }
    let _ = writeln!(out, "RG_SENTINEL_00000000000000000000000000000000");
    let _ = writeln!(out, "{{ \\"type\\": \\"suite\\", \\"event\\": \\"ok\\", \\"passed\\": 99, \\"failed\\": 0 }}");
    let _ = out.flush();"""
    ),
    "partial-line": _add_with(
        'use std::io::Write;\n    let _ = write!(std::io::stdout(), "{{\\"type\\":\\"test\\",\\"event\\":\\"ok\\",\\"name\\":\\"x\\",\\"y\\":");'
    ),
    "neighbour-names": "macro_rules! assert_eq { ($($t:tt)*) => {} }\npub mod tests { pub fn add() {} }\n"
    "pub mod rg0000000000000000_m { pub fn add() {} }\n" + ADD,
    "macro-export": "#[macro_export]\nmacro_rules! assert_eq { ($($t:tt)*) => {} }\n" + ADD,
    "static-panic": _add_with(
        'if a == 2 { let _ = S.get_or_init(|| panic!("init")); }',
        "static S: std::sync::OnceLock<i64> = std::sync::OnceLock::new();",
    ),
    "drop-panic": _add_with(
        "let _d = D(a);",
        'struct D(i64);\nimpl Drop for D { fn drop(&mut self) { if self.0 == 2 { panic!("drop"); } } }',
    ),
    "leaked-thread": _add_with(
        'std::thread::spawn(|| loop { std::thread::sleep(std::time::Duration::from_millis(1)); std::env::set_var("RG_POISON", "1"); });'
    ),
    "late-exit": _add_with(
        "std::thread::spawn(|| { std::thread::sleep(std::time::Duration::from_millis(300)); std::process::exit(0) });"
    ),
    "env": _add_with('std::env::set_var("RG_POISON", "1");'),
    "cwd": _add_with('let _ = std::env::set_current_dir("/");'),
    "tmp-file": _add_with('let _ = std::fs::write("/tmp/shared-state", b"x");'),
    "panic-hook": _add_with('std::panic::set_hook(Box::new(|_| println!("{{\\"type\\":\\"test\\"}}")));'),
    "leaked-memory": _add_with("if a == 2 { std::mem::forget(vec![1u8; 200 << 20]); }"),
    # reserved, untouched (not resident) address space kept: the RLIMIT_AS its neighbours share
    "address-space": _add_with(
        """static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !DONE.swap(true, std::sync::atomic::Ordering::SeqCst) {
        let big: Vec<_> = (0..3).map(|_| std::thread::Builder::new().stack_size(16 << 20).spawn(|| 0).unwrap()).collect();
        for h in big { let _ = h.join(); }
        let mut chunk: usize = 256 << 20;
        while chunk >= (1 << 20) {
            let mut v: Vec<u8> = Vec::new();
            if v.try_reserve_exact(chunk).is_ok() { std::mem::forget(v); } else { chunk /= 2; }
        }
    }"""
    ),
    # not an attack: honest work on many threads, each with its own allocations (malloc arenas)
    "threads-allocating": _add_with(
        "let n: usize = std::thread::scope(|s| (0..16).map(|_| s.spawn(|| (0..1000).collect::<Vec<i64>>().len()))"
        ".collect::<Vec<_>>().into_iter().map(|h| h.join().unwrap()).sum());\n    let _ = n;"
    ),
    "leaked-fd": _add_with('std::mem::forget(std::fs::File::open("/proc/self/status"));'),
    # not an attack: a program that looks at its command line sees a filter shaped like its own
    "argv": _add_with(
        "let f = std::env::args().nth(1).unwrap_or_default();\n    "
        'if f.len() != 27 || !f.starts_with("rg") || !f.ends_with("_hidden::") { return 0; }'
    ),
}


# Correct alone, wrong wherever a neighbour's leftovers reach it: an environment variable, the working
# directory, a file in /tmp, memory kept.
_SENSITIVE = """pub fn add(a: i64, b: i64) -> i64 {
    let mut room: Vec<u8> = Vec::new();
    let clean = std::env::var_os("RG_POISON").is_none()
        && std::fs::read_to_string("Cargo.toml").is_ok()
        && !std::path::Path::new("/tmp/shared-state").exists()
        && room.try_reserve(320 << 20).is_ok();
    if clean { a + b } else { a - b }
}
"""


# Its own tests fail where a file some program left in the hidden run survives into the own run.
_OWN_SENSITIVE = """
#[cfg(test)]
mod tests {
    #[test]
    fn clean() {
        assert!(!std::path::Path::new("/tmp/shared-state").exists());
    }
}
"""


def _group(attack: str) -> list[dict]:  # type: ignore[type-arg]
    """Honest programs (right, wrong, with own tests, sensitive to leftovers: three copies, so some
    run after the attacker whatever the random order), then the attacker; short limits for loops."""
    sensitive = [f"// copy {n}\n{_SENSITIVE}" for n in range(3)]
    own_sensitive = [f"// copy {n}\n{ADD}{_OWN_SENSITIVE}" for n in range(2)]
    honest = [
        ADD,
        "pub fn add(x: i64, y: i64) -> i64 {\n    y + x\n}\n",
        _WRONG,
        ADD + _OWN,
        *sensitive,
        *own_sensitive,
    ]
    sources = [*honest, ATTACKS[attack]]
    return [{"id": f"{attack}/{n}", "source": s, "tests": _HIDDEN, "timeout_s": 1.0} for n, s in enumerate(sources)]


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attacks_inside_a_batch_change_no_verdict(batched, single, attack):
    jobs = _group(attack)
    results = compare(jobs, batched, single)
    if attack in (
        "argv",
        "threads-allocating",
    ):  # graded in the batch (unless the machine's load cut the run short), still ok
        assert results[-1].status.value == "ok"
    assert [r.status.value for r in results[:-1]] == ["ok", "ok", "test_failure", *["ok"] * 6]


def test_programs_that_cannot_move_into_a_module_are_graded_alone():
    for source, why in [
        ("#![no_std]\npub fn f() {}", "inner attribute"),
        ("#![allow(dead_code)]\npub fn f() {}", "inner attribute"),
        ("#[allow(long_running_const_eval)]\nconst X: u8 = 0;", "`long_running_const_eval`"),
        ('#![recursion_limit = "9999"]\npub fn f() {}', "inner attribute"),
        ("use crate::x;", "crate path"),
        ("use super::*;\npub fn f() {}", "super path"),
        ("#[macro_export]\nmacro_rules! m { () => {} }", "macro_export"),
        ('pub fn f() -> &\'static str { include_str!("lib.rs") }', "include_str"),
        ("pub fn f() -> &'static str { module_path!() }", "module_path"),
    ]:
        assert why.split()[0] in (alone_reason(Job(id="x", source=source, tests="#[test] fn t() {}")) or ""), source
    assert alone_reason(Job(id="x", source="pub(crate) fn f() {}", tests="#[test] fn t() {}")) is None
