"""Turn a job into crate files that keep the hidden tests out of the program's reach.

The program is untrusted text, so nothing of ours may follow it in the same file: a trailing
``#[cfg(any())]`` would attach to whatever comes next. Our module declarations therefore go
*before* the program's items, right after its inner attributes (``#![...]``, which must stay
first) and on the same line, so the program's line numbers do not move. There:

- the hidden tests' module is declared before any ``macro_rules!`` of the program, so textual
  macro scope cannot reach it, and it imports the std assertion macros by name, which beats a
  ``#[macro_export]`` look-alike arriving through ``use super::*``;
- every generated file and module name carries a fresh random tag, so the program cannot name
  them in ``include_str!`` or shadow them with a module of its own;
- the sentinel (the test that sorts last and proves the run reached its end) prints a nonce it
  reads at run time from descriptor 3. The nonce is in no file and not in the binary.

Hidden tests and the program's own tests run as two separate, filtered runs of one test binary.
When that binary does not build but the program does (say, its own tests do not compile), the
hidden tests are built again against a copy of the program whose ``cfg(test)`` items are off.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from .jobs import Job, TestMode

NONCE_FD = 3
STD_MACROS = (
    "assert, assert_eq, assert_ne, debug_assert, debug_assert_eq, debug_assert_ne, panic, todo, unimplemented, "
    "unreachable, matches, vec, format, print, println, eprint, eprintln, write, writeln"
)
_TEST_ATTR = re.compile(r"#\s*\[\s*test\s*\]")
_CFG_ATTR = re.compile(r"#\s*\[\s*cfg\s*\((?!\s*test\s*\))")
_ATTR_RUN = re.compile(r"(?:#\s*\[[^\]]*\]\s*)+")  # consecutive outer attributes before one item
_CFG_MOD = re.compile(
    r"#\s*\[\s*cfg\s*\((?!\s*test\s*\))[^\]]*\]\s*(?:#\s*\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{"
)
_MACRO_RULES = re.compile(r"\bmacro_rules!\s*\w+\s*[\{\(\[]")
_CFG_CALL = re.compile(r"\bcfg(?:_attr)?\s*!?\s*\(")
_TEST_WORD = re.compile(r"(?<![\w\"])test(?![\w\"])")


@dataclass(frozen=True)
class Assembly:
    """Files to write (relative path -> text) and what the harness must know to read the runs."""

    files: dict[str, str]
    nonce: str
    tag: str
    hidden_expected: int  # tests the job's own ``tests`` hold; a run with fewer is never ok
    has_own_tests: bool
    lib_path: str = "lib.rs"
    test_path: str | None = None  # integration mode: the separate test crate root
    hidden_root: str | None = None  # unit/main mode: program with its own tests off + hidden tests

    @property
    def hidden_filter(self) -> str:
        """libtest name filter that selects the hidden tests and the sentinel, and nothing else."""
        return f"{self.tag}_"

    @property
    def hidden_module(self) -> str:
        return f"{self.tag}_hidden"

    @property
    def sentinel_test(self) -> str:
        return f"zzzz_{self.tag}_end::zzzz_done"

    @property
    def generated(self) -> frozenset[str]:
        """File names the program did not write (their diagnostics are not the program's)."""
        return frozenset(name for name in self.files if name != self.lib_path)


def skip_trivia(text: str, pos: int) -> int:
    """Index of the first character at or after ``pos`` that is not whitespace or a comment."""
    n = len(text)
    while pos < n:
        if text[pos].isspace():
            pos += 1
        elif text.startswith("//", pos):
            end = text.find("\n", pos)
            pos = n if end < 0 else end + 1
        elif text.startswith("/*", pos):
            depth, pos = 1, pos + 2
            while pos < n and depth:
                if text.startswith("/*", pos):
                    depth, pos = depth + 1, pos + 2
                elif text.startswith("*/", pos):
                    depth, pos = depth - 1, pos + 2
                else:
                    pos += 1
        else:
            break
    return pos


def _skip_string(text: str, pos: int) -> int:
    """End of the string literal starting at ``pos`` ("..." or r#"..."#)."""
    if text[pos] == "r":
        hashes = 0
        pos += 1
        while pos < len(text) and text[pos] == "#":
            hashes, pos = hashes + 1, pos + 1
        end = text.find('"' + "#" * hashes, pos + 1)
        return len(text) if end < 0 else end + 1 + hashes
    pos += 1
    while pos < len(text) and text[pos] != '"':
        pos += 2 if text[pos] == "\\" else 1
    return pos + 1


def _skip_brackets(text: str, pos: int) -> int:
    """End of the bracketed group starting at ``text[pos]`` (one of ``([{``), skipping strings."""
    depth = 0
    while pos < len(text):
        ch = text[pos]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return pos + 1
        elif ch == '"' or (ch == "r" and re.match(r'r#*"', text[pos : pos + 8])):
            pos = _skip_string(text, pos)
            continue
        pos += 1
    return len(text)


def inner_attributes_end(text: str) -> int:
    """Offset just after the leading inner attributes and comments: the first place an item may go."""
    pos = end = skip_trivia(text, 0)
    while (
        text.startswith("#!", pos)
        and skip_trivia(text, pos + 2) < len(text)
        and text[skip_trivia(text, pos + 2)] == "["
    ):
        end = _skip_brackets(text, skip_trivia(text, pos + 2))
        pos = skip_trivia(text, end)
    return end


def count_tests(text: str) -> int:
    """A lower bound on the ``#[test]`` functions ``text`` (trusted test code) always compiles to:
    tests behind a ``#[cfg(...)]`` other than ``cfg(test)`` (on the test or its module: features are
    off) and tests written
    inside ``macro_rules!`` bodies
    (counted by their expansions, unknown here) are left out."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    spans = sorted(
        (m.start(), _skip_brackets(code, m.end() - 1)) for m in [*_MACRO_RULES.finditer(code), *_CFG_MOD.finditer(code)]
    )
    kept, pos = [], 0
    for start, end in spans:
        if start >= pos:
            kept.append(code[pos:start])
            pos = end
    code = "".join(kept) + code[pos:]
    count = 0
    for match in _ATTR_RUN.finditer(code):
        attrs = match.group(0)
        count += bool(_TEST_ATTR.search(attrs)) and not _CFG_ATTR.search(attrs)
    return count


def without_own_tests(program: str) -> str:
    """The program with its ``cfg(test)`` items and ``#[test]`` functions off, as in a non-test build."""
    out, pos = [], 0
    for match in _CFG_CALL.finditer(program):
        if match.start() < pos:
            continue
        end = _skip_brackets(program, match.end() - 1)
        out.append(program[pos : match.end()])
        out.append(_TEST_WORD.sub("any()", program[match.end() : end]))
        pos = end
    out.append(program[pos:])
    return _TEST_ATTR.sub("#[cfg(any())]", "".join(out))


def _decl(path: str, module: str, cfg_test: bool = True) -> str:
    return f'{"#[cfg(test)] " if cfg_test else ""}#[path = "{path}"] mod {module}; '


def _insert(program: str, text: str) -> str:
    at = inner_attributes_end(program)
    return program[:at] + text + program[at:]


def _sentinel() -> str:
    return (
        "#![allow(warnings, clippy::all)]\n"
        "#[test]\n"
        "fn zzzz_done() {\n"
        "    use std::io::{Read, Write};\n"
        "    use std::os::unix::io::FromRawFd;\n"
        "    let mut nonce = Vec::new();\n"
        "    // The binary is exec-only, so /proc/self/fd is closed to it: read the inherited fd itself.\n"
        f"    let mut fd = std::mem::ManuallyDrop::new(unsafe {{ std::fs::File::from_raw_fd({NONCE_FD}) }});\n"
        "    let mut byte = [0u8; 1];\n"
        "    while let Ok(1) = fd.read(&mut byte) {\n"
        "        if byte[0] == b'\\n' { break; }\n"
        "        nonce.push(byte[0]);\n"
        "    }\n"
        "    let mut out = std::io::stdout();\n"
        '    let _ = out.write_all(b"\\nRG_SENTINEL_");\n'
        "    let _ = out.write_all(&nonce);\n"
        '    let _ = out.write_all(b"\\n");\n'
        "    let _ = out.flush();\n"
        "}\n"
    )


def assemble(job: Job) -> Assembly:
    """Lay out ``job`` as crate files with fresh random names and a fresh nonce."""
    tag = "rg" + secrets.token_hex(8)
    nonce = secrets.token_hex(16)
    sentinel_file, sentinel_mod = f"{tag}_s.rs", f"zzzz_{tag}_end"
    hidden_file, hidden_mod = f"{tag}_h.rs", f"{tag}_hidden"
    imports = f"#[allow(unused_imports)] use ::std::{{{STD_MACROS}}}; "
    own = _TEST_ATTR.search(re.sub(r"//[^\n]*", "", job.source)) is not None
    files = {sentinel_file: _sentinel()}
    if job.test_mode is TestMode.INTEGRATION:
        files["lib.rs"] = _insert(job.source, _decl(sentinel_file, sentinel_mod))
        test_file = f"{tag}_t.rs"
        files[test_file] = (
            _insert(job.tests, imports) + "\n" + _decl(sentinel_file, sentinel_mod, cfg_test=False) + "\n"
        )
        return Assembly(files, nonce, tag, count_tests(job.tests), own, test_path=test_file)
    if not job.tests.strip():
        decls = _decl(sentinel_file, sentinel_mod) if own else ""
        return Assembly(
            {**files, "lib.rs": _insert(job.source, decls)} if own else {"lib.rs": job.source}, nonce, tag, 0, own
        )
    hidden = f"#[allow(unused_imports)] use super::*;\n{imports}\n{job.tests}\n"
    expected = count_tests(job.tests)
    if job.test_mode is TestMode.MAIN:
        hidden += "\n#[test]\nfn rg_main() {\n    main();\n}\n"
        expected = 1
    files[hidden_file] = hidden
    decls = _decl(hidden_file, hidden_mod) + _decl(sentinel_file, sentinel_mod)
    files["lib.rs"] = _insert(job.source, decls)
    root = f"{tag}_r.rs"
    files[root] = _insert(without_own_tests(job.source), decls)
    return Assembly(files, nonce, tag, expected, own, hidden_root=root)
