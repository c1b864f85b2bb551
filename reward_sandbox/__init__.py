"""reward_sandbox: grade untrusted Rust programs (build, clippy, tests) fast and in isolation.

Usable on its own, without torch::

    from reward_sandbox import Settings, open_grader
    with open_grader(Settings(workers=2)) as grader:
        results = grader.grade([{"id": "a", "source": "pub fn f() -> u8 { 1 }"}])
"""

from .backends import BACKENDS, CARGO, FAST
from .cache import ResultCache
from .compile.toolchain import Toolchain, ToolchainError, find_toolchain
from .grader import Grader, grade
from .isolation.levels import BWRAP, RLIMITS, Isolation, IsolationUnavailable, bwrap_problem, choose_level
from .isolation.limits import Limits
from .jobs import InvalidJob, Job, TestMode
from .results import BuildReport, ClippyReport, Diagnostic, Result, SuiteReport, TestCounts, TestReport
from .service.client import RemoteGrader, RemoteGraderError
from .settings import GraderLike, Settings, open_grader
from .status import Status

__all__ = [
    "BACKENDS",
    "BWRAP",
    "CARGO",
    "FAST",
    "RLIMITS",
    "BuildReport",
    "ClippyReport",
    "Diagnostic",
    "Grader",
    "GraderLike",
    "InvalidJob",
    "Isolation",
    "IsolationUnavailable",
    "Job",
    "Limits",
    "RemoteGrader",
    "RemoteGraderError",
    "Result",
    "ResultCache",
    "Settings",
    "Status",
    "SuiteReport",
    "TestCounts",
    "TestMode",
    "TestReport",
    "Toolchain",
    "ToolchainError",
    "bwrap_problem",
    "choose_level",
    "find_toolchain",
    "grade",
    "open_grader",
]
__version__ = "0.1.0"
