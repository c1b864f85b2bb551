"""Repair episodes with the real sandbox: feedback says what cargo said, never what the hidden tests hold."""

from __future__ import annotations

import pytest

from rust_grpo.config import ConfigError, RewardConfig, load_config
from rust_grpo.problems.schema import Problem
from rust_grpo.repair.episodes import Episode, feedback, run_episodes
from rust_grpo.rewards.context import RewardContext

pytestmark = [pytest.mark.cargo]

MARKER = "ZQXJ_HIDDEN_7731"
HIDDEN = f"""
#[test]
fn adds_small() {{
    let secret = "{MARKER}_input";
    assert!(add(2, 3) == 5 && !secret.is_empty(), "{MARKER} custom message");
}}

#[test]
fn adds_large() {{
    assert_eq!(add(4000, 777), 4777, "{MARKER} eq message {{}}", "{MARKER}_arg");
}}

#[test]
fn adds_text() {{
    assert_eq!(format!("{{}}{MARKER}_got", add(1, 1)), "2{MARKER}_got");
}}
"""
PROBLEM = Problem(id="add", prompt="Write add.", tests=HIDDEN)


def answer(code: str) -> str:
    return f"<think>\nadd two numbers\n</think>\n```rust\n{code}\n```"


COMPILE_ERROR = answer("pub fn add(a: i32, b: i32) -> i32 {\n    a + b + undefined_thing\n}")
WRONG = answer(
    'pub fn add(a: i32, b: i32) -> i32 {\n    println!("{} {}", a, b);\n    a * b\n}\n\n'
    "#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn mine() {\n"
    "        assert_eq!(add(3, 4), 7);\n    }\n}"
)
RIGHT = answer(
    "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n"
    "    #[test]\n    fn mine() {\n        assert_eq!(add(3, 4), 7);\n    }\n}"
)
WRONG_SIGNATURE = answer("pub fn add(a: &str) -> usize {\n    a.len()\n}")


class Scripted:
    """A policy that gives fixed answers, one list per episode, and records what it was told."""

    def __init__(self, scripts: list[list[str]]) -> None:
        self.scripts = scripts
        self.told: list[list[str]] = [[] for _ in scripts]
        self.turn = [0] * len(scripts)

    def answer(self, episodes: list[int]) -> list[str]:
        out = []
        for i in episodes:
            out.append(self.scripts[i][self.turn[i]])
            self.turn[i] += 1
        return out

    def tell(self, episode: int, message: str) -> None:
        self.told[episode].append(message)


def run(grader, scripts, max_turns=2, problem=PROBLEM):
    policy = Scripted(scripts)
    context = RewardContext(grader)
    episodes = run_episodes(policy, [problem] * len(scripts), context, RewardConfig().weights, max_turns)
    return policy, episodes


def test_a_compile_error_gets_rustcs_diagnostics_in_the_second_turn(grader):
    policy, (episode,) = run(grader, [[COMPILE_ERROR, RIGHT]])
    (told,) = policy.told[0]
    assert "does not compile" in told and "line 2: error[E0425]" in told and "undefined_thing" in told
    assert [t.passed for t in episode.turns] == [False, True]
    first, final = episode.turns
    assert first.feedback == told and final.feedback is None
    assert first.rewards["build"] == 0 and final.rewards["hidden_tests"] == 1.0
    assert final.reward is not None and first.reward is not None and final.reward > first.reward
    assert episode.bonus(0.5) == 0.5 and episode.bonus(0.0) == 0.0


def test_failing_tests_are_named_own_panics_shown_and_no_hidden_text_ever_leaks(grader):
    """The hidden tests hold a marker in an `assert!` expression, a custom message, an argument of a
    message and an expected value; the program prints its (hidden) inputs. None may reach feedback."""
    policy, episodes = run(grader, [[WRONG, WRONG, WRONG], [WRONG_SIGNATURE, COMPILE_ERROR, RIGHT]], max_turns=3)
    wrong = policy.told[0][0]
    assert "3 of 3 hidden tests failed" in wrong and "adds_small" in wrong and "adds_text" in wrong
    assert "1 of your own tests failed" in wrong and "- tests::mine" in wrong
    assert "left: 12" in wrong and "right: 7" in wrong  # the model's own assert_eq! values
    assert "hidden tests do not compile against it" in policy.told[1][0]
    assert len(policy.told[0]) == 2 and len(episodes[0].turns) == 3 and episodes[0].final.feedback is None
    for message in [m for told in policy.told for m in told]:
        assert MARKER not in message and "rg" not in message.split("hidden tests failed")[-1][:3]
        assert "4000" not in message and "4777" not in message  # no hidden input or expected value
    assert [len(e.turns) for e in episodes] == [3, 3] and episodes[1].final.passed


def test_feedback_is_bounded_and_passing_or_unknown_answers_get_none(grader):
    long_error = answer("pub fn add(a: i32, b: i32) -> i32 {\n" + "    let _ = x;\n" * 40 + "    a + b\n}")
    policy, (episode,) = run(grader, [[long_error, RIGHT]])
    text = feedback(episode.turns[0].evaluation, max_chars=200)
    assert text is not None and len(text) <= 200 and text.endswith("whole corrected program.")
    assert "(and 37 more)" in policy.told[0][0]
    assert feedback(episode.final.evaluation) is None


def test_an_answer_without_code_is_told_so_and_one_turn_means_no_feedback(grader):
    policy, (episode,) = run(grader, [["I would write a function.", RIGHT]])
    assert [t.passed for t in episode.turns] == [False, True]
    assert "No code was graded: no <think>...</think> block; no fenced code block" in policy.told[0][0]
    policy, (single,) = run(grader, [[COMPILE_ERROR]], max_turns=1)
    assert policy.told == [[]] and len(single.turns) == 1 and isinstance(single, Episode)


