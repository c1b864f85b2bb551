"""Test suites you can trust: how many wrong versions of each row's reference its hidden tests catch.

``rust-grpo data audit`` grades, for every row with a reference solution and hidden tests, the
reference and its mutants (``rewards/mutants.mutants``: the ``default`` and ``perturbed`` answers
of own-test credit, then cargo-mutants-style changes inside the asked functions' bodies) against
the row's hidden tests, all of a row in one batch (the same tests: a GRPO-shaped group). A mutant
is *killed* when the tests fail on it (a failed test, a timeout, a memory or output limit) and
*survives* when they pass; one that does not build says nothing about the tests and is counted
apart, as is one the sandbox could not grade. A row's kill rate is killed / built; a row under
:data:`WEAK_BELOW` is *weak*, with a one-line reason and its survivors as short diffs. A row whose
reference does not pass its own tests is not measured (``data verify`` says why).

A survivor is not always a gap in the tests: a change that keeps the function's meaning (an
equivalent mutant, e.g. ``<`` for ``<=`` where the two never differ on reachable inputs) survives
any suite. The diffs are there to tell which.
"""

from __future__ import annotations

import difflib
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from reward_sandbox import InvalidJob, Job, Result, Status
from reward_sandbox.outfiles import write_lines, write_text

from ..problems.schema import DataError, Problem, normalize, read_records
from ..rewards.argless import asked_functions
from ..rewards.mutants import MAX_MUTANTS, OPERATORS, Mutant, mutants

WEAK_BELOW = 0.9  # a row whose tests catch fewer of its built mutants than this is weak
_KILLING = {Status.TEST_FAILURE, Status.TIMEOUT, Status.MEMORY_LIMIT, Status.OUTPUT_LIMIT}
_UNBUILT = {Status.COMPILE_ERROR, Status.INVALID_INPUT}
VERDICTS = ("killed", "survived", "unbuilt", "unknown")
BUCKETS = (("1.0", 1.0, 1.01), ("0.9-1", 0.9, 1.0), ("0.7-0.9", 0.7, 0.9), ("0.5-0.7", 0.5, 0.7), ("<0.5", 0.0, 0.5))


@dataclass(frozen=True)
class MutantOutcome:
    operator: str  # ``mutants.OPERATORS``
    line: int  # the first changed line of the reference
    change: str  # what changed, short
    verdict: str  # killed, survived, unbuilt (says nothing), unknown (a sandbox error: says nothing)
    status: str  # the sandbox's status
    diff: str = ""  # survivors only: a short unified diff from the reference


@dataclass
class RowAudit:
    id: str
    outcomes: list[MutantOutcome] = field(default_factory=list)
    not_measured: str = ""  # why the row has no kill rate (no reference, no tests, reference fails, no mutant)
    graded: int = 0  # programs graded for it: its reference and its mutants

    def count(self, verdict: str) -> int:
        return sum(o.verdict == verdict for o in self.outcomes)

    @property
    def built(self) -> int:
        return self.count("killed") + self.count("survived")

    @property
    def kill_rate(self) -> float | None:
        return None if self.not_measured or not self.built else self.count("killed") / self.built

    @property
    def weak(self) -> bool:
        return self.kill_rate is not None and self.kill_rate < WEAK_BELOW

    def reason(self) -> str:
        """One line: why the row is weak or not measured ("" for a row whose tests are strong)."""
        if self.not_measured:
            return self.not_measured
        if not self.built:
            return f"no mutant builds ({len(self.outcomes)} made): nothing measured"
        if not self.weak:
            return ""
        survivors = [o for o in self.outcomes if o.verdict == "survived"]
        shown = "; ".join(f"line {o.line} {o.operator}: {o.change}" for o in survivors[:3])
        more = f" and {len(survivors) - 3} more" if len(survivors) > 3 else ""
        return (
            f"the tests catch {self.count('killed')} of {self.built} built mutants ({self.kill_rate:.0%}); "
            f"survivors: {shown}{more}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kill_rate": self.kill_rate,
            "weak": self.weak,
            "reason": self.reason(),
            **{verdict: self.count(verdict) for verdict in VERDICTS},
            "mutants": [o.__dict__ for o in self.outcomes],
        }


def short_diff(before: str, after: str, max_lines: int = 12) -> str:
    """The unified diff of ``before`` to ``after`` without file headers and context, cut at ``max_lines``."""
    lines = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if not line.startswith(("---", "+++"))
    ]
    cut = lines[:max_lines] + ([f"... ({len(lines) - max_lines} more lines)"] if len(lines) > max_lines else [])
    return "\n".join(cut)


