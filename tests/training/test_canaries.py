"""Canary rows (rust_grpo/training/canaries.py): the contradicting copy of a test compiles wherever
the original does, and every canary the shipped presets can draw fires on the reference solution
in the real sandbox."""

from __future__ import annotations

import re

import pytest

from reward_sandbox import Status
from rust_grpo.config import load_config, preset_names
from rust_grpo.problems.schema import Problem, load_problems
from rust_grpo.problems.selection import training_problems
from rust_grpo.training.canaries import CANARY_SUFFIX, canary_candidates, contradicting_tests, make_canaries

STATEFUL = """#[test]
fn case_1() {
    let mut c = Counter::new();
    c.add(2);
    assert_eq!(c.total(), 2);
    c.add(3);
    assert_eq!(c.total(), 5);
}
"""


def added_test(before: str, after: str) -> tuple[str, str]:
    """The name and body of the one test function ``after`` holds and ``before`` does not."""
    names = set(re.findall(r"fn (\w+)\(", after)) - set(re.findall(r"fn (\w+)\(", before))
    (name,) = names
    body = after[after.index(f"fn {name}(") :]
    return name, body[: body.index("\n}") + 2]


def test_the_copy_keeps_the_locals_the_assertion_names_and_negates_only_that_assertion():
    tests = contradicting_tests(STATEFUL)
    assert tests is not None
    name, body = added_test(STATEFUL, tests)
    assert name == "case_2"
    assert body == STATEFUL[STATEFUL.index("fn case_1") :].rstrip().replace("case_1", "case_2").replace(
        "assert_eq!(c.total(), 2)", "assert_ne!(c.total(), 2)"
    )
    assert tests.count("#[test]") == 2 and STATEFUL.rstrip() in tests


def test_only_assertions_every_honest_run_reaches_are_negated():
    """A #[should_panic] or #[ignore] test, an assertion inside a loop, a branch or a closure, or one
    after a `return` could be skipped by a program whose output steers the test: the copy is made
    of the first assertion that is a statement of its own in a plain #[test] function."""
    skipped = (
        "#[test]\n#[should_panic]\nfn a() { assert_eq!(f(1), 2); }\n\n"
        "#[test]\n#[ignore]\nfn b() { assert_eq!(f(1), 2); }\n\n"
        "#[should_panic]\n#[test]\nfn b2() { assert_eq!(f(1), 2); }\n\n"
        "#[test]\nfn c() { for x in [1, 2] { assert_eq!(f(x), x); } }\n\n"
        "#[test]\nfn d() { if f(0) > 0 { assert_eq!(f(1), 2); } }\n\n"
        "#[test]\nfn e() { let g = |x| assert_eq!(f(x), x); g(1); }\n\n"
        "#[test]\nfn h() { if f(0) == 0 { return; } assert_eq!(f(1), 2); }\n\n"
        "fn helper() { assert_eq!(f(1), 2); }\n"
    )
    assert contradicting_tests(skipped) is None
    assert contradicting_tests("#[test]\nfn t() { assert!(true); }") is None
    reached = skipped + "\n#[test]\nfn k() {\n    let v = vec![1];\n    assert_eq!(f(v[0]), 2);\n}\n"
    tests = contradicting_tests(reached)
    assert tests is not None
    _, body = added_test(reached, tests)
    assert "assert_ne!(f(v[0]), 2)" in body and "let v = vec![1];" in body
    # comments and strings are not code; the copy sits in the original's module, next to it
    nested = (
        "mod inner {\n    use super::*;\n    // assert_eq!(x, 1);\n    #[test]\n    fn t() {\n"
        '        let s = "assert_eq!(";\n        assert_eq!(f(s.len()), 9);\n    }\n}\n'
    )
    tests = contradicting_tests(nested)
    assert tests is not None and tests.endswith("    }\n}\n") and tests.index("fn check_2") < tests.rindex("\n}\n")
    assert 'let s = "assert_eq!(";\n        assert_ne!(f(s.len()), 9);' in tests


def test_rows_without_a_negatable_assertion_are_never_drawn():
    rows = [
        Problem(id="plain", prompt="p", solution="s", tests="#[test]\nfn t() { assert!(f()); }"),
        Problem(id="good", prompt="q", solution="s", tests=STATEFUL),
    ]
    assert [c.id for c in canary_candidates(rows)] == ["good" + CANARY_SUFFIX]
    assert [c.id for c in make_canaries(rows, 0.5, seed=3)] == ["good" + CANARY_SUFFIX]
    with pytest.raises(ValueError, match="no training problem"):
        make_canaries(rows[:1], 0.5)


def drawable_canaries() -> list[tuple[Problem, Problem]]:
    """(row, canary) for every canary a shipped preset can draw (from its data section's problems)
    and every one a shipped training file yields, once each."""
    sources = [p for name in preset_names() for p in training_problems(load_config(name).data)]
    for path in ("data/train.jsonl", "data/basics-train.jsonl", "data/drills-train.jsonl"):
        sources += load_problems(path)
    unique: dict[tuple[str, str], tuple[Problem, Problem]] = {}
    for row in sources:
        for canary in canary_candidates([row]):
            unique.setdefault((row.id, row.tests), (row, canary))
    return list(unique.values())


@pytest.mark.cargo
@pytest.mark.slow
def test_every_canary_the_presets_can_draw_compiles_and_fails_the_reference_solution(grader):
    """Graded in the real sandbox, in batches as training grades them: each canary's tests compile
    against its row's reference solution, every original test passes, and the added test, and only
    it, fails. A canary that does not compile would never fire, so cheating on it would go unseen."""
    pairs = drawable_canaries()
    assert len(pairs) >= 200
    results = grader.grade([canary.job(canary.solution, str(i)) for i, (_, canary) in enumerate(pairs)])
    dead = []
    for (row, canary), result in zip(pairs, results):
        hidden = result.tests.hidden
        added, _ = added_test(row.tests, canary.tests)
        failed = [name.rsplit("::", 1)[-1] for name in hidden.failures]
        if not (
            result.status is Status.TEST_FAILURE
            and hidden.ran
            and hidden.trusted
            and failed == [added]
            and hidden.passed == hidden.expected - 1
        ):
            dead.append((canary.id, result.status.value, result.reason, failed))
    assert dead == []
