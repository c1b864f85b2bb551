"""Static checks of a completion's own tests and code, so that rewards resist hacking.

A test earns credit only if it is *meaningful*: it asserts something non-trivial about the
program's own items. ``assert!(true)``, ``assert_eq!(x, x)``, asserts between literals, and
tests that never mention a function or type the program defines earn nothing. Code that
tries to end the test harness early (``process::exit``/``abort``) or redefines the assert
macros is flagged, and its test rewards are zeroed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from reward_sandbox.compile.lexer import LexError, code_only

from .paths import exit_paths

_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_ASSERT = re.compile(r"\b(assert|assert_eq|assert_ne|debug_assert|debug_assert_eq|debug_assert_ne)!\s*[\(\[\{]")
_DEFINED = re.compile(r"\b(?:fn|struct|enum|trait|type|const|static|union)\s+([A-Za-z_][A-Za-z0-9_]*)")
_IMPL_FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
_TEST_FN = re.compile(
    r"#\[test\]\s*((?:#\[[^\]]*\]\s*)*)(?:pub\s+)?(?:async\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)\s*\([^)]*\)[^{]*\{"
)
_CFG_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{")
_MACRO_HIJACK = re.compile(r"macro_rules!\s*(assert|assert_eq|assert_ne|panic|debug_assert\w*)\b")
_KEYWORDS = {
    "let",
    "mut",
    "fn",
    "if",
    "else",
    "for",
    "in",
    "while",
    "loop",
    "match",
    "return",
    "true",
    "false",
    "as",
    "use",
    "super",
    "crate",
    "self",
    "Self",
    "Some",
    "None",
    "Ok",
    "Err",
    "vec",
    "assert",
    "assert_eq",
    "assert_ne",
    "String",
    "Vec",
    "Option",
    "Result",
    "Box",
    "to_string",
    "into",
    "unwrap",
    "clone",
    "iter",
    "collect",
    "len",
    "new",
    "from",
}


@dataclass(frozen=True)
class TestAudit:
    __test__ = False
    name: str
    asserts: int
    meaningful: bool
    reason: str = ""


@dataclass(frozen=True)
class CodeAudit:
    tests: tuple[TestAudit, ...] = ()
    defined: frozenset[str] = frozenset()
    flags: tuple[str, ...] = field(default=())

    @property
    def meaningful_tests(self) -> int:
        return sum(t.meaningful for t in self.tests)

    @property
    def hacked(self) -> bool:
        return bool(self.flags)

    def meaningful_names(self) -> set[str]:
        return {t.name for t in self.tests if t.meaningful}


def code_view(code: str) -> str:
    """The one view of a program that every static check here reads (the audit, the wrong versions
    of ``mutants.py``, the test-module rewards): the sandbox's own lexer (``reward_sandbox.compile.lexer``) blanks comments
    and string/char literals, keeping length, newlines and the literals' delimiters, so brace
    matching and identifier scans see only code, as rustc does. Text that is not lexically valid
    Rust cannot compile, so it earns no test credit: it comes back all blank."""
    try:
        return code_only(code, keep_delimiters=True)
    except LexError:
        return "".join(c if c == "\n" else " " for c in code)


def matching_brace(code: str, open_index: int) -> int:
    """Index of the brace closing the one at ``open_index`` (in comment/string-free code)."""
    depth = 0
    for i in range(open_index, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(code)


def _split_args(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(c)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _assert_calls(body: str) -> list[tuple[str, list[str]]]:
    calls = []
    for m in _ASSERT.finditer(body):
        start = m.end() - 1
        depth, j = 0, start
        while j < len(body):
            if body[j] in "([{":
                depth += 1
            elif body[j] in ")]}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        calls.append((m.group(1), _split_args(body[start + 1 : j])))
    return calls


def _is_literal(arg: str) -> bool:
    return (
        not any(ident not in ("true", "false") for ident in _IDENT.findall(arg))
        or re.fullmatch(r"-?[\d_.]+\w*", arg) is not None
    )


def audit_code(code: str) -> CodeAudit:
    """Audit a program: which of its own tests are meaningful, and does it try to cheat."""
    clean = code_view(code)
    test_spans = []
    for m in _CFG_TEST_MOD.finditer(clean):
        test_spans.append((m.start(), matching_brace(clean, m.end() - 1)))

    def in_tests(pos: int) -> bool:
        return any(a <= pos <= b for a, b in test_spans)

    defined = frozenset(
        name
        for m in list(_DEFINED.finditer(clean)) + list(_IMPL_FN.finditer(clean))
        if not in_tests(m.start())
        for name in [m.group(1)]
        if name not in ("main", "tests")
    )
    flags = []
    non_test = "".join(c if not in_tests(i) else " " for i, c in enumerate(clean))
    if exit_paths(code, lambda pos: not in_tests(pos)):  # same offsets as the code view
        flags.append("exits the process")
    if _MACRO_HIJACK.search(clean):
        flags.append("redefines an assert macro")
    if "#[macro_export]" in non_test and "panic" in non_test and "macro_rules!" in non_test:
        flags.append("exports macros that panic")
    tests = []
    for m in _TEST_FN.finditer(clean):
        attrs, name = m.group(1), m.group(2)
        end = matching_brace(clean, m.end() - 1)
        body = clean[m.end() : end]
        module = next(
            (
                mm.group(1)
                for mm in _CFG_TEST_MOD.finditer(clean)
                if mm.start() < m.start() <= matching_brace(clean, mm.end() - 1)
            ),
            None,
        )
        full_name = f"{module}::{name}" if module else name
        calls = _assert_calls(body)
        uses_code = bool(set(_IDENT.findall(body)) & defined)
        should_panic = "should_panic" in attrs
        if "ignore" in attrs:
            tests.append(TestAudit(full_name, len(calls), False, "ignored"))
            continue
        if not uses_code:
            tests.append(TestAudit(full_name, len(calls), False, "never uses the program's items"))
            continue
        if should_panic:
            tests.append(TestAudit(full_name, len(calls), True))
            continue
        real = 0
        for kind, args in calls:
            if not args:
                continue
            if kind.endswith(("_eq", "_ne")) and len(args) >= 2:
                a, b = args[0], args[1]
                if re.sub(r"\s", "", a) == re.sub(r"\s", "", b) or (_is_literal(a) and _is_literal(b)):
                    continue
                if not (set(_IDENT.findall(a + b)) - _KEYWORDS):
                    continue
            elif _is_literal(args[0]):
                continue
            real += 1
        reason = "" if real else ("no assert" if not calls else "only trivial asserts")
        tests.append(TestAudit(full_name, len(calls), real > 0, reason))
    return CodeAudit(tests=tuple(tests), defined=defined, flags=tuple(flags))
