"""The verdict on one completion: what one grading (and its wrong versions' gradings) says.

:class:`Evaluation` holds a completion's parse, audit and sandbox results and defines each verdict
once (builds, passes its hidden tests, which own tests catch a bug): training metrics,
``rust-grpo score`` and ``eval`` all read these properties, and every reward function
(``functions.py``) is a function of one Evaluation. ``batch_metrics`` is the per-step summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reward_sandbox import Result, Status

from ..problems.parsing import ParsedCompletion
from .audit import CodeAudit
from .mutants import ANSWER_CHANGING


@dataclass(frozen=True)
class Evaluation:
    """Everything the reward functions need to know about one completion."""

    parsed: ParsedCompletion
    audit: CodeAudit | None
    result: Result | None  # None when there was no code to grade
    has_hidden: bool
    mutant_results: tuple[Result, ...] = ()  # the same own tests on wrong versions of the asked function
    mutant_kinds: tuple[str, ...] = ()  # the kind of each of them (``mutants.KINDS``)
    format_ok: bool = False  # follows the run's answer format (see answer_format.py)
    # the program's own tests graded as its wrong versions are (alone, no hidden tests), when its
    # first grading could differ from theirs in what a test can observe (it came from a batch), or
    # when repair feedback needs its own tests' errors from a build without the hidden tests
    # (RewardContext.grade_own_tests_alone)
    own_result: Result | None = None
    # the asked function names none of its parameters (see argless.py)
    argless: bool = False
    # meaningful own tests needed for full own-test credit (``reward.min_tests``): the run's bar, carried
    # here so every reward function reads one Evaluation and nothing else
    min_tests: int = 2

    @property
    def unknown(self) -> bool:
        """The sandbox could not grade this completion (its fault, not the program's)."""
        results = [r for r in (self.result, self.own_result) if r is not None] + list(self.mutant_results)
        return any(r.status is Status.SANDBOX_ERROR for r in results)

    @property
    def catching_tests(self) -> frozenset[str]:
        """Own tests that would catch a bug in the asked function. The rule: a test earns credit when
        the audit finds it meaningful, it passes on the program, and it fails on *every* wrong version
        of the asked functions that built (``mutants.py``: a default answer, a perturbed answer, a
        panic; helpers as written), of which at least one that answers (not only the panic) built and
        ran. So a test that passes on any wrong version earns nothing: a tautology
        (``r.is_some() || r.is_none()``), a test of a helper alone, a test that only calls the
        function, and also a test whose expected answer is the default one (``None``, ``0``,
        ``false``). Where no answering version can be written (the asked functions return only the
        program's own types), no own test earns credit. The program's run and its wrong versions'
        runs are alike in all a test can observe but the code (command line, environment, files,
        order: ``reward_sandbox/backends.py``), so a test that sniffs the run instead of checking the
        code passes or fails on all of them alike."""
        reference = self.own_result or self.result
        if reference is None or self.audit is None or self.hacked or not reference.tests.own.trusted:
            return frozenset()
        built = [(m, kind) for m, kind in zip(self.mutant_results, self.mutant_kinds) if m.build.ok and m.tests.own.ran]
        if not any(kind in ANSWER_CHANGING for _, kind in built):
            return frozenset()
        caught = self.audit.meaningful_names() & set(reference.tests.own.passes)
        for mutant, _ in built:
            caught -= set(mutant.tests.own.passes) if mutant.tests.own.trusted else caught
        return frozenset(caught)

    # The verdicts, defined once: training metrics, `rust-grpo score` and `eval` all read these.

    @property
    def hacked(self) -> bool:
        """The code exits the process, aborts or redefines assertion macros (see audit.py)."""
        return self.audit is not None and self.audit.hacked

    @property
    def builds(self) -> bool:
        """The program compiles *as an answer*: on its own, and, when the row has hidden tests, with
        them (they compiled and ran). A program that leaves out the asked function, or changes its
        signature, compiles alone but answers nothing: a policy learns to write such stubs when
        compiling alone is paid (seen in a SmolLM2 run: a struct without the asked function)."""
        if self.result is None or not self.result.build.ok:
            return False
        return not self.has_hidden or self.result.tests.hidden.ran

    @property
    def clippy_clean(self) -> bool:
        return self.builds and self.result is not None and self.result.clippy.ok

    @property
    def own_tests_pass(self) -> bool:
        """The program's own tests ran honestly and all passed (at least one), and nothing is hacked."""
        return self.result is not None and self.result.tests.own.ok and not self.hacked

    @property
    def hidden_pass(self) -> bool:
        """Every hidden test the row holds ran honestly and passed. Depends on the program alone:
        its own tests run apart and cannot change it."""
        return self.has_hidden and self.result is not None and self.result.tests.hidden.ok and not self.hacked


def batch_metrics(evaluations: Sequence[Evaluation]) -> dict[str, float]:
    """Pass rates and sandbox health of one batch (logged once per step)."""
    n = max(len(evaluations), 1)
    graded = [e.result for e in evaluations if e.result is not None]
    return {
        "rates/format": sum(e.format_ok for e in evaluations) / n,
        "rates/build": sum(e.builds for e in evaluations) / n,
        "rates/clippy_clean": sum(e.clippy_clean for e in evaluations) / n,
        "rates/own_tests_pass": sum(e.own_tests_pass for e in evaluations) / n,
        "rates/hidden_tests_pass": sum(e.hidden_pass for e in evaluations) / n,
        "sandbox/seconds": sum(r.duration_s for r in graded),
        "sandbox/timeouts": float(sum(r.status is Status.TIMEOUT for r in graded)),
        "sandbox/errors": float(sum(r.status is Status.SANDBOX_ERROR for r in graded)),
        "sandbox/unknown": float(sum(e.unknown for e in evaluations)),
        "sandbox/mutant_gradings": float(sum(len(e.mutant_results) for e in evaluations)),
        "rewards/catching_tests": sum(len(e.catching_tests) for e in evaluations) / n,
        "hacks/flagged": float(sum(e.audit is not None and e.audit.hacked for e in evaluations)),
        "hacks/trivial_tests": float(
            sum(len(e.audit.tests) - e.audit.meaningful_tests for e in evaluations if e.audit)
        ),
    }
