"""Reward functions for TRL's GRPOTrainer, all fed by one grading of each completion.

TRL calls each reward function in turn with the same batch. The first call grades the whole
batch (see :meth:`RewardContext.evaluate`); the others read the shared memo. When the sandbox
cannot grade a completion, *every* reward function returns ``None`` for it: TRL drops a
completion only when all of them do, so a fault never reads as a bad (or a good) program.
Own tests earn credit only when they would catch wrong versions of the asked function (see
``mutants.py`` and :attr:`Evaluation.catching_tests`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reward_sandbox import GraderLike, InvalidJob, Job, Result, Status, TestMode
from reward_sandbox.results import invalid_result

from ..problems.answer_format import THINK, AnswerFormat
from ..problems.parsing import ParsedCompletion, completion_text, parse_completion
from ..problems.schema import Problem, problem_from_columns
from .argless import asked_functions, ignores_arguments
from .audit import CodeAudit, audit_code, code_view, matching_brace
from .mutants import ANSWER_CHANGING, KINDS, wrong_versions

log = logging.getLogger("rust_grpo")

REWARD_NAMES = (
    "format",
    "code_block",
    "tests_present",
    "build",
    "clippy",
    "own_tests",
    "hidden_tests",
    "non_empty",
    "test_block",
    "asserts",
)
_TEST_MOD = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]\s*(?:pub\s+)?mod\s+\w+\s*\{")


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


@dataclass(frozen=True)
class GradedBatch:
    """One graded batch, kept for whoever reports on it (the samples callback)."""

    step: int
    ids: list[str]
    texts: list[str]
    evaluations: list[Evaluation]


class RewardContext:
    """Grades each batch once and remembers it, keyed by the batch's completions and tests."""

    def __init__(
        self,
        grader: GraderLike,
        min_tests: int = 2,
        timeout_s: float | None = None,
        answer_format: AnswerFormat = THINK,
    ) -> None:
        self.grader = grader
        self.answer_format = answer_format
        self.min_tests = min_tests
        self.timeout_s = timeout_s
        self.graded: deque[GradedBatch] = deque(maxlen=64)  # newest batches, drained by SamplesCallback
        self._memo: OrderedDict[tuple[Any, ...], list[Evaluation]] = OrderedDict()
        self._lock = threading.Lock()
        self.sandbox_seconds = 0.0  # total wall time spent grading (for the step-time share)

    def evaluate(self, completions: Sequence[Any], columns: dict[str, Any]) -> list[Evaluation]:
        texts = [completion_text(c) for c in completions]
        rows = [problem_from_columns(columns, i) for i in range(len(texts))]
        key = (tuple(texts), tuple(rows))
        with self._lock:
            if key in self._memo:
                return self._memo[key]
            evaluations = self._grade(texts, rows, columns)
            self._memo[key] = evaluations
            while len(self._memo) > 8:
                self._memo.popitem(last=False)
        return evaluations

    def _grade(self, texts: list[str], rows: list[Problem], columns: dict[str, Any]) -> list[Evaluation]:
        """Two parallel rounds: every program against its row's hidden tests (its own tests run apart),
        then, only for programs with a passing meaningful own test, the wrong versions of its asked
        functions (``mutants.wrong_versions``) against those own tests, all in one round."""
        parsed = [parse_completion(t) for t in texts]
        audits = [audit_code(p.code) if p.code else None for p in parsed]
        # the asked functions: the row's (its hidden tests and, where the columns carry it, its reference
        # solution: argless.asked_functions), never the program's; None (every function) for a row whose
        # tests call none, or that has none
        solutions = [str(v) for v in _column(columns, "solution", len(texts), "")]
        asked = [asked_functions(rows[i].tests, solutions[i]) or None for i in range(len(texts))]
        start = time.monotonic()
        programs: dict[int, Job | InvalidJob] = {}
        for i, p in enumerate(parsed):
            if p.code is not None:
                try:
                    programs[i] = rows[i].job(p.code, str(i))
                except InvalidJob as exc:  # e.g. a NUL byte in the code: the completion's fault, graded as invalid
                    programs[i] = exc
        results = self._grade_jobs(programs)
        # Wrong versions, for programs with a meaningful own test that passes and an answering wrong
        # version to run it on (none: no credit, nothing to grade).
        versions = {
            i: wrong_versions(parsed[i].code or "", asked[i])
            for i, r in results.items()
            if (audit := audits[i]) is not None and audit.meaningful_names() & set(r.tests.own.passes)
        }
        owners = [i for i, v in versions.items() if any(kind in v for kind in ANSWER_CHANGING)]
        # A batched run differs from a run alone in what a test can see (the binary holds the batch's
        # other programs, and the batch's filter): those programs' own tests are graded again as their
        # wrong versions are, alongside the first of them.
        again: dict[Any, Job | InvalidJob] = {
            (i, "program"): self._mutant_job(programs[i], parsed[i].code or "", f"{i}:program")
            for i in owners
            if "batch" in results[i].measures
        }
        round_jobs: dict[Any, Job | InvalidJob] = {
            (i, kind): self._mutant_job(programs[i], versions[i][kind], f"{i}:{kind}")
            for i in owners
            for kind in KINDS
            if kind in versions[i]
        }
        graded = self._grade_jobs({**round_jobs, **again}) if round_jobs else {}
        own_results = {i: graded.pop((i, "program")) for i, _ in again}
        mutant_results: dict[tuple[int, str], Result] = graded
        self.sandbox_seconds += time.monotonic() - start
        evaluations = [
            Evaluation(
                parsed=p,
                audit=audits[i],
                result=results.get(i),
                has_hidden=bool(rows[i].tests.strip()),
                mutant_results=tuple(r for (owner, _), r in mutant_results.items() if owner == i),
                mutant_kinds=tuple(kind for (owner, kind) in mutant_results if owner == i),
                own_result=own_results.get(i),
                format_ok=self.answer_format.follows(p),
                argless=bool(ignores_arguments(p.code, rows[i].tests, solutions[i])),
            )
            for i, p in enumerate(parsed)
        ]
        state = columns.get("trainer_state")
        ids = [str(v) for v in _column(columns, "id", len(texts), "")]
        self.graded.append(
            GradedBatch(getattr(state, "global_step", 0) if state is not None else 0, ids, texts, evaluations)
        )
        return evaluations

    def grade_own_tests_alone(
        self, evaluations: Sequence[Evaluation], columns: dict[str, Any], indices: Sequence[int]
    ) -> list[Evaluation]:
        """``evaluations``, those at ``indices`` given an ``own_result``: the program graded again with
        only its own tests, as its wrong versions are, all in one parallel pass. Repair feedback quotes
        own-test compiler errors from that build, never from one that also held the hidden tests: an
        error only their instantiations cause (a post-monomorphization error located in the program's
        own file) names the hidden inputs' shapes. A grading the sandbox could not do leaves
        ``own_result`` unset, so ``unknown`` and every reward stay as the first grading made them."""
        jobs: dict[Any, Job | InvalidJob] = {}
        for i in indices:
            code = evaluations[i].parsed.code
            if code is not None:
                program = problem_from_columns(columns, i).job_or_invalid(code, str(i))
                if isinstance(program, Job):
                    jobs[i] = self._mutant_job(program, code, f"{i}:alone")
        start = time.monotonic()
        graded = self._grade_jobs(jobs)
        self.sandbox_seconds += time.monotonic() - start
        out = list(evaluations)
        for i, result in graded.items():
            if result.status is not Status.SANDBOX_ERROR:
                out[i] = dataclasses.replace(out[i], own_result=result)
        return out

    @staticmethod
    def _mutant_job(program: Job | InvalidJob, source: str, job_id: str) -> Job | InvalidJob:
        """The program's job with a wrong version of its code and only its own tests, with the program's
        own run's flags (``include_ignored`` included: the command lines must match)."""
        if isinstance(program, InvalidJob):
            return program
        return dataclasses.replace(program, id=job_id, source=source, tests="", test_mode=TestMode.UNIT)

    def _grade_jobs(self, jobs: dict[Any, Job | InvalidJob]) -> dict[Any, Result]:
        """Grade ``jobs`` in one parallel pass; a grader that fails turns them all into sandbox errors.
        Invalid jobs never reach the grader: they are ``invalid_input`` results (the completion's fault)."""
        valid = {key: job for key, job in jobs.items() if isinstance(job, Job)}
        results = {
            key: invalid_result(job.job_id or str(key), str(job))
            for key, job in jobs.items()
            if isinstance(job, InvalidJob)
        }
        if self.timeout_s:
            valid = {key: dataclasses.replace(job, timeout_s=self.timeout_s) for key, job in valid.items()}
        if valid:
            listed = list(valid.values())
            try:
                graded = self.grader.grade(listed)
            except Exception as exc:  # noqa: BLE001 - a dead reward server must not crash the run
                log.error(
                    "reward grading failed for a batch of %d programs (%s); their rewards are None", len(listed), exc
                )
                graded = [Result(id=j.id, status=Status.SANDBOX_ERROR, reason=str(exc)) for j in listed]
            results.update(zip(valid, graded))
        return results


