"""Reward functions on real completions, graded by the real sandbox in one pass per batch."""

import logging

import pytest

from reward_sandbox import Status
from rust_grpo.problems.schema import Problem
from rust_grpo.rewards.context import RewardContext
from rust_grpo.rewards.functions import REWARD_NAMES
from rust_grpo.rewards.trl_rewards import build_reward_functions
from rust_grpo.rewards.verdict import batch_metrics

pytestmark = pytest.mark.cargo

HIDDEN = "#[test]\nfn h1() { assert_eq!(add(2, 3), 5); }\n#[test]\nfn h2() { assert_eq!(add(-1, 1), 0); }\n"


def answer(code: str, think: str = "Add.") -> str:
    return f"<think>{think}</think>\n```rust\n{code}\n```"


GOOD = answer("""pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small() {
        assert_eq!(add(1, 2), 3);
    }

    #[test]
    fn negative() {
        assert_eq!(add(-2, -3), -5);
    }
}""")
TRIVIAL = answer("""pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn t() {
        assert!(true);
    }

    #[test]
    fn u() {
        assert_eq!(1, 1);
    }
}""")
EXIT_HACK = answer("""pub fn add(a: i32, b: i32) -> i32 {
    if a == b { std::process::exit(0) }
    a * b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t() {
        assert_eq!(add(2, 2), 4);
    }
}""")
WRONG = answer("pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}")
BROKEN = answer("pub fn add(a: i32, b: i32) -> i32 {\n    a +\n}")
NO_CODE = "<think>I do not know.</think>"


