"""Red-team checks of the prebuilt sentinel crate (``compile/sentinel.py``) beyond ``test_sentinel_crate.py``.

A program may try to reach the crate by its real name through the crate loader (``extern crate``,
which searches differently from ``::name``), to read the rlib (it lies among the program's sources
while it compiles), or to find it while its tests run; and the crate's own name must never stand in
the way of a job's crate that happens to share it (integration mode links both into one test crate)."""

from __future__ import annotations

import pytest

from reward_sandbox import Grader
from reward_sandbox.compile.sentinel import RLIB, sentinel_rlib

from ..conftest import grade_one

PROGRAM = "pub fn double(n: i64) -> i64 {\n    n * 2\n}\n"
TESTS = "#[test]\nfn hidden() {\n    assert_eq!(double(21), 42);\n}\n"


@pytest.mark.parametrize("edition", ["2015", "2021"])
@pytest.mark.parametrize(
    "reach",
    [
        'extern crate rg_sentinel;\npub fn end() {\n    rg_sentinel::done("/tmp/x");\n}\n',
        'pub mod m {\n    extern crate rg_sentinel as s;\n    pub fn end() {\n        s::done("/tmp/x");\n    }\n}\n',
    ],
    ids=["root", "module"],
)
def test_extern_crate_by_its_real_name_does_not_find_it(grader: Grader, edition: str, reach: str) -> None:
    """``extern crate`` asks the crate loader, which also matches crates already loaded: the crate
    loaded under the job's random alias must not answer to its own name ``rg_sentinel``."""
    result = grade_one(grader, id=f"extern-{edition}", source=reach + PROGRAM, tests=TESTS, edition=edition)
    assert result.status == "compile_error" and not result.build.ok
    assert any(d.code == "E0463" for d in result.build.diagnostics)  # can't find crate


def test_the_rlib_is_readable_while_compiling_but_holds_no_secret(grader: Grader) -> None:
    """``include_bytes!`` of the rlib (a file next to the program's) compiles: it is no secret, the
    same for every job of the process, and names no job (the tag, the alias, the nonce's path are
    the sentinel source's, never the crate's) and no host path."""
    rlib = sentinel_rlib()
    assert rlib is not None
    for job_specific in (b"_k", b".rg/", b"_hidden", b"zzzz_"):
        assert job_specific not in rlib
    assert b"rg-sentinel-" not in rlib  # nor the host's temporary directory it was built in
    source = PROGRAM + (
        f'pub const RLIB: &[u8] = include_bytes!("{RLIB}");\n'
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn own() {\n"
        '        assert!(super::RLIB.starts_with(b"!<arch>\\n"));\n    }\n}\n'
    )
    result = grade_one(grader, id="include-rlib", source=source, tests=TESTS)
    assert result.status == "ok", result.reason
    assert (result.tests.hidden.passed, result.tests.own.passed) == (1, 1)


@pytest.mark.parametrize("isolation", ["auto", "rlimits"])
def test_the_rlib_is_gone_before_tests_run(grader: Grader, fallback_grader: Grader, isolation: str) -> None:
    """Tests run from the sources' directory, where the rlib was: it is deleted with the sources."""
    g = grader if isolation == "auto" else fallback_grader
    own = (
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn own() {\n"
        f'        assert!(std::fs::metadata("{RLIB}").is_err());\n'
        f'        assert!(!std::path::Path::new("{RLIB}").exists());\n    }}\n}}\n'
    )
    result = grade_one(g, id=f"gone-{isolation}", source=PROGRAM + own, tests=TESTS)
    assert result.status == "ok", result.reason
    assert (result.tests.hidden.passed, result.tests.own.passed) == (1, 1)


@pytest.mark.parametrize("edition", ["2015", "2021"])
def test_a_job_crate_named_like_the_sentinel_crate_still_links(grader: Grader, edition: str) -> None:
    """Integration mode links the program's library and the sentinel crate into one test crate. A
    job whose crate is called ``rg_sentinel`` (the rlib's own name) must grade as under cargo,
    which has no sentinel crate: ``ok`` when right, ``test_failure`` when wrong, never "the hidden
    tests do not compile" for colliding crate ids."""
    tests = ("extern crate rg_sentinel;\n" if edition == "2015" else "") + "use rg_sentinel::*;\n" + TESTS
    common = {"crate_name": "rg_sentinel", "test_mode": "integration", "edition": edition, "tests": tests}
    right = grade_one(grader, id=f"named-{edition}", source=PROGRAM, **common)
    assert right.status == "ok", right.reason
    assert right.tests.hidden.passed == 1
    wrong = grade_one(grader, id=f"named-wrong-{edition}", source=PROGRAM.replace("* 2", "* 3"), **common)
    assert wrong.status == "test_failure" and wrong.tests.hidden.failed == 1
    assert "colliding" not in (wrong.reason or "")