def _column(columns: dict[str, Any], name: str, n: int, default: Any) -> list[Any]:
    values = columns.get(name)
    if values is None:
        return [default] * n
    return [default if v is None else v for v in values]


# --- The components: each maps one Evaluation to a reward in [0, 1], or None (unknown) -------
# Every component returns None when the sandbox could not grade the completion (see RewardFunction).


def format_reward(e: Evaluation, _min_tests: int) -> float:
    """1 when the answer follows the run's format (think: <think>...</think> then exactly one ```rust
    block; oxen: exactly one ```rust block); 0.5 for the block alone in the think format."""
    if e.format_ok:
        return 1.0
    return 0.5 if e.parsed.lone_block else 0.0


def _test_module(code: str) -> str | None:
    """The text of the program's ``#[cfg(test)] mod`` (found in the code view: not in comments or
    strings), if any."""
    clean = code_view(code)
    match = _TEST_MOD.search(clean)
    if match is None:
        return None
    return code[match.start() : matching_brace(clean, match.end() - 1) + 1]


def non_empty_reward(e: Evaluation, _min_tests: int) -> float:
    """1 when the code block and a test module are there and the code has at least 3 lines that are not
    comments or blank (Oxen's "non-empty")."""
    code = e.parsed.code or ""
    if e.parsed.rust_blocks != 1 or _test_module(code) is None:
        return 0.0
    lines = [line.strip() for line in code.splitlines()]
    return 1.0 if sum(len(line) >= 2 and not line.startswith("//") for line in lines) >= 3 else 0.0


