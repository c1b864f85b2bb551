"""Turn a job into crate files that keep the hidden tests out of the program's reach.

The program is untrusted text, so nothing of ours may follow it in the same file: a trailing
``#[cfg(any())]`` would attach to whatever comes next. Our module declarations therefore go
*before* the program's items, right after its inner attributes (``#![...]``, which must stay
first) and on the same line, so the program's line numbers do not move. There:

- the hidden tests' module is declared before any ``macro_rules!`` of the program, so textual
  macro scope cannot reach it, and it imports the std assertion macros by name, which beats a
  ``#[macro_export]`` look-alike arriving through ``use super::*``, and so the std prelude items
  the tests use (``prelude.py``): the program's own ``Some`` or ``Vec`` never stands in for std's;
- every generated file and module name carries a fresh random tag, so the program cannot name
  them in ``include_str!`` or shadow them with a module of its own;
- the sentinel (the test that sorts last and proves the run reached its end) prints a nonce it
  reads at run time from a root-owned file that the driver writes just before tests run, in a
  directory nobody can list; only the (exec-only) test binary knows its name. The hidden run's
  sentinel sits in the hidden tests' own file.

Hidden tests and the program's own tests run as two separate, filtered runs of one test binary.
When that binary does not build but the program does (say, its own tests do not compile), the
hidden tests are built again against a copy of the program whose ``cfg(test)`` items are off.
"""

from __future__ import annotations

import functools
import re
import secrets
from dataclasses import dataclass

from ..jobs import Job, TestMode
from .lexer import LexError, code_only, inner_attributes_end
from .prelude import after_glob_uses, prelude_imports
from .trait_scope import shadows

NONCE_DIR = ".rg"  # root-owned, mode 0711: the nonce file in it can be read by name only
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
_TEST_WORD = re.compile(r"(?<!\w)test(?!\w)")


@dataclass(frozen=True)
class Assembly:
    """Files to write (relative path -> text) and what the harness must know to read the runs."""

    files: dict[str, str]
    nonce: str
    nonce_path: str  # where the driver writes the nonce (root-owned, unlisted directory) before tests run
    tag: str
    hidden_expected: int  # tests the job's own ``tests`` hold; a run with fewer is never ok
    has_own_tests: bool
    lib_path: str = "lib.rs"
    test_path: str | None = None  # integration mode: the separate test crate root
    hidden_root: str | None = None  # unit/main mode: program with its own tests off + hidden tests
    module: str = ""  # batches: the program's module in the batch crate (``{tag}_m``)
    sentinel_crate: str | None = None  # the sentinel crate's name in this job's test builds, if linked
    shadowed: frozenset[str] = frozenset()  # program trait names kept from the hidden tests (trait_scope.py)

    @property
    def prefix(self) -> str:
        """What starts each of the program's test names: nothing alone, its module in a batch."""
        return f"{self.module}::" if self.module else ""

    @property
    def hidden_module(self) -> str:
        """Also the libtest filter of the hidden run (``{tag}_hidden::`` holds its sentinel too),
        alone and in a batch alike: libtest filters match anywhere in a test's name."""
        return f"{self.tag}_hidden"

    @property
    def hidden_file(self) -> str:
        """The file of the hidden tests, where the compiler's errors about the shadows point."""
        return self.test_path or f"{self.tag}_h.rs"

    @property
    def sentinel_test(self) -> str:
        """The own run's sentinel (integration mode: the hidden run's too)."""
        return f"zzzz_{self.tag}_end::zzzz_done"

    @property
    def hidden_sentinel_test(self) -> str:
        if self.test_path is not None:
            return self.sentinel_test
        return f"{self.hidden_module}::zzzz_{self.tag}_end::zzzz_done"

    @property
    def generated(self) -> frozenset[str]:
        """File names the program did not write (their diagnostics are not the program's)."""
        return frozenset(name for name in self.files if name != self.lib_path)


