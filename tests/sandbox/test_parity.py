"""The fast backend (one clippy-driver pass, no cargo) and the real cargo backend agree."""

import pytest

from benchmarks.corpus import EXPECTED_STATUS, corpus

from .test_grading import ADD

pytestmark = [pytest.mark.cargo, pytest.mark.slow]

EXTRA = [
    {"id": "hidden", "source": ADD, "tests": "#[test]\nfn h() { assert_eq!(add(2, 2), 4); }"},
    {"id": "hidden-fail", "source": ADD, "tests": "#[test]\nfn h() { assert_eq!(add(2, 2), 5); }"},
    {"id": "no-tests", "source": ADD},
    {"id": "tests-broken", "source": "pub fn add(a: i64) -> i64 { a }", "tests": "#[test]\nfn h() { add(1, 1); }"},
    {"id": "main", "source": ADD, "tests": "fn main() { assert_eq!(add(1, 1), 2); }", "test_mode": "main"},
    {
        "id": "integ",
        "source": ADD,
        "crate_name": "adder",
        "test_mode": "integration",
        "tests": "use adder::add;\n#[test]\nfn a() { assert_eq!(add(1, 2), 3); }\n#[test]\nfn b() { assert_eq!(add(1, 2), 0); }",
    },
    {"id": "exit", "source": ADD + "#[cfg(test)]\nmod t {\n    #[test]\n    fn x() { std::process::exit(0); }\n}\n"},
]


def verdict(r):
    return (
        r.status.value,
        r.build.ok,
        r.clippy.ok,
        r.clippy.warnings > 0,
        r.tests.counts.passed,
        r.tests.counts.failed,
    )


def test_fast_and_cargo_backends_agree_on_a_corpus(grader, cargo_grader):
    jobs = [{k: v for k, v in j.items() if k != "kind"} for j in corpus(16, seed=7)] + EXTRA
    fast = grader.grade(jobs)
    slow = cargo_grader.grade(jobs)
    mismatches = [(j["id"], verdict(a), verdict(b)) for j, a, b in zip(jobs, fast, slow) if verdict(a) != verdict(b)]
    assert mismatches == []
    assert all(r.backend == "cargo" for r in slow)
    for job, result in zip(corpus(16, seed=7), fast):
        assert result.status.value == EXPECTED_STATUS[job["kind"]], job["id"]
        assert result.clippy.ok == (job["kind"] == "correct" or job["kind"] == "failing"), job["id"]


# Deny-by-default lints decide nothing: `cargo test` runs no clippy, and neither may we.
LINT_CASES = [
    {
        "id": "absurd-comparison",
        "source": "pub fn f(n: usize) -> usize {\n    if n < 0 { 0 } else { n + 1 }\n}\n",
        "tests": "#[test]\nfn h() { assert_eq!(f(1), 2); }",
    },
    {
        "id": "approx-constant-in-hidden-tests",
        "source": "pub fn half_turn() -> f64 {\n    std::f64::consts::PI\n}\n",
        "tests": "#[test]\nfn h() { assert!((half_turn() - 3.141592653589793).abs() < 1e-9); }",
    },
    {
        "id": "approx-constant-in-program",
        "source": "pub fn tau() -> f64 {\n    6.283185307179586\n}\n",
        "tests": "#[test]\nfn h() { assert!(tau() > 6.0); }",
    },
    {
        "id": "denied-by-source",
        "source": "#![deny(clippy::all)]\npub fn n(v: &Vec<i32>) -> usize {\n    return v.len();\n}\n",
        "tests": "#[test]\nfn h() { assert_eq!(n(&vec![1]), 1); }",
    },
    {
        "id": "buggy-but-builds",
        "source": "pub fn f(n: u32) -> u32 {\n    if n < 0 { 1 } else { n - 1 }\n}\n",
        "tests": "#[test]\nfn h() { assert_eq!(f(0), 1); }",
    },
    {
        "id": "integration-lint",
        "source": "pub fn f(n: usize) -> bool {\n    n < 0 || n > 3\n}\n",
        "crate_name": "lints",
        "test_mode": "integration",
        "tests": "use lints::f;\n#[test]\nfn h() { assert!(f(4)); }",
    },
]


def real_cargo_test(job: dict, tmp_path) -> str:
    """What plain `cargo build` + `cargo test` say, unsandboxed: ok, compile_error or test_failure."""
    import shutil
    import subprocess

    crate = job.get("crate_name", "solution")
    root = tmp_path / job["id"]
    (root / "src").mkdir(parents=True)
    (root / "Cargo.toml").write_text(f'[package]\nname = "{crate}"\nversion = "0.1.0"\nedition = "2021"\n')
    if job.get("test_mode") == "integration":
        (root / "src" / "lib.rs").write_text(job["source"])
        (root / "tests").mkdir()
        (root / "tests" / "hidden.rs").write_text(job["tests"])
    else:
        (root / "src" / "lib.rs").write_text(
            job["source"] + "\n#[cfg(test)]\nmod hidden {\n    use super::*;\n" + job["tests"] + "\n}\n"
        )
    cargo = shutil.which("cargo") or "cargo"
    if subprocess.run([cargo, "build", "--offline", "-q"], cwd=root, capture_output=True, check=False).returncode:
        return "compile_error"
    return (
        "ok"
        if subprocess.run([cargo, "test", "--offline", "-q"], cwd=root, capture_output=True, check=False).returncode
        == 0
        else "test_failure"
    )


def test_lints_never_decide_builds_or_tests_in_any_backend(grader, cargo_grader, tmp_path):
    fast = grader.grade(LINT_CASES)
    slow = cargo_grader.grade(LINT_CASES)
    for job, a, b in zip(LINT_CASES, fast, slow):
        expected = real_cargo_test(job, tmp_path)
        assert (a.status.value, b.status.value) == (expected, expected), (job["id"], a.reason, b.reason)
        # reported under clippy, not as a build error; the hidden tests' own lints are nobody's
        assert a.build.ok and (a.clippy.warnings > 0) == ("hidden-tests" not in job["id"]), job["id"]


# Crate-using programs: the fast backend links the prebuilt rlibs, cargo builds the same versions
# from the vendored sources through source replacement (crates.py). Small crates only: every cargo
# job builds its crates from source.
CRATE_NAMES = ("md5", "itertools", "once_cell", "lazy_static")


def test_fast_and_cargo_backends_agree_on_crate_using_programs(grader, cargo_grader):
    from .test_crates import PROGRAMS, needs_crates

    if needs_crates.args[0]:
        pytest.skip(needs_crates.kwargs["reason"])
    jobs = [{"id": n, "source": PROGRAMS[n][0], "tests": PROGRAMS[n][1]} for n in CRATE_NAMES]
    jobs += [
        {"id": "md5-wrong", "source": PROGRAMS["md5"][0], "tests": '#[test]\nfn t() { assert_eq!(hex("a"), "0"); }'},
        {"id": "md5-bad-api", "source": "pub fn hex(s: &str) -> String {\n    md5::digest(s)\n}\n"},
        {"id": "declared", "source": ADD, "tests": "#[test]\nfn h() { assert_eq!(md5::compute(b\"\").0.len(), 16); }", "crates": ["md5"]},
    ]  # fmt: skip
    fast = grader.grade(jobs)
    slow = cargo_grader.grade(jobs)
    assert [verdict(a) for a in fast] == [verdict(b) for b in slow], [(a.reason, b.reason) for a, b in zip(fast, slow)]
    assert [r.status.value for r in fast] == ["ok"] * 4 + ["test_failure", "compile_error", "ok"]
