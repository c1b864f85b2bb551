"""The one status a graded job ends with.

Statuses are ordered by blame: ``sandbox_error`` is the harness's own fault and never the
program's, so rewards built on it must treat it as "unknown", not as a failure.
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """Outcome of grading one job, from the program's point of view."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    TEST_FAILURE = "test_failure"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    SANDBOX_ERROR = "sandbox_error"
    INVALID_INPUT = "invalid_input"

    @property
    def is_program_verdict(self) -> bool:
        """True when the status says something about the program (not the harness or input)."""
        return self not in (Status.SANDBOX_ERROR, Status.INVALID_INPUT)
