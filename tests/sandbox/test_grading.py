"""Verdicts on ordinary programs, with the real toolchain in the real sandbox."""

import pytest

from reward_sandbox import Grader, Status
from reward_sandbox.cache import ResultCache

from ..conftest import TEST_LIMITS, grade_one

pytestmark = pytest.mark.cargo

ADD = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
OWN_TESTS = """
#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn adds() { assert_eq!(add(2, 3), 5); }
    #[test]
    fn wrong() { assert_eq!(add(2, 2), 5); }
}
"""


def test_correct_program_with_hidden_tests_is_ok(grader):
    r = grade_one(grader, source=ADD, tests="#[test]\nfn h() { assert_eq!(add(1, 1), 2); }")
    assert r.status is Status.OK, r.reason
    assert r.build.ok and r.clippy.ok
    assert (r.tests.counts.passed, r.tests.counts.failed) == (1, 0)
    assert r.tests.hidden.passed == 1 and r.tests.own.total == 0
    assert r.isolation in ("bwrap", "rlimits")


def test_own_and_hidden_tests_are_counted_apart(grader):
    r = grade_one(grader, source=ADD + OWN_TESTS, tests="#[test]\nfn h() { assert_eq!(add(1, 1), 2); }")
    assert r.status is Status.TEST_FAILURE
    assert (r.tests.own.passed, r.tests.own.failed) == (1, 1)
    assert (r.tests.hidden.passed, r.tests.hidden.failed) == (1, 0)
    assert r.tests.failures == ("tests::wrong",)
    assert r.tests.trusted


def test_compile_error_reports_code_message_and_line(grader):
    r = grade_one(grader, source='pub fn f() -> i32 {\n    let x: i32 = "no";\n    x\n}\n')
    assert r.status is Status.COMPILE_ERROR
    assert not r.build.ok and r.build.errors == 1
    (d,) = r.build.diagnostics
    assert d.code == "E0308" and d.line == 2 and "mismatched types" in d.message
    assert "E0308" in r.output_tail


def test_clippy_warnings_are_counted_but_do_not_fail_the_build(grader):
    r = grade_one(grader, source="pub fn f(v: &Vec<i32>) -> usize {\n    v.len()\n}\n")
    assert r.status is Status.OK and r.build.ok
    assert not r.clippy.ok and r.clippy.warnings == 1
    assert r.clippy.diagnostics[0].code == "clippy::ptr_arg" and r.clippy.diagnostics[0].line == 1


def test_warnings_in_hidden_tests_are_not_blamed_on_the_program(grader):
    tests = "#[test]\nfn h() {\n    let unused = 1;\n    assert_eq!(add(1, 1), 2);\n}\n"
    r = grade_one(grader, source=ADD, tests=tests)
    assert r.status is Status.OK and r.clippy.ok and r.clippy.warnings == 0


def test_program_that_builds_but_breaks_the_tests(grader):
    r = grade_one(
        grader, source="pub fn add(a: i64) -> i64 { a }", tests="#[test]\nfn h() { assert_eq!(add(1, 1), 2); }"
    )
    assert r.status is Status.TEST_FAILURE
    assert r.build.ok
    assert "tests do not compile" in r.reason


def test_integration_mode_uses_the_crate_by_name(grader):
    tests = "use adder::*;\n\n#[test]\nfn a() { assert_eq!(add(1, 2), 3); }\n#[test]\n#[ignore]\nfn b() { assert_eq!(add(1, 2), 4); }\n"
    r = grade_one(grader, source=ADD, tests=tests, test_mode="integration", crate_name="adder")
    assert r.status is Status.OK, r.reason
    assert (r.tests.counts.passed, r.tests.counts.ignored) == (1, 1)
    r = grade_one(grader, source=ADD, tests=tests, test_mode="integration", crate_name="adder", include_ignored=True)
    assert r.status is Status.TEST_FAILURE and r.tests.counts.failed == 1


def test_main_mode_runs_multipl_e_style_asserts(grader):
    tests = "fn main() {\n    let candidate = add;\n    assert_eq!(candidate(2, 2), 4);\n}\n"
    assert grade_one(grader, source=ADD, tests=tests, test_mode="main").status is Status.OK
    bad = "fn main() {\n    assert_eq!(add(2, 2), 5);\n}\n"
    r = grade_one(grader, source=ADD, tests=bad, test_mode="main")
    assert r.status is Status.TEST_FAILURE and r.tests.counts.failed == 1


def test_results_keep_input_order_and_bad_records_do_not_stop_the_batch(grader):
    records = [
        {"id": "good", "source": ADD},
        {"id": "bad", "source": ADD, "test_mode": "nope"},
        {"source": 5},
        {"id": "broken", "source": "pub fn f( {"},
    ]
    results = grader.grade(records)
    assert [r.id for r in results] == ["good", "bad", "#2", "broken"]
    assert [r.status for r in results] == [Status.OK, Status.INVALID_INPUT, Status.INVALID_INPUT, Status.COMPILE_ERROR]
    assert "test_mode" in results[1].reason and "record 1" in results[1].reason


def test_duplicates_compile_once_and_the_cache_answers_repeats():
    cache = ResultCache()
    with Grader(workers=2, limits=TEST_LIMITS, cache=cache) as g:
        first = g.grade([{"id": "a", "source": ADD}, {"id": "b", "source": ADD}])
        assert [r.id for r in first] == ["a", "b"]
        assert [r.cached for r in first] == [False, True]
        again = g.grade([{"id": "c", "source": ADD}])
    assert again[0].cached and again[0].id == "c" and again[0].status is Status.OK
    assert cache.hits == 1


def test_a_cache_directory_that_cannot_be_written_does_not_fail_grading(tmp_path):
    """A full or unwritable cache disk loses the cache, never the verdicts."""
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    with Grader(workers=1, limits=TEST_LIMITS, cache=ResultCache(blocked)) as g:
        results = g.grade([{"id": "a", "source": ADD}, {"id": "b", "source": ADD}])
    assert [(r.id, r.status) for r in results] == [("a", Status.OK), ("b", Status.OK)]


def test_disk_cache_survives_a_new_grader(tmp_path):
    with Grader(workers=1, limits=TEST_LIMITS, cache=ResultCache(tmp_path)) as g:
        assert not g.grade([{"id": "a", "source": ADD}])[0].cached
    with Grader(workers=1, limits=TEST_LIMITS, cache=ResultCache(tmp_path)) as g:
        r = g.grade([{"id": "z", "source": ADD}])[0]
    assert r.cached and r.id == "z" and r.status is Status.OK