def test_repair_config_is_validated():
    cfg = load_config("tiny-cpu", ["repair.enabled=true", "repair.max_turns=3"])
    assert cfg.repair.enabled and cfg.repair.max_turns == 3
    for bad, match in (
        ("repair.max_turns=0", "max_turns must be 1 to 8"),
        ("repair.improvement_bonus=-1", "improvement_bonus must be >= 0"),
        ("repair.max_feedback_chars=10", "at least 200"),
        ("repair.max_turn=2", "did you mean max_turns"),
    ):
        with pytest.raises(ConfigError, match=match):
            load_config("tiny-cpu", [bad])


def test_an_answer_the_sandbox_cannot_grade_ends_its_episode_unscored():
    """A dead reward server: no feedback (nothing is known about the code), every reward None."""
    from reward_sandbox import RemoteGrader

    dead = RemoteGrader("http://127.0.0.1:9", retries=0, timeout_s=5.0)
    policy, (episode,) = run(dead, [[COMPILE_ERROR, RIGHT]])
    assert policy.told == [[]] and len(episode.turns) == 1
    assert episode.final.evaluation.unknown and episode.final.reward is None
    assert all(v is None for v in episode.final.rewards.values())


# --- own-test errors come from a build without the hidden tests ---------------------------------

LENGTHS = Problem(
    id="total",
    prompt="Sum the array.",
    tests="#[test]\nfn five() {\n    assert_eq!(total([1, 2, 3, 4, 5]), 15);\n}\n",
)
# compiles alone and with its own tests; the hidden tests' instantiation (N = 5) fails to compile,
# with an error located in the program's own file that names the hidden length
CONST_PANIC = answer(
    "pub fn total<const N: usize>(xs: [i32; N]) -> i32 {\n"
    '    const {\n        if N == 5 {\n            panic!("QZV length probe");\n        }\n    }\n'
    "    xs.iter().sum()\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n"
    "    #[test]\n    fn three() {\n        assert_eq!(total([1, 2, 3]), 6);\n    }\n}"
)
BROKEN_OWN_TESTS = answer(
    "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n"
    "    #[test]\n    fn mine() {\n        assert_eq!(add(1, 1), not_defined_here());\n    }\n}"
)


def test_errors_only_the_hidden_tests_cause_are_never_quoted_even_in_the_programs_own_file(grader):
    """A program generic over a const length panics at compile time for N == 5: the build holding
    its own tests and the hidden tests fails with a post-monomorphization error in the program's
    own file that tells the hidden length (its message is the one the N == 5 branch gives). Feedback gives the fixed sentence for
    hidden tests that do not compile, and nothing of that build's errors."""
    policy, (episode,) = run(grader, [[CONST_PANIC, CONST_PANIC]], problem=LENGTHS)
    first = episode.turns[0].evaluation
    assert first.result is not None and first.result.build.ok and not first.result.tests.hidden.ran
    leaked = first.result.tests.own_output
    assert "QZV" in leaked  # what the sandbox's build with the hidden tests said: N == 5 held there
    assert first.own_result is not None and first.own_result.tests.own.ok  # its own tests build and pass alone
    (told,) = policy.told[0]
    assert "hidden tests do not compile against it" in told
    assert "5" not in told and "QZV" not in told and "E0080" not in told and "total" not in told
    assert not any(line.strip() and line.strip() in told for line in leaked.splitlines())


def test_own_tests_that_do_not_compile_alone_still_get_their_errors_quoted(grader):
    policy, (episode,) = run(grader, [[BROKEN_OWN_TESTS, RIGHT]])
    (told,) = policy.told[0]
    assert "3 of 3 hidden tests failed" in told
    assert "Your #[cfg(test)] tests do not compile" in told and "error[E0425]" in told
    assert "not_defined_here" in told
    assert episode.turns[0].evaluation.own_result is not None and episode.final.passed
    assert MARKER not in told


def test_without_a_build_alone_nothing_of_the_build_with_the_hidden_tests_is_quoted():
    """Feedback read straight from a first grading (no grading alone, or one the sandbox could not
    do): the own tests' errors there may be the hidden tests', so only a fixed sentence; and a
    compile stopped by a limit quotes no error (it may be the build that held the hidden tests)."""
    from reward_sandbox import Result, Status
    from reward_sandbox.results import BuildReport, Diagnostic, SuiteReport, TestReport
    from rust_grpo.problems.parsing import parse_completion
    from rust_grpo.rewards.verdict import Evaluation

    leak = "line 3: error[E0080]: evaluation of `total::<5>::{constant#0}` failed"
    tests = TestReport(
        hidden=SuiteReport(ran=False, failed=1, expected=1), own=SuiteReport(ran=False, failed=1), own_output=leak
    )
    built = Result(id="0", status=Status.TEST_FAILURE, build=BuildReport(ok=True), tests=tests)
    e = Evaluation(parsed=parse_completion(CONST_PANIC), audit=None, result=built, has_hidden=True)
    told = feedback(e)
    assert told is not None and "did not build together with the hidden tests" in told and "<5>" not in told
    error = Diagnostic(level="error", code="E0080", message="evaluation of `total::<5>::{constant#0}` failed", line=3)
    stopped = Result(id="0", status=Status.TIMEOUT, build=BuildReport(ok=False, errors=1, diagnostics=(error,)))
    told = feedback(Evaluation(parsed=parse_completion(CONST_PANIC), audit=None, result=stopped, has_hidden=True))
    assert told is not None and "time limit" in told and "<5>" not in told and "E0080" not in told