def row_mutants(problem: Problem, limit: int = MAX_MUTANTS) -> list[Mutant]:
    """The row's mutants: wrong versions of its reference's asked functions (every function when its
    tests call none it defines)."""
    return mutants(problem.solution, asked_functions(problem.tests, problem.solution) or None, limit=limit)


def _not_measurable(problem: Problem) -> str:
    if not problem.solution.strip():
        return "no reference solution: nothing to mutate"
    if not problem.tests.strip():
        return "no hidden tests"
    return ""


def judge_row(problem: Problem, made: list[Mutant], reference: Result, results: list[Result]) -> RowAudit:
    """The row's audit from its reference's result and its mutants' (in ``made`` order)."""
    audit = RowAudit(problem.id)
    if reference.status is not Status.OK:
        audit.not_measured = f"reference does not pass: {reference.status.value} ({reference.reason or 'no detail'})"
        return audit
    for mutant, result in zip(made, results):
        if result.status is Status.OK:
            verdict = "survived"
        elif result.status in _UNBUILT or (not result.build.ok and result.status is not Status.SANDBOX_ERROR):
            verdict = "unbuilt"
        elif result.status in _KILLING:
            verdict = "killed"
        else:
            verdict = "unknown"
        diff = short_diff(problem.solution, mutant.source) if verdict == "survived" else ""
        audit.outcomes.append(
            MutantOutcome(mutant.operator, mutant.line, mutant.change, verdict, result.status.value, diff)
        )
    if not made:
        audit.not_measured = "no mutant could be made (no asked function with a body to change)"
    return audit


def audit_problems(problems: list[Problem], grader: Any, limit: int = MAX_MUTANTS) -> list[RowAudit]:
    """Every row's audit; all jobs in one grading call (the grader batches each row's group)."""
    plans: list[tuple[Problem, list[Mutant]]] = []
    jobs: list[Job | InvalidJob] = []
    for problem in problems:
        if _not_measurable(problem):
            plans.append((problem, []))
            continue
        made = row_mutants(problem, limit)
        plans.append((problem, made))
        jobs.append(problem.job_or_invalid(problem.solution, f"{problem.id}#reference"))
        jobs += [problem.job_or_invalid(m.source, f"{problem.id}#mutant-{i}") for i, m in enumerate(made)]
    results = iter(grader.grade(jobs) if jobs else [])
    audits = []
    for problem, made in plans:
        why = _not_measurable(problem)
        if why:
            audits.append(RowAudit(problem.id, not_measured=why))
            continue
        reference = next(results)
        audit = judge_row(problem, made, reference, [next(results) for _ in made])
        audit.graded = 1 + len(made)
        audits.append(audit)
    return audits


def read_rows(spec: str, limit: int = 0) -> tuple[list[Problem], list[str]]:
    """The usable rows of ``spec`` (the first ``limit`` when > 0) and a message for each bad one: a bad
    line or record is named and skipped, never the others with it."""
    problems: list[Problem] = []
    errors: list[str] = []
    seen: set[str] = set()
    for where, record in read_records(spec):
        try:
            if isinstance(record, DataError):
                raise record
            problem = normalize(record, where)
        except DataError as exc:
            errors.append(str(exc))
            continue
        if problem.id in seen:
            errors.append(f"{where}: duplicate id {problem.id!r} (the first row of that id is audited)")
            continue
        seen.add(problem.id)
        problems.append(problem)
    return (problems[:limit] if limit > 0 else problems), errors


def summarize(audits: list[RowAudit], errors: list[str], seconds: float, meta: dict[str, Any]) -> dict[str, Any]:
    """The audit's figures: rows, mutants by verdict and operator, the kill-rate distribution, weak rows."""
    rates = [a.kill_rate for a in audits if a.kill_rate is not None]
    outcomes = [o for a in audits for o in a.outcomes]
    graded = sum(a.graded for a in audits)
    by_operator = {
        name: {verdict: sum(o.operator == name and o.verdict == verdict for o in outcomes) for verdict in VERDICTS}
        for name in OPERATORS
    }
    weak = sorted((a for a in audits if a.weak), key=lambda a: (a.kill_rate or 0.0, a.id))
    return {
        **meta,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "rows": len(audits),
        "unreadable": errors,
        "measured": len(rates),
        "not_measured": {a.id: a.reason() for a in audits if a.kill_rate is None},
        "mutants": {"made": len(outcomes), **{v: sum(o.verdict == v for o in outcomes) for v in VERDICTS}},
        "by_operator": {k: v for k, v in by_operator.items() if any(v.values())},
        "kill_rate": {
            "mean": statistics.fmean(rates) if rates else None,
            "median": statistics.median(rates) if rates else None,
            "min": min(rates) if rates else None,
            "rows": {label: sum(low <= r < high for r in rates) for label, low, high in BUCKETS},
        },
        "weak_below": WEAK_BELOW,
        "weak": [{"id": a.id, "kill_rate": a.kill_rate, "reason": a.reason()} for a in weak],
        "seconds": round(seconds, 1),
        "seconds_per_row": round(seconds / len(audits), 2) if audits else None,
        "seconds_per_job": round(seconds / graded, 3) if graded else None,
        "jobs": graded,
    }


