"""Multi-turn repair episodes: the model answers, the sandbox grades the answer, and a failing
answer gets a short feedback turn (what the compiler or the tests said) and answers again.

This module holds what does not depend on how answers are produced: the feedback message, the
episode records and the episode loop. ``rollout.py`` drives it from TRL's ``rollout_func``
(token ids, loss masks), ``evaluate.py`` from ``rust-grpo eval --repair-turns``; a test drives it
with scripted answers.

What feedback shows, and what it never shows:
- no code: the parser's complaint (no ```rust block, ...);
- the program does not compile: its first few errors, each as line, code and rustc's one-line
  message, from the build of the program alone. Never the rendered snippets (they may quote other
  files), never an error located in the hidden tests' files (the sandbox drops those), and none
  when a limit stopped the compiler (that may be the build holding the hidden tests);
- the hidden tests do not compile against it: that sentence only, with no compiler message, since
  the message would be about the hidden tests' code;
- hidden tests fail: their *names* and how many, nothing else. Their panic messages are dropped on
  purpose: ``assert!(expr)`` prints the expression's source, ``assert_eq!`` prints the expected
  value (a literal of the hidden test) and a custom message prints whatever the test says, and the
  program may print its (hidden) inputs. Showing any of it would let the policy learn the hidden
  tests' inputs and answers instead of the task;
- the program's own tests fail or do not compile: their names and trimmed panic messages or
  compiler errors (the model wrote those tests; the sandbox keeps their output apart, see
  ``TestReport.own_output``). Compiler errors only from a build without the hidden tests: the
  sandbox builds the own tests together with the hidden ones, and an error only the hidden tests
  cause can point into the program's own file (``const { if N == 5 { panic!() } }`` in a program
  generic over a length fails to compile for the lengths the hidden tests pass, and the message
  names them). So when the own tests did not build there, the program is graded again with its
  own tests alone (``RewardContext.grade_own_tests_alone``) and that grading speaks for them; an
  error that build does not show is the hidden tests' and gets the sentence above, nothing more;
- limits (time, memory, output), and answers flagged as hacks, in one sentence each.
A completion the sandbox could not grade gets no feedback: its episode ends there (every reward is
None for it, as in single-turn training).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reward_sandbox import Result, Status

from ..problems.schema import Problem
from ..rewards.context import RewardContext
from ..rewards.functions import reward_values
from ..rewards.verdict import Evaluation

MAX_ERRORS = 3  # compiler errors shown
MAX_TESTS = 5  # failing test names shown
PANIC_CHARS = 300  # of one own test's panic message
_HIDDEN_PREFIX = re.compile(r"^rg[0-9a-f]+_hidden::")  # the sandbox's random module name: meaningless to the model
_NOISE = re.compile(r"^note: run with `RUST_BACKTRACE=1`.*$", re.MULTILINE)
_OWN_BLOCK = re.compile(r"^---- (\S+) ----$", re.MULTILINE)
RETRY = "Fix the code and answer again in the same format, with the whole corrected program."
OWN_WITH_HIDDEN = "Your #[cfg(test)] tests did not build together with the hidden tests."


def passes(e: Evaluation) -> bool:
    """What an episode tries for: every hidden test passes (or, for rows without hidden tests, the
    program's own tests pass)."""
    return e.hidden_pass if e.has_hidden else e.own_tests_pass


def feedback(e: Evaluation, max_chars: int = 1200) -> str | None:
    """The feedback turn for ``e``, at most ``max_chars`` long; None when it passes or could not be
    graded (the sandbox's fault: nothing to tell the model)."""
    if e.unknown or passes(e):
        return None
    body = _what_went_wrong(e)
    text = f"Your answer did not pass.\n{body.strip()}\n\n{RETRY}"
    if len(text) > max_chars:
        room = max_chars - len(RETRY) - len("\n...\n\n")
        text = f"{text[:room].rstrip()}\n...\n\n{RETRY}"
    return text


def _what_went_wrong(e: Evaluation) -> str:
    r = e.result
    if r is None:
        problems = "; ".join(e.parsed.problems) or "no code"
        return f"No code was graded: {problems}. Put the program in exactly one ```rust block."
    if r.status is Status.INVALID_INPUT:  # about the program's own text (a NUL byte, a soundness hole)
        return f"The code could not be graded: {r.reason.split(': ', 1)[-1]}."
    if e.hacked:
        return "The code exits the process, aborts or defines assertion macros; such answers earn no test reward."
    if not r.build.ok:
        return _compile_errors(e)
    limit = _limit(r.status)
    if limit:
        return limit
    hidden, own = r.tests.hidden, r.tests.own
    lines: list[str] = []
    if e.has_hidden and not hidden.ok:
        if not hidden.ran:
            lines.append(
                "The code compiles, but the hidden tests do not compile against it: check the function names, "
                "argument and return types the task asks for."
            )
        elif not hidden.trusted:
            lines.append("The hidden test run did not finish: the program exited, aborted or crashed inside a test.")
        else:
            names = [_HIDDEN_PREFIX.sub("", n) for n in hidden.failures]
            total = max(hidden.total, hidden.expected)
            shown = ", ".join(names[:MAX_TESTS]) + (", ..." if len(names) > MAX_TESTS else "")
            lines.append(f"{hidden.failed} of {total} hidden tests failed: {shown}.")
    alone = _own_grading(e)
    if alone is None:
        lines.append(OWN_WITH_HIDDEN)
    else:
        own, own_output = alone.tests.own, alone.tests.own_output
        if own.failed or (own.ran and not own.trusted) or (not own.ran and own_output):
            lines.append(_own_tests(own.failures, own_output, own.ran))
    if not lines:
        lines.append("The program has no test that passes: add a #[cfg(test)] mod tests with #[test] functions.")
    return "\n".join(lines)


def own_build_held_hidden(e: Evaluation) -> bool:
    """The program builds, but its own tests did not, in a build that also held the row's hidden
    tests: what that build said may be about the hidden tests, so feedback needs the program
    graded again with its own tests alone (``run_episodes`` asks for it)."""
    r = e.result
    return e.has_hidden and r is not None and r.build.ok and not r.tests.own.ran and r.tests.own.failed > 0


def _own_grading(e: Evaluation) -> Result | None:
    """The grading whose own-test report feedback may quote: the first, unless its own tests did not
    build alongside the hidden tests; then the program's grading with its own tests alone, or None
    when there is none."""
    if not own_build_held_hidden(e):
        return e.result
    return e.own_result


def _compile_errors(e: Evaluation) -> str:
    """The program's errors, read from the build of the program alone. A limit (time, memory, output)
    that stopped a compile may have stopped the test build, which holds the hidden tests, before the
    build alone ran: then only the limit is told."""
    assert e.result is not None
    errors = e.result.build.diagnostics
    limit = _limit(e.result.status)
    if limit or not errors:
        return limit or "The code does not compile."
    shown = [_diagnostic_line(d.line, d.code, d.message) for d in errors[:MAX_ERRORS]]
    more = f"\n(and {len(errors) - MAX_ERRORS} more)" if len(errors) > MAX_ERRORS else ""
    return "The code does not compile:\n" + "\n".join(shown) + more


def _diagnostic_line(line: int | None, code: str | None, message: str) -> str:
    where = f"line {line}: " if line else ""
    return f"{where}error{f'[{code}]' if code else ''}: {message.strip()}"


def _limit(status: Status) -> str:
    return {
        Status.TIMEOUT: "The program ran past the time limit (an endless loop, or far too slow).",
        Status.MEMORY_LIMIT: "The program went over the memory limit.",
        Status.OUTPUT_LIMIT: "The program printed more output than allowed.",
    }.get(status, "")


def _own_tests(failures: Sequence[str], own_output: str, ran: bool) -> str:
    if not ran:
        errors = own_output.strip().splitlines()[:MAX_ERRORS]
        return "Your #[cfg(test)] tests do not compile:\n" + "\n".join(errors)
    if not failures:
        return "Your own test run did not finish: a test exited, aborted or crashed."
    panics = _panics(own_output)
    parts = [f"{len(failures)} of your own tests failed:"]
    for name in list(failures)[:MAX_TESTS]:
        message = panics.get(name, "")
        parts.append(f"- {name}" + (f"\n  {message}" if message else ""))
    return "\n".join(parts)


def _panics(own_output: str) -> dict[str, str]:
    """Each failing own test's trimmed panic message, from libtest's ``---- name ----`` blocks."""
    text = _NOISE.sub("", own_output)
    marks = list(_OWN_BLOCK.finditer(text))
    out = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = "\n  ".join(line.strip() for line in text[m.end() : end].strip().splitlines() if line.strip())
        out[m.group(1)] = body if len(body) <= PANIC_CHARS else body[: PANIC_CHARS - 3] + "..."
    return out


# --- Episodes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One answer of an episode, its grading and the feedback it got (None: it passed, could not be
    graded, or was the last turn)."""

    text: str
    evaluation: Evaluation
    rewards: dict[str, float | None]
    reward: float | None  # the weighted sum, as TRL computes it (None: nothing known)
    passed: bool
    feedback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        r = self.evaluation.result
        return {
            "completion": self.text,
            "status": r.status.value if r else "no_code",
            "passed": self.passed,
            "reward": self.reward,
            "rewards": self.rewards,
            "feedback": self.feedback,
        }


@dataclass
class Episode:
    turns: list[Turn] = field(default_factory=list)

    @property
    def final(self) -> Turn:
        return self.turns[-1]

    def bonus(self, improvement_bonus: float) -> float:
        """``improvement_bonus`` when the first answer failed and the final one passes, else 0."""
        return improvement_bonus if len(self.turns) > 1 and self.final.passed and not self.turns[0].passed else 0.0

    def to_dicts(self) -> list[dict[str, Any]]:
        return [{"turn": i, **t.to_dict()} for i, t in enumerate(self.turns)]


class Policy(Protocol):
    """Whatever writes the answers: a TRL trainer (token ids), an eval model (chats), a script."""

    def answer(self, episodes: list[int]) -> list[str]:
        """The next answer of each listed episode."""
        ...

    def tell(self, episode: int, message: str) -> None:
        """Append ``message`` as a user turn after the episode's last answer."""
        ...


