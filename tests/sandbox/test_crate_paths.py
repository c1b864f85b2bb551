"""The hidden tests' crate paths reach the real crates whatever the program declares
(``prelude.crate_imports``), and the crate set works wherever its cache lives (``levels.crate_binds``).

A glob import beats the extern prelude: a program's ``mod std { pub mod f64 { ... PI = 3.0 } }`` would
be what the tests' ``std::f64::consts::PI`` reads through ``use super::*`` (or ``use my_crate::*``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reward_sandbox import Grader, Status
from reward_sandbox.compile.crates import CrateSet, CratesUnavailable
from reward_sandbox.compile.crates import ensure as ensure_crates

from ..conftest import needs_bwrap
from .batch.test_batched import was_batched

AREA_TESTS = (
    "#[test]\nfn unit() {\n    assert!((area(1.0) - std::f64::consts::PI).abs() < 1e-9);\n}\n"
    "#[test]\nfn two() {\n    assert!((area(2.0) - 4.0 * core::f64::consts::PI).abs() < 1e-9);\n}\n"
)
RIGHT = "pub fn area(r: f64) -> f64 {\n    std::f64::consts::PI * r * r\n}\n"
WRONG = "pub fn area(r: f64) -> f64 {\n    3.0 * r * r\n}\n"
FAKES = {
    "mod std": "pub mod std {\n    pub mod f64 {\n        pub mod consts {\n            pub const PI: f64 = 3.0;\n        }\n    }\n}\n",
    "mod core": "pub mod core {\n    pub mod f64 {\n        pub mod consts {\n            pub const PI: f64 = 3.0;\n        }\n    }\n}\n",
    "re-export": "mod inner {\n    pub mod f64 {\n        pub mod consts {\n            pub const PI: f64 = 3.0;\n        }\n    }\n}\n"
    "pub use inner as std;\npub use inner as core;\n",
}


@pytest.mark.parametrize("mode", ["unit", "integration"])
@pytest.mark.parametrize("fake", list(FAKES))
def test_a_program_module_named_like_a_crate_never_answers_the_tests_paths(grader, fake, mode):
    wrong = "#![allow(non_snake_case)]\n" + WRONG + FAKES[fake]
    tests = AREA_TESTS if mode == "unit" else "use solution::*;\n" + AREA_TESTS
    jobs = [{"id": f"w{i}", "source": wrong, "tests": tests, "test_mode": mode} for i in range(2)]
    jobs.append({"id": "r", "source": RIGHT, "tests": tests, "test_mode": mode})
    results = grader.grade(jobs)
    assert results[2].status is Status.OK, (results[2].reason, results[2].output_tail[-500:])
    for r in results[:2]:
        assert r.status is not Status.OK and r.tests.hidden.passed == 0, (r.status, r.reason)
    (alone,) = grader.grade([{"id": "alone", "source": wrong + "// alone\n", "tests": tests, "test_mode": mode}])
    assert alone.status is not Status.OK and alone.tests.hidden.passed == 0


def _crate_set(grader: Grader) -> CrateSet:
    try:
        return ensure_crates(grader.toolchain.version, grader.toolchain.cargo)
    except CratesUnavailable as exc:
        pytest.skip(f"the crate set is not installed here: {exc}")


def test_a_module_named_like_an_offered_crate_never_answers_the_tests_paths(grader):
    _crate_set(grader)
    tests = '#[test]\nfn t() {\n    assert!(regex::Regex::new("^a+$").unwrap().is_match(&word()));\n}\n'
    fake = (
        "pub mod regex {\n    pub struct Regex;\n    impl Regex {\n"
        "        pub fn new(_: &str) -> Result<Regex, ()> {\n            Ok(Regex)\n        }\n"
        "        pub fn is_match(&self, _: &str) -> bool {\n            true\n        }\n    }\n}\n"
    )
    jobs = [
        {"id": "wrong", "source": 'pub fn word() -> String {\n    "b".into()\n}\n' + fake, "tests": tests},
        {"id": "right", "source": 'pub fn word() -> String {\n    "aa".into()\n}\n', "tests": tests},
    ]
    wrong, right = grader.grade(jobs)
    assert right.status is Status.OK, (right.reason, right.output_tail[-500:])
    assert wrong.status is not Status.OK and wrong.tests.hidden.passed == 0, (wrong.status, wrong.reason)


def test_tests_that_use_std_paths_themselves_still_build(grader):
    """Our import sits beside the tests' own ``use std::...`` and their ``::std`` paths."""
    tests = (
        "use std::collections::HashMap;\nuse std::f64::consts::PI;\n"
        "#[test]\nfn t() {\n    let m: HashMap<u8, f64> = HashMap::new();\n    assert!(m.is_empty());\n"
        "    assert!((area(1.0) - PI).abs() < 1e-9);\n    assert!((area(1.0) - ::std::f64::consts::PI).abs() < 1e-9);\n}\n"
    )
    (result,) = grader.grade([{"id": "r", "source": RIGHT, "tests": tests}])
    assert result.status is Status.OK, (result.reason, result.output_tail[-500:])


@needs_bwrap
def test_a_crate_set_under_tmp_links_batched_and_alone(grader, tmp_path: Path):
    """The crate set is bound at a fixed sandbox path, never under the sandbox's own /tmp work dir
    (which the driver empties between runs): a cache under /tmp grades like any other."""
    built = _crate_set(grader)
    base = tmp_path / "crates"
    base.mkdir()
    shutil.copytree(built.root, base / built.root.name, symlinks=True)
    assert str(base).startswith("/tmp/")
    program = 'use regex::Regex;\npub fn digits(s: &str) -> usize {\n    Regex::new(r"\\d").unwrap().find_iter(s).count()\n}\n'
    jobs = [
        {"id": f"j{i}", "source": f"// {i}\n{program}", "tests": '#[test]\nfn t() { assert_eq!(digits("a1b22"), 3); }'}
        for i in range(3)
    ]
    path = tmp_path / "jobs.jsonl"
    path.write_text("".join(json.dumps(j) + "\n" for j in jobs))
    env = {**os.environ, "REWARD_SANDBOX_CRATES": str(base)}
    for flags in ([], ["--no-batch"]):
        out = tmp_path / f"out{len(flags)}.jsonl"
        argv = [sys.executable, "-m", "reward_sandbox.cli", "run", "-i", str(path), "-o", str(out), "-j", "2"]
        argv += ["--cache-dir", str(tmp_path / "cache"), *flags]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["status"] for r in rows] == ["ok"] * 3, [r.get("reason") for r in rows]
        assert all(("batch" in r["measures"]) == (not flags) for r in rows)


def test_batched_members_are_batched(grader):
    """The crate-path cases above ran as a batch (the guarantee is for both ways)."""
    jobs = [{"id": f"w{i}", "source": WRONG + FAKES["mod std"] + f"// {i}\n", "tests": AREA_TESTS} for i in range(2)]
    assert all(was_batched(r) for r in grader.grade(jobs))
