"""Grading a batch of completions once, for every reward function and metric that reads it.

TRL calls each reward function in turn with the same batch: the first call grades the whole batch
(:meth:`RewardContext.evaluate`), the others read the shared memo. The context is given the run's
problems, validated once when the data loaded, and finds a row's problem by its id (the dataset's
``id`` column, which TRL passes to reward functions): no problem is rebuilt from dataset columns.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reward_sandbox import GraderLike, InvalidJob, Job, Result, Status, TestMode
from reward_sandbox.results import invalid_result

from ..problems.answer_format import THINK, AnswerFormat
from ..problems.parsing import completion_text, parse_completion
from ..problems.schema import DataError, Problem
from .argless import asked_functions, ignores_arguments
from .audit import audit_code
from .mutants import ANSWER_CHANGING, KINDS, wrong_versions
from .verdict import Evaluation

if TYPE_CHECKING:
    from ..config import RewardConfig

log = logging.getLogger("rust_grpo")


@dataclass(frozen=True)
class GradedBatch:
    """One graded batch, kept for whoever reports on it (the samples callback)."""

    step: int
    ids: list[str]
    texts: list[str]
    evaluations: list[Evaluation]


class RewardContext:
    """Grades each batch once and remembers it, keyed by the batch's completions and problems.

    ``timeout_s`` is the one route by which a run's ``reward.timeout_s`` reaches the sandbox: every
    job carries it (a local pool and a reward server alike apply a job's own timeout); None leaves
    the grader's own limit (``--timeout`` of ``score`` and ``eval``)."""

    def __init__(
        self,
        grader: GraderLike,
        problems: Iterable[Problem] = (),
        min_tests: int = 2,
        timeout_s: float | None = None,
        answer_format: AnswerFormat = THINK,
    ) -> None:
        self.grader = grader
        self.problems: dict[str, Problem] = {p.id: p for p in problems}
        self.answer_format = answer_format
        self.min_tests = min_tests
        self.timeout_s = timeout_s
        self.graded: deque[GradedBatch] = deque(maxlen=64)  # newest batches, drained by SamplesCallback
        self._memo: OrderedDict[tuple[Any, ...], list[Evaluation]] = OrderedDict()
        self._lock = threading.Lock()
        self.sandbox_seconds = 0.0  # total wall time spent grading (for the step-time share)

    @classmethod
    def from_config(
        cls,
        reward: RewardConfig | None,
        grader: GraderLike,
        problems: Iterable[Problem],
        answer_format: AnswerFormat = THINK,
    ) -> RewardContext:
        """The context a run's ``[reward]`` section describes (its ``min_tests`` and ``timeout_s``);
        ``reward`` None (no run config: ``score``, ``eval``): the defaults, and the grader's own limit."""
        if reward is None:
            return cls(grader, problems, answer_format=answer_format)
        return cls(grader, problems, reward.min_tests, reward.timeout_s, answer_format)

    def lookup(self, ids: Sequence[Any]) -> list[Problem]:
        """The problems of a batch's rows, by the dataset's ``id`` column."""
        try:
            return [self.problems[str(i)] for i in ids]
        except KeyError as exc:
            raise DataError(f"reward: row id {exc.args[0]!r} is not one of the run's problems") from None

    def evaluate(self, completions: Sequence[Any], problems: Sequence[Problem], step: int = 0) -> list[Evaluation]:
        """One :class:`Evaluation` per completion, graded against the problem beside it (memoised:
        the same batch again costs nothing); ``step`` labels the batch for the samples callback."""
        texts = [completion_text(c) for c in completions]
        key = (tuple(texts), tuple(problems))
        with self._lock:
            if key in self._memo:
                return self._memo[key]
            evaluations = self._grade(texts, list(problems), step)
            self._memo[key] = evaluations
            while len(self._memo) > 8:
                self._memo.popitem(last=False)
        return evaluations

    def _job(self, problem: Problem, source: str, job_id: str) -> Job | InvalidJob:
        """The one route from a problem to a sandbox job (with the run's timeout)."""
        return problem.job_or_invalid(source, job_id, self.timeout_s)

    def _grade(self, texts: list[str], rows: list[Problem], step: int) -> list[Evaluation]:
        """Two parallel rounds: every program against its row's hidden tests (its own tests run apart),
        then, only for programs with a passing meaningful own test, the wrong versions of its asked
        functions (``mutants.wrong_versions``) against those own tests, all in one round."""
        parsed = [parse_completion(t) for t in texts]
        audits = [audit_code(p.code) if p.code else None for p in parsed]
        # the asked functions: the row's (its hidden tests and its reference solution:
        # argless.asked_functions), never the program's; None (every function) for a row whose tests
        # call none, or that has none
        asked = [asked_functions(row.tests, row.solution) or None for row in rows]
        start = time.monotonic()
        programs: dict[int, Job | InvalidJob] = {
            # an invalid job (e.g. a NUL byte in the code) is the completion's fault, graded as invalid
            i: self._job(rows[i], p.code, str(i))
            for i, p in enumerate(parsed)
            if p.code is not None
        }
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
                argless=bool(ignores_arguments(p.code, rows[i].tests, rows[i].solution)),
                min_tests=self.min_tests,
            )
            for i, p in enumerate(parsed)
        ]
        self.graded.append(GradedBatch(step, [row.id for row in rows], texts, evaluations))
        return evaluations

    def grade_own_tests_alone(
        self, evaluations: Sequence[Evaluation], problems: Sequence[Problem], indices: Sequence[int]
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
                program = self._job(problems[i], code, str(i))
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
        own run's flags (``include_ignored`` and the timeout included: the command lines must match)."""
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
