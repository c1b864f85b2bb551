"""The fast backend (one clippy-driver pass, no cargo) and the real cargo backend agree."""

import pytest

from reward_sandbox.corpus import EXPECTED_STATUS, corpus

from .test_grading import ADD

pytestmark = [pytest.mark.cargo, pytest.mark.slow]

EXTRA = [
    {"id": "hidden", "source": ADD, "tests": "#[test]\nfn h() { assert_eq!(add(2, 2), 4); }"},
    {"id": "hidden-fail", "source": ADD, "tests": "#[test]\nfn h() { assert_eq!(add(2, 2), 5); }"},
    {"id": "no-tests", "source": ADD},
    {"id": "tests-broken", "source": "pub fn add(a: i64) -> i64 { a }", "tests": "#[test]\nfn h() { add(1, 1); }"},
    {"id": "main", "source": ADD, "tests": "fn main() { assert_eq!(add(1, 1), 2); }", "test_mode": "main"},
    {"id": "integ", "source": ADD, "crate_name": "adder", "test_mode": "integration",
     "tests": "use adder::add;\n#[test]\nfn a() { assert_eq!(add(1, 2), 3); }\n#[test]\nfn b() { assert_eq!(add(1, 2), 0); }"},
    {"id": "exit", "source": ADD + "#[cfg(test)]\nmod t {\n    #[test]\n    fn x() { std::process::exit(0); }\n}\n"},
]  # fmt: skip


def verdict(r):
    return (r.status.value, r.build.ok, r.clippy.ok, r.clippy.warnings > 0, r.tests.counts.passed, r.tests.counts.failed)


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