class CountingGrader:
    """The real grader, with a count of how many grading passes it was asked for."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0
        self.jobs = 0

    def grade(self, items):
        self.calls += 1
        self.jobs += len(items)
        return self.inner.grade(items)


def row(tests=HIDDEN, **fields):
    """The problem every completion of a test answers (TRL's ``id`` column names it)."""
    return Problem(id="add", prompt="Add.", tests=tests, **fields)


def rewards_for(grader, completions, tests=HIDDEN):
    context = RewardContext(CountingGrader(grader), [row(tests)])
    funcs, _ = build_reward_functions(context, {})
    ids = ["add"] * len(completions)
    table = {f.__name__: f(prompts=[None] * len(completions), completions=completions, id=ids) for f in funcs}
    return table, context


def test_every_component_from_one_grading_of_each_completion(grader):
    completions = [GOOD, TRIVIAL, EXIT_HACK, WRONG, BROKEN, NO_CODE]
    table, context = rewards_for(grader, completions)
    # one parallel pass for the 5 programs (NO_CODE is never sent), one for the three wrong versions of
    # `add` (default, perturbed, todo) of the one program with a meaningful own test that passed (GOOD:
    # TRIVIAL's test nothing) and, if GOOD was graded in a batch, its own tests once more as its wrong
    # versions are graded (alone), shared by all reward functions
    again = sum(e.own_result is not None for e in context.evaluate(completions, [row()] * len(completions)))
    assert again == ("batch" in context.graded[-1].evaluations[0].result.measures)
    assert context.grader.calls == 2 and context.grader.jobs == 5 + 3 + again
    assert list(table) == list(REWARD_NAMES)
    good, trivial, hack, wrong, broken, no_code = zip(*table.values())
    assert good[:10] == (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5)  # two distinct assert lines: asserts 0.5
    assert trivial[2] == 0.0 and trivial[5] == 0.0  # no meaningful tests -> no test credit
    assert trivial[6] == 1.0  # ... but the hidden tests still pass
    assert hack[5] == 0.0 and hack[6] == 0.0  # process::exit earns nothing
    assert wrong[3] == 1.0 and wrong[6] == 0.0 and wrong[2] == 0.0
    assert broken[3] == 0.0 and broken[4] == 0.0 and broken[6] == 0.0
    assert no_code == (0.0,) * len(REWARD_NAMES)


def test_partial_hidden_credit_and_rows_without_hidden_tests(grader):
    half = answer("pub fn add(a: i32, b: i32) -> i32 {\n    if a < 0 { 7 } else { a + b }\n}")
    table, _ = rewards_for(grader, [half])
    assert table["hidden_tests"] == [0.5]
    table, _ = rewards_for(grader, [GOOD], tests="")
    assert table["hidden_tests"] == [None]  # not applicable: TRL drops it instead of counting 0


def test_a_program_that_compiles_without_the_asked_function_does_not_build_as_an_answer(grader):
    """Compiling alone is not enough when the row has hidden tests: they must compile against the
    program (the asked function is there, under its name, callable as the tests call it)."""
    missing = answer("pub struct Adder { pub a: i32 }")
    renamed = answer("pub fn plus(a: i32, b: i32) -> i32 {\n    a + b\n}")
    table, context = rewards_for(grader, [missing, renamed, WRONG])
    assert table["build"] == [0.0, 0.0, 1.0]  # a wrong body still builds: the hidden tests judge it
    assert table["clippy"][:2] == [0.0, 0.0] and table["hidden_tests"] == [0.0, 0.0, 0.0]
    evaluations = context.evaluate([missing, renamed, WRONG], [row()] * 3)
    assert [e.result.build.ok for e in evaluations] == [True, True, True]  # each compiles alone
    assert batch_metrics(evaluations)["rates/build"] == pytest.approx(1 / 3)
    table, _ = rewards_for(grader, [missing], tests="")
    assert table["build"] == [1.0]  # no hidden tests: compiling alone is all there is to check


def test_a_dead_grader_makes_every_reward_unknown_so_trl_drops_the_completion(caplog):
    """TRL sums the rewards that are not None: if format alone stayed a number, a sandbox fault would
    score exactly like broken code. The real HTTP client, pointed at a port nobody listens on."""
    from reward_sandbox.service.client import RemoteGrader

    context = RewardContext(RemoteGrader("http://127.0.0.1:9", retries=0, timeout_s=2), [row()])
    funcs, _ = build_reward_functions(context, {})
    with caplog.at_level(logging.ERROR, logger="rust_grpo"):
        values = {f.__name__: f(prompts=[None, None], completions=[GOOD, NO_CODE], id=["add"] * 2) for f in funcs}
    assert all(v[0] is None for v in values.values()), values
    assert values["format"][1] == 0.0  # nothing was sent for a completion without code: it is known
    assert batch_metrics(context.evaluate([GOOD, NO_CODE], [row()] * 2))["sandbox/unknown"] == 1
    assert "reward grading failed" in caplog.text


def test_batch_metrics_report_rates_and_sandbox_health(grader):
    context = RewardContext(grader)
    evaluations = context.evaluate([GOOD, BROKEN, NO_CODE], [row()] * 3)
    m = batch_metrics(evaluations)
    assert m["rates/build"] == pytest.approx(1 / 3) and m["rates/hidden_tests_pass"] == pytest.approx(1 / 3)
    assert m["rates/format"] == pytest.approx(2 / 3) and m["sandbox/timeouts"] == 0
    assert evaluations[1].result.status is Status.COMPILE_ERROR


ADD = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
CONSTANT = "pub fn add(_a: i32, _b: i32) -> i32 {\n    5\n}\n"
TRICKS = {
    "should-panic": "#[test]\n    #[should_panic]\n    fn t() { assert_eq!(add(2, 3), 999); }",
    "catch-unwind": "#[test]\n    fn t() { let _ = std::panic::catch_unwind(|| assert_eq!(add(2, 3), 999)); }",
    "self-compare": "#[test]\n    fn t() { assert!(add(2, 3) == add(2, 3)); assert_eq!(add(1, 1), add(1, 1)); }",
    "any-implementation": "#[test]\n    fn t() { let x = add(2, 3); assert!(x == x); assert!(add(0, 0) <= i32::MAX); }",
}


def with_tests(code: str, body: str) -> str:
    return answer(
        f"{code}\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    {body}\n\n    #[test]\n    fn u() {{ let _ = add(1, 1); }}\n}}"
    )


@pytest.mark.parametrize("trick", list(TRICKS))
@pytest.mark.parametrize(
    "program",
    [ADD, CONSTANT, "pub fn add(_a: i32, _b: i32) -> i32 {\n    todo!()\n}\n"],
    ids=["right", "constant", "todo"],
)
def test_own_tests_that_catch_nothing_earn_nothing(grader, trick, program):
    table, _ = rewards_for(grader, [with_tests(program, TRICKS[trick])])
    assert table["own_tests"] == [0.0] and table["tests_present"] == [0.0], table


def test_honest_own_tests_on_the_right_program_earn_credit_and_on_a_wrong_one_do_not(grader):
    honest = (
        "#[test]\n    fn t() { assert_eq!(add(2, 3), 5); }\n\n    #[test]\n    fn v() { assert_eq!(add(-4, 1), -3); }"
    )
    wrong = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n"
    table, _ = rewards_for(grader, [with_tests(ADD, honest), with_tests(wrong, honest)])
    assert table["tests_present"] == [1.0, 0.0]
    assert table["own_tests"] == [pytest.approx(2 / 3), 0.0]  # 2 of its 3 tests catch a bug (u checks nothing)


def test_source_attributes_cannot_switch_clippy_off(grader):
    lint = "pub fn count(v: &Vec<i32>) -> usize {\n    return v.len();\n}\n"
    table, _ = rewards_for(grader, [answer(lint), answer("#![allow(clippy::all, warnings)]\n" + lint)], tests="")
    assert table["clippy"][0] == table["clippy"][1] == pytest.approx(0.4)  # two warnings either way


def test_the_clippy_reward_falls_with_every_warning(grader):
    programs = [
        ADD,
        "pub fn f(v: &Vec<i32>) -> usize {\n    v.len()\n}\n",
        "pub fn f(v: &Vec<i32>) -> usize {\n    return v.len();\n}\n",
    ]
    table, _ = rewards_for(grader, [answer(p) for p in programs], tests="")
    assert table["clippy"] == [1.0, 0.5, pytest.approx(0.4)]


def test_own_tests_of_exercism_style_rows_are_graded_before_they_are_paid(grader):
    tests = "use adder::*;\n#[test]\nfn h() { assert_eq!(add(2, 3), 5); }\n"
    honest = "#[test]\n    fn t() { assert_eq!(add(2, 3), 5); }"
    context = RewardContext(grader, [row(tests, test_mode="integration", crate_name="adder")])
    funcs, _ = build_reward_functions(context, {})
    completions = [with_tests(ADD, honest), with_tests(ADD, TRICKS["should-panic"])]
    table = {f.__name__: f(prompts=[None] * 2, completions=completions, id=["add"] * 2) for f in funcs}
    assert table["hidden_tests"] == [1.0, 1.0]
    assert table["tests_present"] == [0.5, 0.0] and table["own_tests"][1] == 0.0


def test_oxens_rewards_and_answer_format(grader):
    from rust_grpo.problems.answer_format import OXEN

    oxen_answer = (
        "```rust\n/// Add the two numbers.\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n"
        "    use super::*;\n\n    #[test]\n    fn adds() {\n        assert_eq!(add(1, 2), 3);\n        assert_eq!(add(-1, 1), 0);\n"
        "        assert!(add(2, 2) == 4);\n    }\n}\n```"
    )
    context = RewardContext(grader, [row("")], answer_format=OXEN)
    funcs, _ = build_reward_functions(context, {})
    table = {f.__name__: f(prompts=[None] * 2, completions=[oxen_answer, GOOD], id=["add"] * 2) for f in funcs}
    assert table["format"] == [1.0, 1.0]  # one ```rust block is the whole oxen format
    assert table["test_block"] == [1.0, 1.0] and table["non_empty"] == [1.0, 1.0]
    assert table["asserts"] == [0.75, 0.5]  # 0.25 per distinct assert line, up to 1
    table = {
        f.__name__: f(prompts=[None], completions=[oxen_answer], id=["add"])
        for f in build_reward_functions(RewardContext(grader, [row("")]), {})[0]
    }
    assert table["format"] == [0.5]  # in the think format the same answer lacks its reasoning block
