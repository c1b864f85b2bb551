"""Which jobs may share one compiler run, and with whom.

In a batch every program becomes a module of one crate. A program whose meaning could change by
moving from the crate root into a module, or that could reach a neighbour, is graded alone from
the start. What moves with the module is checked on the program's code (comments and literals
blanked by the real lexer):
- ``crate`` paths (``crate::``, ``$crate``, ``extern crate``) and ``super`` paths that would climb
  out of the program's own file name the crate root, which is the batch's, not the program's;
  ``pub(crate)`` is the one ``crate`` that means the same in both places;
- inner attributes are crate-level in a crate root (``no_std``, ``recursion_limit``,
  ``deny(missing_docs)`` on the crate) and mean something else on a module; none is taken, not
  even ``#![allow(...)]``, and neither is a lint or attribute that lifts a compiler limit anywhere
  (``long_running_const_eval``, ``recursion_limit``, ...): a build that runs to its deadline
  stalls the whole group, and then costs it a rebuild;
- ``#[macro_export]`` puts a macro at the crate root, where two programs' macros would collide;
- ``#[path]``, ``include!``/``include_str!``/``include_bytes!`` read files relative to the
  program's file, which moves; ``file!``, ``module_path!``, ``type_name``, panic ``Location``s,
  backtraces, ``thread::current`` (names) and thread ids differ in a batch;
- ``#[no_mangle]``, ``#[export_name]``, ``#[link_section]`` and ``extern`` blocks (refused without
  ``unsafe`` anyway) would clash at link time; ``allow_unsafe`` jobs can take over the process;
- edition 2015 resolves ``use`` paths from the crate root.
Only unit-mode jobs with tests (hidden or their own), under bubblewrap and the fast backend, are
batched: each program's runs start in an emptied work directory (``rounds.py``), which under
bubblewrap is the sandbox's private ``/tmp`` and the only place a run can write. A program with no
test at all is only checked alone (metadata, no link): a shared test build would cost it more.
Programs of the same settings (``settings_key``) share compiler runs, whatever their tests (a
step's GRPO groups, pass@k samples, distinct problems in ``eval`` or ``score``): each program keeps
its own hidden-test module, so tests never need to be alike, and the compiler's start, std's
metadata and the link are paid once per batch instead of once per program (``grader.py`` chunks).
"""

from __future__ import annotations

import re

from ..compile.crates import job_crates
from ..compile.lexer import LexError, code_only
from ..jobs import Job, TestMode

MAX_BATCH = 16  # programs per compiler run: one broken program costs the others a rebuild

_INNER_ATTR = re.compile(r"#\s*!\s*\[")
# compiler limits a program can lift: the const evaluator's step lint (an outer `#[allow]` on one
# item is enough), the crate-level limits (inner attributes, refused anyway)
_LIMITS = re.compile(
    r"\b(?:long_running_const_eval|recursion_limit|type_length_limit|move_size_limit|pattern_complexity(?:_limit)?"
    r"|const_eval_limit)\b"
)
_PUB_CRATE = re.compile(r"\bpub\s*\(\s*crate\s*\)")
_CRATE = re.compile(r"\bcrate\b")
_REFUSED = re.compile(
    r"\b(?:macro_export|type_name|type_name_of_val|module_path|Location|Backtrace|ThreadId|no_mangle|export_name|"
    r"link_section|extern|unsafe|include|include_str|include_bytes|cfg_attr)\b|#\s*\[\s*path\b|\bfile\s*!"
    r"|\b(?:std|core)\s*::\s*file\b|\bfile\s+as\b"  # `use std::file as here;` (paths differ in a batch)
    r"|\bthread\s*::\s*current\b"
)
_TOKEN = re.compile(r"\bmod\s+\w+\s*\{|\bsuper\b(?:\s*::\s*super\b)*|[{}]")
_MACRO_RULES = re.compile(r"\bmacro_rules\b")
_TEST_ATTR = re.compile(r"#\s*\[\s*test\s*\]")  # what ``assemble`` counts as the program having own tests


def _super_escapes(code: str) -> bool:
    """Whether some ``super`` path climbs above the program's own file (``super`` at its top level,
    or more ``super::`` steps than the inline modules around it). A ``super`` written inside a macro
    lands where the macro is used, so any ``super`` next to ``macro_rules!`` counts as escaping."""
    if "super" in code and _MACRO_RULES.search(code):
        return True
    stack: list[bool] = []  # per open brace: does it open an inline module?
    for match in _TOKEN.finditer(code):
        text = match.group(0)
        if text == "}":
            if stack:
                stack.pop()
        elif text.endswith("{"):
            stack.append(text != "{")
        elif text.count("super") > sum(stack):
            return True
    return False


def alone_reason(job: Job) -> str | None:
    """None when ``job`` may be graded in a batch; else why it is graded alone."""
    if job.test_mode is not TestMode.UNIT:
        return "only unit-mode jobs are batched"
    if job.allow_unsafe:
        return "allow_unsafe"
    if job.edition == "2015":
        return "edition 2015 resolves paths from the crate root"
    try:
        code = code_only(job.source)
    except LexError:
        return "the source does not lex"
    if not job.tests.strip() and not _TEST_ATTR.search(code):
        return "no tests: the program is only checked"
    if _INNER_ATTR.search(code):
        return "an inner attribute"
    limit = _LIMITS.search(code)
    if limit:
        return f"`{limit.group(0)}` may lift a compiler limit"
    if _CRATE.search(_PUB_CRATE.sub("", code)):
        return "a crate path"
    refused = _REFUSED.search(code)
    if refused:
        return f"uses `{refused.group(0)}`"
    if _super_escapes(code):
        return "a super path above the program's file"
    try:  # the hidden tests move into a module of the program's module: the same paths must hold there
        tests = code_only(job.tests)
    except LexError:
        return "the tests do not lex"
    if _CRATE.search(_PUB_CRATE.sub("", tests)) or _REFUSED.search(tests) or _INNER_ATTR.search(tests):
        return "the tests use a crate path, an inner attribute or a construct that differs in a batch"
    return None


def settings_key(job: Job) -> tuple[object, ...]:
    """Jobs with equal keys compile with the same flags and run under the same limits, whatever their
    tests. The crates a job links are part of its flags: programs linking different sets are graded
    apart, never against the union, since every ``--extern`` name is in scope in every module
    and could make a neighbour's ``use rand::..`` of its own ``mod rand`` ambiguous."""
    return (
        job.test_mode,
        job.crate_name,
        job.edition,
        job.timeout_s,
        job.include_ignored,
        job.opt_level,
        job_crates(job),
    )


def batch_key(job: Job) -> tuple[object, ...]:
    """Jobs with equal keys share their tests as well as their settings (a GRPO group, pass@k
    samples). Batches need only ``settings_key``; this one names the finer grouping."""
    return (job.tests, *settings_key(job))