def weighted_reward(rewards: dict[str, float | None], weights: dict[str, float]) -> float | None:
    """TRL's sum: known components times their weights; None when no weighted component is known."""
    known = [weights.get(name, 0.0) * v for name, v in rewards.items() if v is not None and weights.get(name, 0.0)]
    return sum(known) if known else None


def run_episodes(
    policy: Policy,
    problems: Sequence[Problem],
    context: RewardContext,
    weights: dict[str, float],
    max_turns: int,
    max_feedback_chars: int = 1200,
    lockstep: bool = False,
) -> list[Episode]:
    """Run one episode per problem of ``problems`` (a problem may stand in several rows):
    every turn's answers are graded together in one sandbox batch; failing episodes get feedback and
    answer again, up to ``max_turns`` answers. ``lockstep`` asks the policy for every turn even when
    no episode is left (with an empty list): distributed generation is collective, so every process
    must make the same calls."""
    n = len(problems)
    episodes = [Episode() for _ in range(n)]
    active = list(range(n))
    for turn in range(max_turns):
        if not active:
            if lockstep:
                policy.answer([])
            continue
        answers = policy.answer(active)
        subset = [problems[i] for i in active]
        evaluations = context.evaluate(answers, subset)
        if turn + 1 < max_turns:  # feedback follows: own-test errors from a build without the hidden tests
            alone = [
                k for k, e in enumerate(evaluations) if not e.unknown and not passes(e) and own_build_held_hidden(e)
            ]
            evaluations = context.grade_own_tests_alone(evaluations, subset, alone)
        still = []
        for i, text, e in zip(active, answers, evaluations):
            rewards = reward_values(e)
            message = feedback(e, max_feedback_chars) if turn + 1 < max_turns else None
            episodes[i].turns.append(Turn(text, e, rewards, weighted_reward(rewards, weights), passes(e), message))
            if message is not None:
                policy.tell(i, message)
                still.append(i)
        active = still
    return episodes
