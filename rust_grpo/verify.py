"""Check a problem set: every reference solution passes its hidden tests, and a stub whose
function bodies are all ``todo!()`` fails them (so the tests really test something)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from reward_sandbox import Result, Status

from .audit import matching_brace, strip_comments_and_strings
from .data import Problem

MIN_ASSERTS = 4
_FN = re.compile(r"\bfn\s+[A-Za-z_][A-Za-z0-9_]*")
_ASSERTS = re.compile(r"\b(?:assert|assert_eq|assert_ne|debug_assert\w*)!")


def _body_start(code: str, start: int) -> int | None:
    """Index of the ``{`` opening the body of the fn whose header starts at ``start``; None for a
    declaration without body (``fn f();`` in a trait)."""
    depth = 0
    for i in range(start, len(code)):
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c == ";":
            return None
        elif depth == 0 and c == "{":
            return i
    return None


def make_stub(solution: str) -> str:
    """The solution with every outermost function body replaced by ``todo!()``."""
    clean = strip_comments_and_strings(solution)
    out, pos = [], 0
    for m in _FN.finditer(clean):
        if m.start() < pos:
            continue  # nested inside a body we already replaced
        open_brace = _body_start(clean, m.end())
        if open_brace is None:
            continue
        close = matching_brace(clean, open_brace)
        out.append(solution[pos : open_brace + 1])
        out.append("\n    todo!()\n}")
        pos = close + 1
    out.append(solution[pos:])
    return "".join(out)


@dataclass
class VerifyReport:
    checked: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def verify_jobs(problem: Problem) -> list[dict[str, Any]]:
    return [problem.job(problem.solution, f"{problem.id}#reference"), problem.job(make_stub(problem.solution), f"{problem.id}#stub")]


def judge(problem: Problem, reference: Result, stub: Result, min_asserts: int = MIN_ASSERTS) -> list[str]:
    """Reasons this problem fails verification (empty when it passes)."""
    reasons = []
    if not problem.solution.strip():
        reasons.append("no reference solution")
    if not problem.tests.strip():
        reasons.append("no hidden tests")
    elif len(_ASSERTS.findall(problem.tests)) < min_asserts:
        reasons.append(f"fewer than {min_asserts} asserts in the hidden tests")
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
    return report