def _rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def markdown(summary: dict[str, Any], audits: list[RowAudit]) -> str:
    m, k = summary["mutants"], summary["kill_rate"]
    lines = [
        f"# Test-suite audit: {summary['file']}",
        "",
        f"{summary['date']}, {summary['cores']} cores, `{summary['command']}`: {summary['seconds']} s "
        f"({summary['seconds_per_row']} s a row, {summary['seconds_per_job']} s a graded program, "
        f"{summary['jobs']} programs: references and mutants).",
        "",
        "| rows | measured | mutants made | built | killed | survived | not built | unknown | kill rate mean / median / min |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {summary['rows']} | {summary['measured']} | {m['made']} | {m['killed'] + m['survived']} | {m['killed']} "
        f"| {m['survived']} | {m['unbuilt']} | {m['unknown']} | {_rate(k['mean'])} / {_rate(k['median'])} / {_rate(k['min'])} |",
        "",
        "Rows by kill rate: " + ", ".join(f"{label} {n}" for label, n in k["rows"].items()) + ".",
        "",
        "| operator | killed | survived | not built | unknown |",
        "|---|---|---|---|---|",
    ]
    for name, counts in summary["by_operator"].items():
        lines.append(
            f"| {name} | {counts['killed']} | {counts['survived']} | {counts['unbuilt']} | {counts['unknown']} |"
        )
    lines += ["", f"## Weak rows (kill rate < {summary['weak_below']})", ""]
    if not summary["weak"]:
        lines.append("None.")
    for row in summary["weak"]:
        lines.append(f"- **{row['id']}** ({_rate(row['kill_rate'])}): {row['reason']}")
    if summary["not_measured"] or summary["unreadable"]:
        lines += ["", "## Not measured", ""]
        lines += [f"- {pid}: {why}" for pid, why in summary["not_measured"].items()]
        lines += [f"- unreadable: {e}" for e in summary["unreadable"]]
    weak_ids = {row["id"] for row in summary["weak"]}
    lines += ["", "## Survivors of weak rows", ""]
    for audit in audits:
        if audit.id in weak_ids:
            for o in audit.outcomes:
                if o.verdict == "survived":
                    lines += [f"{audit.id}, line {o.line}, {o.operator}: {o.change}", "", "```diff", o.diff, "```", ""]
    return "\n".join(lines) + "\n"


def plot(audits: list[RowAudit], path: Path, title: str) -> Path | None:
    """A histogram of the rows' kill rates (None when matplotlib is missing)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist([a.kill_rate for a in audits if a.kill_rate is not None], bins=20, range=(0, 1), color="#4c72b0")
    ax.axvline(WEAK_BELOW, color="#c44e52", linestyle="--", label=f"weak below {WEAK_BELOW}")
    ax.set_xlabel("share of built mutants the hidden tests catch")
    ax.set_ylabel("rows")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_audit(out: Path, audits: list[RowAudit], summary: dict[str, Any]) -> dict[str, Path]:
    """``report.json`` (the summary), ``report.md``, ``results.jsonl`` (a row each) and ``report.png``."""
    paths = {"report": out / "report.json", "markdown": out / "report.md", "results": out / "results.jsonl"}
    write_text(paths["report"], json.dumps(summary, indent=2) + "\n")
    write_text(paths["markdown"], markdown(summary, audits))
    write_lines(paths["results"], (json.dumps(a.to_dict()) for a in audits))
    png = plot(audits, out / "report.png", f"Kill rates: {summary['file']}")
    if png is not None:
        paths["plot"] = png
    return paths


def usable_rows(spec: str, limit: int = 0) -> tuple[list[Problem], list[str]]:
    """:func:`read_rows`, or a :class:`DataError` when no row is usable (before any output is made)."""
    problems, errors = read_rows(spec, limit)
    if not problems:
        raise DataError(f"{spec}: no usable problems" + (f" ({errors[0]})" if errors else ""))
    return problems, errors


def timed_audit(
    problems: list[Problem], grader: Any, mutants_per_row: int = MAX_MUTANTS
) -> tuple[list[RowAudit], float]:
    """:func:`audit_problems` and the seconds it took."""
    start = time.monotonic()
    audits = audit_problems(problems, grader, mutants_per_row)
    return audits, time.monotonic() - start
