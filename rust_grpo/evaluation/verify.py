"""Check a problem set: every reference solution passes its hidden tests, and a stub whose
function bodies are all ``todo!()`` fails them (so the tests really test something)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from reward_sandbox import InvalidJob, Job, Result, Status

from ..problems.schema import Problem
from ..rewards.mutants import BODIES, replace_bodies

MIN_ASSERTS = 4
_ASSERTS = re.compile(r"\b(?:assert|assert_eq|assert_ne|debug_assert\w*)!")


def make_stub(solution: str) -> str:
    """The solution with every function body replaced by ``todo!()``."""
    return replace_bodies(solution, BODIES["todo"])


@dataclass
class VerifyReport:
    checked: int = 0
    failures: list[str] = field(default_factory=list)
    failed_ids: set[str] = field(default_factory=set)  # the rows behind ``failures`` (ids may hold ':')
    # rows without a reference solution: only "the tests compile against the signature and fail a stub"
    # was checked for them, never that the tests can be passed
    without_reference: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def signature_stub(problem: Problem) -> str:
    """A ``todo!()`` body under the problem's signature: for sets without reference solutions."""
    header = problem.signature.strip().rstrip("{").rstrip()
    return f"#[allow(unused_variables)]\n{header} {{\n    todo!()\n}}\n" if header else ""


def verify_jobs(problem: Problem) -> list[Job | InvalidJob]:
    """The reference and its stub; without a reference, the signature's stub (twice, to keep pairs)."""
    if not problem.solution.strip():
        stub = problem.job_or_invalid(signature_stub(problem), f"{problem.id}#signature-stub")
        return [stub, stub]
    return [
        problem.job_or_invalid(problem.solution, f"{problem.id}#reference"),
        problem.job_or_invalid(make_stub(problem.solution), f"{problem.id}#stub"),
    ]


def judge(problem: Problem, reference: Result, stub: Result, min_asserts: int = MIN_ASSERTS) -> list[str]:
    """Reasons this problem fails verification (empty when it passes). Without a reference solution
    (MultiPL-E), what can still be checked is checked: the tests compile against a ``todo!()`` stub of
    the signature and fail on it; tests that cannot compile against it can never pass."""
    reasons = []
    if not problem.solution.strip():
        if not problem.signature.strip():
            return ["no reference solution and no signature: nothing to check"]
        if not problem.tests.strip():
            return ["no hidden tests"]
        if stub.status is Status.OK:
            return ["a todo!() stub passes the tests (they check nothing)"]
        if stub.status is Status.SANDBOX_ERROR:
            return [f"sandbox error: {stub.reason}"]
        if not stub.build.ok or not stub.tests.hidden.ran:
            return [f"can never pass: the tests do not compile against the signature ({stub.reason})"]
        return []
    if not problem.tests.strip():
        reasons.append("no hidden tests")
    elif len(_ASSERTS.findall(problem.tests)) < min_asserts:
        reasons.append(f"fewer than {min_asserts} asserts in the hidden tests (external suites: --min-asserts 1)")
    if reference.status is not Status.OK or reference.tests.hidden.passed == 0:
        detail = reference.reason or reference.status.value
        reasons.append(f"reference does not pass: {detail}")
    if stub.status is Status.OK:
        reasons.append("a todo!() stub passes the tests (they check nothing)")
    if stub.status is Status.SANDBOX_ERROR or reference.status is Status.SANDBOX_ERROR:
        reasons.append(f"sandbox error: {reference.reason or stub.reason}")
    return reasons


def verify_problems(problems: list[Problem], grader: Any, min_asserts: int = MIN_ASSERTS) -> VerifyReport:
    jobs = [job for p in problems for job in verify_jobs(p)]
    results = grader.grade(jobs)
    report = VerifyReport(checked=len(problems))
    for i, problem in enumerate(problems):
        reasons = judge(problem, results[2 * i], results[2 * i + 1], min_asserts)
        report.failures += [f"{problem.id}: {reason}" for reason in reasons]
        if reasons:
            report.failed_ids.add(problem.id)
        if not reasons and not problem.solution.strip():
            report.without_reference.append(problem.id)
    return report


def weak_rows(problems: list[Problem], report: VerifyReport, grader: Any, mutants: int) -> list[Any]:
    """The audits (:mod:`~rust_grpo.evaluation.suite_audit`, up to ``mutants`` wrong versions a row)
    of the verified rows with a reference whose hidden tests catch too few of them: verification
    proves the tests can pass and fail a stub; this says whether they would pay a near miss."""
    if mutants <= 0:
        return []
    from .suite_audit import audit_problems

    rows = [p for p in problems if p.id not in report.failed_ids and p.solution.strip()]
    return [a for a in audit_problems(rows, grader, limit=mutants) if a.weak]