def test_block_reward(e: Evaluation, _min_tests: int) -> float:
    """1 when the code holds a ``#[cfg(test)] mod`` (Oxen's "test block")."""
    return 1.0 if e.parsed.code and _test_module(e.parsed.code) is not None else 0.0


def asserts_reward(e: Evaluation, _min_tests: int) -> float:
    """0.25 for each distinct ``assert!``/``assert_eq!`` line in the test module, up to 1 (Oxen's)."""
    module = _test_module(e.parsed.code or "") if e.parsed.code else None
    if module is None:
        return 0.0
    asserts = {line.strip() for line in module.splitlines() if line.strip().startswith(("assert!(", "assert_eq!("))}
    return min(1.0, 0.25 * len(asserts))


def code_block_reward(e: Evaluation, _min_tests: int) -> float:
    """1 for exactly one ```rust block."""
    return 1.0 if e.parsed.lone_block else 0.0


def tests_present_reward(e: Evaluation, min_tests: int) -> float:
    """Own tests that would catch a bug (pass here, fail on every wrong version), up to ``min_tests``."""
    return min(len(e.catching_tests), min_tests) / min_tests


def build_reward(e: Evaluation, _min_tests: int) -> float:
    """1 when the program compiles as an answer (see :attr:`Evaluation.builds`; lints never decide this)."""
    return 1.0 if e.builds else 0.0


def clippy_reward(e: Evaluation, _min_tests: int) -> float:
    """1 with no warning, 0.5 with one, 0.1 less for each more; 0 when it does not build. Lints are
    forced in the sandbox, so source attributes cannot raise this."""
    if e.result is None or not e.builds:
        return 0.0
    warnings = e.result.clippy.warnings
    return 1.0 if warnings == 0 else max(0.0, 0.5 - 0.1 * (warnings - 1))


def own_tests_reward(e: Evaluation, min_tests: int) -> float:
    """Share of the program's own tests that would catch a bug, out of at least ``min_tests``."""
    if e.audit is None:
        return 0.0
    return len(e.catching_tests) / max(len(e.audit.tests), min_tests)


def hidden_tests_reward(e: Evaluation, _min_tests: int) -> float | None:
    """Share of the row's hidden tests passed (of all it holds); None for rows without hidden tests."""
    if not e.has_hidden:
        return None
    if e.result is None:
        return 0.0
    hidden = e.result.tests.hidden
    if e.hacked or not hidden.trusted:
        return 0.0
    total = max(hidden.total, hidden.expected)
    return hidden.passed / total if total else 0.0


