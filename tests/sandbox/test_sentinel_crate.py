"""The prebuilt sentinel crate (``compile/sentinel.py``) changes what a test build costs, never a verdict.

Test builds link the sentinel's body as an rlib under a random per-job name instead of compiling
it inline. It must work in every edition and under ``#![no_implicit_prelude]``, alone and in a
batch, in both isolation levels; a program can neither reach it by its crate name nor stand in for
it; and the cargo backend, which keeps the inline sentinel, agrees on every verdict."""

from __future__ import annotations

import pytest

from reward_sandbox import Grader
from reward_sandbox.compile.assemble import assemble
from reward_sandbox.compile.sentinel import sentinel_rlib
from reward_sandbox.jobs import Job

from ..conftest import grade_one

PROGRAM = "pub fn double(n: i64) -> i64 {\n    n * 2\n}\n"
OWN = "\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn own() {\n        assert_eq!(double(2), 4);\n    }\n}\n"
TESTS = "#[test]\nfn hidden() {\n    assert_eq!(double(21), 42);\n}\n"
WRONG_TESTS = "#[test]\nfn hidden() {\n    assert_eq!(double(21), 41);\n}\n"


def test_the_crate_builds_here() -> None:
    rlib = sentinel_rlib()
    assert rlib is not None and rlib.startswith(b"!<arch>\n")  # an ar archive, as rlibs are


@pytest.mark.parametrize("edition", ["2015", "2018", "2021", "2024"])
@pytest.mark.parametrize("prelude", ["", "#![no_implicit_prelude]\n"])
def test_every_edition_and_no_prelude(grader: Grader, edition: str, prelude: str) -> None:
    source = prelude + PROGRAM.replace("n * 2", "n + n") + OWN.replace("assert_eq!", "::std::assert_eq!")
    ok = grade_one(grader, source=source, tests=TESTS, edition=edition)
    assert ok.status == "ok", ok.reason
    assert (ok.tests.hidden.passed, ok.tests.own.passed) == (1, 1)
    wrong = grade_one(grader, id="wrong", source=source, tests=WRONG_TESTS, edition=edition)
    assert wrong.status == "test_failure" and wrong.tests.hidden.failed == 1


def test_assembled_sources_name_it_at_random() -> None:
    job = Job.from_dict({"id": "a", "source": PROGRAM + OWN, "tests": TESTS})
    first, second = assemble(job, "/tmp", sentinel_crate=True), assemble(job, "/tmp", sentinel_crate=True)
    assert first.sentinel_crate and second.sentinel_crate and first.sentinel_crate != second.sentinel_crate
    text = "".join(first.files.values())
    assert f"::{first.sentinel_crate}::done(" in text and "read_to_string" not in text
    inline = assemble(job, "/tmp")
    assert inline.sentinel_crate is None and "read_to_string" in "".join(inline.files.values())


@pytest.mark.parametrize("name", ["rg_sentinel", "sentinel"])
def test_a_program_cannot_reach_it_by_name(grader: Grader, name: str) -> None:
    """The rlib's own crate name is no name in the program's scope: calling it does not compile."""
    source = PROGRAM + f'\npub fn end() {{\n    ::{name}::done("/tmp/x");\n}}\n'
    result = grade_one(grader, id=f"reach-{name}", source=source, tests=TESTS)
    assert result.status == "compile_error" and not result.build.ok


def test_a_program_cannot_stand_in_for_it(grader: Grader) -> None:
    """A module of the program's named like the crate's file does not replace the sentinel: the run
    still needs the real nonce, and this program's early exit is caught as before."""
    source = (
        'pub mod rg_sentinel {\n    pub fn done(_: &str) {\n        println!("\\nRG_SENTINEL_0");\n    }\n}\n'
        + PROGRAM.replace("n * 2", "{ if n == 21 { std::process::exit(0) } n * 2 }")
    )
    result = grade_one(grader, id="stand-in", source=source, tests=TESTS)
    assert result.status != "ok" and not result.tests.hidden.ok


def test_batched_and_fallback_and_cargo_agree(grader: Grader, fallback_grader: Grader, cargo_grader: Grader) -> None:
    jobs = [
        {
            "id": f"{kind}-{i}",
            "source": PROGRAM.replace("2", str(2 + (kind == "wrong"))) + OWN + f"// {i}\n",
            "tests": TESTS,
        }
        for i in range(3)
        for kind in ("right", "wrong")
    ]
    verdicts = {}
    for name, g in (("fast", grader), ("rlimits", fallback_grader), ("cargo", cargo_grader)):
        verdicts[name] = [(r.status, r.tests.hidden.passed, r.tests.own.passed) for r in g.grade(jobs)]
    assert verdicts["fast"] == verdicts["rlimits"] == verdicts["cargo"]
    assert [v[0] for v in verdicts["fast"]] == ["ok", "test_failure"] * 3
