"""The std prelude names the hidden tests use, imported explicitly so the program cannot shadow them.

Hidden tests reach the program through a glob (``use super::*``, or ``use crate_name::*`` in an
Exercism-style test crate), and a glob import beats the prelude: a program that defines its own
``Some`` (a function), ``None`` (a const), ``Vec`` or ``Result`` would have the tests' expected
values built from its look-alikes, and an ``impl PartialEq<Local> for Option<usize>`` (orphan-legal)
then makes every ``assert_eq!`` pass. An explicit ``use`` beats a glob, so the tests get std's
items back, as they already do for the assertion macros.

Only names the tests mention are imported, and none the tests bind themselves (an item they
define, a name in one of their own ``use`` declarations): an explicit import next to a test's own
``use std::io::Result`` would be a conflict (E0252). A test that wants the program's item of a
prelude name writes its path (``super::Result``). Methods are not names: std's prelude traits stay
in scope for method calls whatever the glob brings (a program trait with the same method name makes
the call ambiguous, a compile error), so they need no import.
"""

from __future__ import annotations

import itertools
import re

from .lexer import LexError, code_only, code_tokens

# std::prelude::v1 as of Rust 1.85+ (items, not macros: those are STD_MACROS in assemble.py)
_V1 = (
    "Copy",
    "Send",
    "Sized",
    "Sync",
    "Unpin",
    "Drop",
    "Fn",
    "FnMut",
    "FnOnce",
    "AsyncFn",
    "AsyncFnMut",
    "AsyncFnOnce",
    "drop",
    "size_of",
    "size_of_val",
    "align_of",
    "align_of_val",
    "Box",
    "ToOwned",
    "Clone",
    "PartialEq",
    "PartialOrd",
    "Eq",
    "Ord",
    "AsRef",
    "AsMut",
    "Into",
    "From",
    "Default",
    "Iterator",
    "Extend",
    "IntoIterator",
    "DoubleEndedIterator",
    "ExactSizeIterator",
    "Option",
    "Some",
    "None",
    "Result",
    "Ok",
    "Err",
    "String",
    "ToString",
    "Vec",
)
EDITION_PRELUDE: dict[str, tuple[str, ...]] = {
    "2015": tuple(_V1),
    "2018": tuple(_V1),
    "2021": (*_V1, "TryFrom", "TryInto", "FromIterator"),
    "2024": (*_V1, "TryFrom", "TryInto", "FromIterator", "Future", "IntoFuture"),
}
# Primitive types are no prelude items but resolve after every import: a program's `struct usize`
# (or `type i32 = ...`) arriving through the glob would stand in for them too; std::primitive names them.
PRIMITIVES = (
    "bool",
    "char",
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "str",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
)
_BINDERS = {"fn", "struct", "enum", "union", "trait", "type", "const", "static", "mod", "as"}
_USE = re.compile(r"\buse\b[^;]*;", re.DOTALL)
_GLOB_USE = re.compile(r"\buse\b[^;{}]*(?:\{[^;]*)?\*[^;]*;", re.DOTALL)


def _idents(text: str) -> tuple[set[str], set[str]]:
    """Every identifier of ``text`` and those it binds itself (after an item keyword or ``as``, or
    anywhere in a ``use`` declaration); text that does not lex counts as binding nothing."""
    try:
        toks = code_tokens(text)
    except LexError:
        return set(), set()
    used = {s for kind, s in toks if kind == "ident"}
    bound = {
        s1 for (k0, s0), (k1, s1) in itertools.pairwise(toks) if k0 == "ident" and s0 in _BINDERS and k1 == "ident"
    }
    code = " ".join(s if kind != "string" else '""' for kind, s in toks)
    for decl in _USE.findall(code):
        bound |= set(re.findall(r"[A-Za-z_]\w*", decl))
    return used, bound


def prelude_imports(tests: str, edition: str) -> str:
    """``use`` declarations (no newline, so line numbers stay) of the edition's prelude items and the
    primitive types that ``tests`` mention and do not bind; empty when there is none."""
    used, bound = _idents(tests)
    names = [n for n in EDITION_PRELUDE.get(edition, EDITION_PRELUDE["2021"]) if n in used and n not in bound]
    primitives = [n for n in PRIMITIVES if n in used and n not in bound]
    prelude = f"rust_{edition}" if edition in EDITION_PRELUDE else "rust_2021"
    out = f"#[allow(unused_imports)] use ::std::prelude::{prelude}::{{{', '.join(names)}}}; " if names else ""
    return out + (f"#[allow(unused_imports)] use ::std::primitive::{{{', '.join(primitives)}}}; " if primitives else "")


def after_glob_uses(tests: str, imports: str) -> str:
    """``tests`` with ``imports`` placed right after each of their own glob ``use`` declarations in
    an inner scope, on the same line: a glob in an inner scope (``fn t() { use my_crate::*; ... }``) beats an import
    of an outer one, so the explicit names must sit next to it. Text that does not lex is left as
    it is (it does not compile)."""
    if not imports:
        return tests
    try:
        code = code_only(tests)
    except LexError:
        return tests
    out, pos = [], 0
    for match in _GLOB_USE.finditer(code):
        depth = sum(code.count(c, 0, match.start()) for c in "{([") - sum(
            code.count(c, 0, match.start()) for c in "})]"
        )
        if depth > 0:  # the outermost scope has our import already: a second one would be E0252
            out += [tests[pos : match.end()], " ", imports]
            pos = match.end()
    return "".join(out) + tests[pos:]