REWARDS: dict[str, Callable[[Evaluation, int], float | None]] = {
    "format": format_reward,
    "code_block": code_block_reward,
    "tests_present": tests_present_reward,
    "build": build_reward,
    "clippy": clippy_reward,
    "own_tests": own_tests_reward,
    "hidden_tests": hidden_tests_reward,
    "non_empty": non_empty_reward,
    "test_block": test_block_reward,
    "asserts": asserts_reward,
}


class RewardFunction:
    """A TRL reward function for one component; picklable, with a readable ``__name__``."""

    def __init__(self, name: str, context: RewardContext, log_rates: bool = False) -> None:
        if name not in REWARDS:
            raise ValueError(f"unknown reward {name!r}; known: {', '.join(REWARD_NAMES)}")
        self.__name__ = name
        self.context = context
        self.log_rates = log_rates

    def __call__(
        self, prompts: list[Any], completions: list[Any], completion_ids: list[Any] | None = None, **columns: Any
    ) -> list[float | None]:
        # With repair episodes (repair/rollout.py) the completion holds every turn; the reward is the final answer's.
        evaluations = self.context.evaluate(columns.get("repair_final") or completions, columns)
        if self.log_rates and callable(columns.get("log_metric")):
            for name, value in batch_metrics(evaluations).items():
                columns["log_metric"](name, value)
            health = getattr(self.context.grader, "health", None)  # reward servers (RemoteGrader)
            if callable(health):
                columns["log_metric"]("sandbox/servers_up", float(sum(s["healthy"] for s in health())))
        return [reward_value(self.__name__, e, self.context.min_tests) for e in evaluations]


def reward_value(name: str, e: Evaluation, min_tests: int) -> float | None:
    """One component's reward for ``e``: None for every component when the sandbox failed on it."""
    return None if e.unknown else REWARDS[name](e, min_tests)


def reward_values(e: Evaluation, min_tests: int) -> dict[str, float | None]:
    """Every component by name (what ``rust-grpo score`` writes under ``rewards``)."""
    return {name: reward_value(name, e, min_tests) for name in REWARD_NAMES}


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


def build_reward_functions(
    context: RewardContext, weights: dict[str, float]
) -> tuple[list[RewardFunction], list[float]]:
    """All components in a fixed order with their weights (weight 0 = logged diagnostic)."""
    funcs = [RewardFunction(name, context, log_rates=(i == 0)) for i, name in enumerate(REWARD_NAMES)]
    return funcs, [float(weights.get(name, 0.0)) for name in REWARD_NAMES]


# --- Rewards that pay for being right (issue 27); appended, the components above are unchanged ---


def gated_build_reward(e: Evaluation, _min_tests: int) -> float:
    """``build`` as a gate rather than a prize: 1 when the program builds as an answer *and* passes at
    least one of the row's hidden tests honestly (rows without hidden tests: when it builds). A stub
    that compiles and ignores its arguments (``Vec::new()`` for ``gray_code``) fails them all, so it
    earns nothing here, where ``build`` pays it in full."""
    if not e.builds or e.result is None:
        return 0.0
    if not e.has_hidden:
        return 1.0
    hidden = e.result.tests.hidden
    return 1.0 if hidden.trusted and hidden.passed > 0 and not e.hacked else 0.0


def all_hidden_reward(e: Evaluation, _min_tests: int) -> float | None:
    """A bonus for being right: 1 when every hidden test of the row passes (see
    :attr:`Evaluation.hidden_pass`); None for rows without hidden tests."""
    if not e.has_hidden:
        return None
    return 1.0 if e.hidden_pass else 0.0


def build_using_args_reward(e: Evaluation, _min_tests: int) -> float:
    """``build`` for answers that read their input: 1 when the program builds as an answer and the
    asked function (the row's, ``argless.asked_function``) names at least one of its parameters (or
    takes none); else 0.
    Never more than ``build`` pays, so nothing ``build`` closes reopens here; a stub that only names
    an argument (``let _ = n;``) still earns it, so ``rates/argless_builds`` and the hidden tests,
    not this reward, say whether the policy is right."""
    return 1.0 if e.builds and not e.argless else 0.0


REWARDS.update(gated_build=gated_build_reward, all_hidden=all_hidden_reward, build_using_args=build_using_args_reward)
REWARD_NAMES = (*REWARD_NAMES, "gated_build", "all_hidden", "build_using_args")  # type: ignore[assignment]  # grows by three