def _match_bracket(code: str, pos: int) -> int:
    """End of the bracketed group opening at ``code[pos]``, in text whose literals are blanked."""
    depth = 0
    for i in range(pos, len(code)):
        if code[i] in "([{":
            depth += 1
        elif code[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


def _code(text: str) -> str:
    """``text`` with comments and literals blanked; unlexable text is searched as it is."""
    try:
        return code_only(text)
    except LexError:
        return text


def count_tests(text: str) -> int:
    """A lower bound on the ``#[test]`` functions ``text`` (trusted test code) always compiles to:
    tests behind a ``#[cfg(...)]`` other than ``cfg(test)`` (on the test or its module: features are
    off) and tests written inside ``macro_rules!`` bodies (counted by their expansions, unknown
    here) are left out."""
    code = _code(text)
    starts = [*_MACRO_RULES.finditer(code), *_CFG_MOD.finditer(code)]
    spans = sorted((m.start(), _match_bracket(code, m.end() - 1)) for m in starts)
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
    """The program with its ``cfg(test)`` items and ``#[test]`` functions off, as in a non-test build.
    Only code changes: comments, strings and char literals are never touched."""
    code = _code(program)
    edits: list[tuple[int, int, str]] = []
    for match in _CFG_CALL.finditer(code):
        end = _match_bracket(code, match.end() - 1)
        for word in _TEST_WORD.finditer(code, match.end(), end):
            edits.append((word.start(), word.end(), "any()"))
    edits += [(m.start(), m.end(), "#[cfg(any())]") for m in _TEST_ATTR.finditer(code)]
    out, pos = [], 0
    for start, end, text in sorted(set(edits)):
        if start >= pos:
            out += [program[pos:start], text]
            pos = end
    return "".join(out) + program[pos:]


def _decl(path: str, module: str, cfg_test: bool = True) -> str:
    return f'{"#[cfg(test)] " if cfg_test else ""}#[path = "{path}"] mod {module}; '


def _insert(program: str, text: str) -> str:
    """``text`` before the program's first item, on the line where its inner attributes end (line
    numbers stay). Text that does not lex gets it at the very start: nothing can wrap it there,
    and rustc rejects such text anyway."""
    try:
        at = inner_attributes_end(program)
    except LexError:
        at = 0
    return program[:at] + text + program[at:]


def _sentinel_test(nonce_path: str, crate: str | None, edition: str) -> str:
    """The test that sorts last and proves the run reached its end: it prints the nonce, which it
    reads from a root-owned file whose name only this (exec-only) binary knows. With ``crate``
    (the job's name of the prebuilt sentinel crate, ``sentinel.py``) it is one call to it; without,
    the same lines inline (the cargo backend, or where that crate cannot be built). The crate is
    named by an absolute path, which ``#![no_implicit_prelude]`` leaves alone: ``::`` names extern
    crates since 2018; in 2015 it names the crate root, so the module declares the crate itself."""
    if crate is not None:
        if edition == "2015":
            return f'extern crate {crate};\n#[test]\nfn zzzz_done() {{\n    self::{crate}::done("{nonce_path}");\n}}\n'
        return f'#[test]\nfn zzzz_done() {{\n    ::{crate}::done("{nonce_path}");\n}}\n'
    return (
        "#[test]\n"
        "fn zzzz_done() {\n"
        "    use ::std::io::Write;\n"
        f'    let nonce = ::std::fs::read_to_string("{nonce_path}").unwrap_or_default();\n'
        "    let mut out = ::std::io::stdout();\n"
        '    let _ = out.write_all(::std::format!("\\nRG_SENTINEL_{}\\n", nonce.trim()).as_bytes());\n'
        "    let _ = out.flush();\n"
        "}\n"
    )


def assemble(job: Job, work_dir: str, sentinel_crate: bool = False, keep: frozenset[str] = frozenset()) -> Assembly:
    """Lay out ``job`` as crate files with fresh random names and a fresh nonce. ``work_dir`` is the
    steps' view of the work directory, where the driver puts the nonce file just before tests run.
    ``sentinel_crate``: the sentinel tests call the prebuilt sentinel crate (``sentinel.py``) under
    the name ``Assembly.sentinel_crate``, which every ``--test`` build must then get as an
    ``--extern``; else they carry its body inline. ``keep``: program trait names a failed build of
    the hidden tests showed they need (``trait_scope.trait_needs``), left in their scope."""
    tag = "rg" + secrets.token_hex(8)
    crate = f"{tag}_k" if sentinel_crate else None
    nonce = secrets.token_hex(16)
    nonce_path = f"{work_dir}/{NONCE_DIR}/{secrets.token_hex(16)}"
    sentinel_file, sentinel_mod = f"{tag}_s.rs", f"zzzz_{tag}_end"
    hidden_file, hidden_mod = f"{tag}_h.rs", f"{tag}_hidden"
    # std's names, and none of the program's traits but those a build showed the tests need (prelude.py, trait_scope.py)
    macros = f"#[allow(unused_imports)] use ::std::{{{STD_MACROS}}}; "
    prelude = prelude_imports(job.tests, job.edition)
    shade = shadows(job.source, job.tests, outer_uses=macros + prelude, inner_uses=prelude, keep=keep)
    imports = macros + prelude + shade.outer
    # a glob of theirs in an inner scope beats our outer items: the same imports go next to it
    tests = after_glob_uses(job.tests, prelude + shade.inner)
    own = _TEST_ATTR.search(_code(job.source)) is not None
    sentinel = "#![allow(warnings, clippy::all)]\n" + _sentinel_test(nonce_path, crate, job.edition)
    files = {sentinel_file: sentinel}
    layout = functools.partial(
        Assembly,
        nonce=nonce,
        nonce_path=nonce_path,
        tag=tag,
        has_own_tests=own,
        sentinel_crate=crate,
        shadowed=shade.names if job.tests.strip() else frozenset(),
    )
    if job.test_mode is TestMode.INTEGRATION:
        files["lib.rs"] = _insert(job.source, _decl(sentinel_file, sentinel_mod))
        test_file = f"{tag}_t.rs"
        files[test_file] = _insert(tests, imports) + "\n" + _decl(sentinel_file, sentinel_mod, cfg_test=False) + "\n"
        return layout(
            files,
            hidden_expected=count_tests(job.tests),
            test_path=test_file,
        )
    if not job.tests.strip():
        files = (
            {**files, "lib.rs": _insert(job.source, _decl(sentinel_file, sentinel_mod))}
            if own
            else {"lib.rs": job.source}
        )
        return layout(
            files,
            hidden_expected=0,
        )
    hidden = f"#[allow(unused_imports)] use super::*;\n{imports}\n{tests}\n"
    expected = count_tests(job.tests)
    if job.test_mode is TestMode.MAIN:
        hidden += "\n#[test]\nfn rg_main() {\n    main();\n}\n"
        expected = 1
    # The hidden run's sentinel lives in the hidden tests' own file: no way to keep one, drop the other.
    hidden += f"\n#[allow(warnings, clippy::all)]\nmod zzzz_{tag}_end {{\n{_sentinel_test(nonce_path, crate, job.edition)}}}\n"
    files[hidden_file] = hidden
    decls = _decl(hidden_file, hidden_mod) + _decl(sentinel_file, sentinel_mod)
    files["lib.rs"] = _insert(job.source, decls)
    root = f"{tag}_r.rs"
    files[root] = _insert(without_own_tests(job.source), decls)
    return layout(
        files,
        hidden_expected=expected,
        hidden_root=root,
    )
