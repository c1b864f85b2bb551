"""reward_sandbox: grade untrusted Rust programs (build, clippy, tests) fast and in isolation.

Usable on its own, without torch::

    from reward_sandbox import Grader
    with Grader(workers=2) as grader:
        results = grader.grade([{"id": "a", "source": "pub fn f() -> u8 { 1 }"}])
"""

from .backends import BACKENDS, CARGO, FAST
from .isolation import BWRAP, RLIMITS, IsolationUnavailable, bwrap_problem, choose_level
from .jobs import InvalidJob, Job, TestMode
from .limits import Limits
from .pool import Grader, grade
from .results import BuildReport, ClippyReport, Diagnostic, Result, TestCounts, TestReport
from .status import Status
from .toolchain import Toolchain, ToolchainError, find_toolchain

__all__ = [
    "BACKENDS", "BWRAP", "CARGO", "FAST", "RLIMITS",
    "BuildReport", "ClippyReport", "Diagnostic", "Grader", "InvalidJob", "IsolationUnavailable", "Job",
    "Limits", "Result", "Status", "TestCounts", "TestMode", "TestReport", "Toolchain", "ToolchainError",
    "bwrap_problem", "choose_level", "find_toolchain", "grade",
]  # fmt: skip
__version__ = "0.1.0"
