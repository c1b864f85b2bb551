"""The result record of a graded job, and its JSON form."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .status import Status


@dataclass(frozen=True)
class Diagnostic:
    """One compiler or clippy message, located in the job's own source."""

    level: str
    code: str | None
    message: str
    line: int | None
    file: str = ""
    rendered: str = ""


@dataclass(frozen=True)
class BuildReport:
    ok: bool
    errors: int = 0
    diagnostics: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True)
class ClippyReport:
    ok: bool
    warnings: int = 0
    diagnostics: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True)
class TestCounts:
    """Counts for a group of tests."""

    __test__ = False

    passed: int = 0
    failed: int = 0
    ignored: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.ignored

    @property
    def ok(self) -> bool:
        return self.passed > 0 and self.failed == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "passed": self.passed,
            "failed": self.failed,
            "ignored": self.ignored,
            "total": self.total,
        }


@dataclass(frozen=True)
class SuiteReport:
    """One test run: the hidden tests, or the program's own. ``trusted`` is False when the run did
    not reach its end (crash, ``process::exit``, forged output); then no test counts as passed.
    ``expected`` is how many tests the job holds: a run that saw fewer is never ``ok``."""

    ran: bool = False
    trusted: bool = False
    passed: int = 0
    failed: int = 0
    ignored: int = 0
    expected: int = 0
    failures: tuple[str, ...] = ()
    passes: tuple[str, ...] = ()
    note: str = ""

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.ignored

    @property
    def counts(self) -> TestCounts:
        return TestCounts(self.passed, self.failed, self.ignored)

    @property
    def ok(self) -> bool:
        return self.ran and self.trusted and self.passed > 0 and self.failed == 0 and self.total >= self.expected

    def to_dict(self) -> dict[str, Any]:
        out = {
            "ok": self.ok,
            "ran": self.ran,
            "trusted": self.trusted,
            "passed": self.passed,
            "failed": self.failed,
            "ignored": self.ignored,
            "total": self.total,
            "expected": self.expected,
            "failures": list(self.failures),
            "passes": list(self.passes),
        }
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SuiteReport:
        return cls(
            ran=d.get("ran", False),
            trusted=d.get("trusted", False),
            passed=d["passed"],
            failed=d["failed"],
            ignored=d["ignored"],
            expected=d.get("expected", 0),
            failures=tuple(d.get("failures", ())),
            passes=tuple(d.get("passes", ())),
            note=d.get("note", ""),
        )


@dataclass(frozen=True)
class TestReport:
    """The hidden tests and the program's own tests, run apart so one cannot spoil the other."""

    __test__ = False

    hidden: SuiteReport = field(default_factory=SuiteReport)
    own: SuiteReport = field(default_factory=SuiteReport)
    output: str = ""  # panic messages and crash notes, not kept in the JSON form (see Result.output_tail)
    # What the program's own tests said, and only they (no hidden-test text can reach it): their panic
    # messages, or when they do not compile, the compiler's errors in the program's own files as
    # ``line N: error[CODE]: message``. Kept in the JSON form: repair feedback shows it to the model.
    own_output: str = ""

    @property
    def ran(self) -> bool:
        return self.hidden.ran or self.own.ran

    @property
    def trusted(self) -> bool:
        """Every suite that ran reached its end honestly."""
        return self.ran and all(s.trusted for s in (self.hidden, self.own) if s.ran)

    @property
    def counts(self) -> TestCounts:
        return TestCounts(
            self.hidden.passed + self.own.passed,
            self.hidden.failed + self.own.failed,
            self.hidden.ignored + self.own.ignored,
        )

    @property
    def failures(self) -> tuple[str, ...]:
        return tuple(sorted(self.own.failures + self.hidden.failures))

    @property
    def passes(self) -> tuple[str, ...]:
        return tuple(sorted(self.own.passes + self.hidden.passes))

    @property
    def note(self) -> str:
        return "; ".join(f"{name}: {s.note}" for name, s in (("hidden", self.hidden), ("own", self.own)) if s.note)

    @property
    def ok(self) -> bool:
        suites = [s for s in (self.hidden, self.own) if s.ran or s.expected]
        return bool(suites) and all(s.ok for s in suites)

    def to_dict(self) -> dict[str, Any]:
        out = self.counts.to_dict()
        out.update(ok=self.ok, ran=self.ran, trusted=self.trusted, own=self.own.to_dict(), hidden=self.hidden.to_dict())
        out["failures"] = list(self.failures)
        out["passes"] = list(self.passes)
        if self.own_output:
            out["own_output"] = self.own_output
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Result:
    """One job's verdict. ``reason`` is a human message; ``status`` is what programs should read."""

    id: str
    status: Status
    build: BuildReport = field(default_factory=lambda: BuildReport(ok=False))
    clippy: ClippyReport = field(default_factory=lambda: ClippyReport(ok=False))
    tests: TestReport = field(default_factory=TestReport)
    duration_s: float = 0.0
    isolation: str = "none"
    backend: str = "fast"
    reason: str = ""
    cached: bool = False
    output_tail: str = ""
    measures: dict[str, Any] = field(default_factory=dict)  # per step: exit_code, signal, cpu_s, wall_s, max_rss_mb

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "build": {
                "ok": self.build.ok,
                "errors": self.build.errors,
                "diagnostics": [asdict(d) for d in self.build.diagnostics],
            },
            "clippy": {
                "ok": self.clippy.ok,
                "warnings": self.clippy.warnings,
                "diagnostics": [asdict(d) for d in self.clippy.diagnostics],
            },
            "tests": self.tests.to_dict(),
            "duration_s": round(self.duration_s, 4),
            "isolation": self.isolation,
            "backend": self.backend,
            "reason": self.reason,
            "cached": self.cached,
            "output_tail": self.output_tail,
            "measures": self.measures,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """Inverse of :meth:`to_dict` (used by the cache and the HTTP client)."""

        def diags(items: list[dict[str, Any]]) -> tuple[Diagnostic, ...]:
            return tuple(Diagnostic(**d) for d in items)

        t = data["tests"]
        return cls(
            id=data["id"],
            status=Status(data["status"]),
            build=BuildReport(data["build"]["ok"], data["build"]["errors"], diags(data["build"]["diagnostics"])),
            clippy=ClippyReport(data["clippy"]["ok"], data["clippy"]["warnings"], diags(data["clippy"]["diagnostics"])),
            tests=TestReport(
                hidden=SuiteReport.from_dict(t["hidden"]),
                own=SuiteReport.from_dict(t["own"]),
                own_output=t.get("own_output", ""),
            ),
            duration_s=data.get("duration_s", 0.0),
            isolation=data.get("isolation", "none"),
            backend=data.get("backend", "fast"),
            reason=data.get("reason", ""),
            cached=data.get("cached", False),
            output_tail=data.get("output_tail", ""),
            measures=data.get("measures", {}),
        )


def invalid_result(job_id: str, reason: str) -> Result:
    return Result(id=job_id, status=Status.INVALID_INPUT, reason=reason)
