"""Reward functions on real completions, graded by the real sandbox in one pass per batch."""

import logging

import pytest

from reward_sandbox import Status
from rust_grpo.rewards import REWARD_NAMES, RewardContext, batch_metrics, build_reward_functions

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


def rewards_for(grader, completions, tests=HIDDEN):
    context = RewardContext(CountingGrader(grader))
    funcs, _ = build_reward_functions(context, {})
    columns = {"tests": [tests] * len(completions), "test_mode": ["unit"] * len(completions)}
    table = {f.__name__: f(prompts=[None] * len(completions), completions=completions, **columns) for f in funcs}
    return table, context


def test_every_component_from_one_sandbox_pass(grader):
    completions = [GOOD, TRIVIAL, EXIT_HACK, WRONG, BROKEN, NO_CODE]
    table, context = rewards_for(grader, completions)
    assert context.grader.calls == 1 and context.grader.jobs == 5  # NO_CODE is never sent
    assert list(table) == list(REWARD_NAMES)
    good, trivial, hack, wrong, broken, no_code = zip(*table.values())
    assert good == (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    assert trivial[2] == 0.0 and trivial[5] == 0.0  # no meaningful tests -> no test credit
    assert trivial[6] == 1.0  # ... but the hidden tests still pass
    assert hack[5] == 0.0 and hack[6] == 0.0  # process::exit earns nothing
    assert wrong[3] == 1.0 and wrong[6] == 0.0 and wrong[2] == 0.0
    assert broken[3] == 0.0 and broken[4] == 0.0 and broken[6] == 0.0
    assert no_code == (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_partial_hidden_credit_and_rows_without_hidden_tests(grader):
    half = answer("pub fn add(a: i32, b: i32) -> i32 {\n    if a < 0 { 7 } else { a + b }\n}")
    table, _ = rewards_for(grader, [half])
    assert table["hidden_tests"] == [0.5]
    table, _ = rewards_for(grader, [GOOD], tests="")
    assert table["hidden_tests"] == [None]  # not applicable: TRL drops it instead of counting 0


def test_a_dead_grader_gives_unknown_not_zero(caplog):
    class Dead:
        def grade(self, items):
            raise ConnectionError("reward server unreachable")

    context = RewardContext(Dead())
    funcs, _ = build_reward_functions(context, {})
    with caplog.at_level(logging.ERROR, logger="rust_grpo"):
        values = {f.__name__: f(prompts=[None], completions=[GOOD], tests=[HIDDEN])[0] for f in funcs}
    assert values["build"] is None and values["hidden_tests"] is None and values["own_tests"] is None
    assert values["format"] == 1.0  # format needs no sandbox
    assert "reward grading failed" in caplog.text and "unreachable" in caplog.text


def test_batch_metrics_report_rates_and_sandbox_health(grader):
    context = RewardContext(grader)
    evaluations = context.evaluate([GOOD, BROKEN, NO_CODE], {"tests": [HIDDEN] * 3})
    m = batch_metrics(evaluations)
    assert m["rates/build"] == pytest.approx(1 / 3) and m["rates/hidden_tests_pass"] == pytest.approx(1 / 3)
    assert m["rates/format"] == pytest.approx(2 / 3) and m["sandbox/timeouts"] == 0
    assert evaluations[1].result.status is Status.COMPILE_ERROR
