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

Crate names are no prelude items either, and a glob beats the extern prelude too: a program's
``mod std { pub mod f64 { pub mod consts { pub const PI: f64 = 3.0; } } }`` (or ``mod core``, or a
module named like an offered crate) is what the tests' ``std::f64::consts::PI`` would read. So the
crates the tests begin a path with get an explicit ``use ::std;`` too (``crate_imports``); a
correct program never needs a module of those names.
"""

from __future__ import annotations

import itertools
import re

from ..jobs import CURATED_CRATES
from .crates import detect
from .lexer import LexError, code_only, code_tokens
from .usetree import join_paths, use_tree

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
    """``use`` declarations (no newline, so line numbers stay) of the edition's prelude items, the
    primitive types and the crates (``crate_imports``) that ``tests`` mention and do not bind; empty
    when there is none."""
    used, bound = _idents(tests)
    names = [n for n in EDITION_PRELUDE.get(edition, EDITION_PRELUDE["2021"]) if n in used and n not in bound]
    primitives = [n for n in PRIMITIVES if n in used and n not in bound]
    prelude = f"rust_{edition}" if edition in EDITION_PRELUDE else "rust_2021"
    out = f"#[allow(unused_imports)] use ::std::prelude::{prelude}::{{{', '.join(names)}}}; " if names else ""
    out += f"#[allow(unused_imports)] use ::std::primitive::{{{', '.join(primitives)}}}; " if primitives else ""
    return out + crate_imports(tests, edition)


_ITEM_KEYWORDS = {"mod", "struct", "enum", "union", "trait", "type"}


def _path_roots(toks: list[tuple[str, str]]) -> set[str]:
    """Identifiers that begin a path (``std::f64``, ``::std::f64``), not ones inside one (``a::std``)."""
    texts = [s for _, s in toks]
    roots = set()
    for i, (kind, text) in enumerate(toks):
        if kind == "ident" and texts[i + 1 : i + 3] == [":", ":"]:
            if texts[max(0, i - 2) : i] == [":", ":"]:
                prev = texts[i - 3] if i >= 3 else ""
                if prev[:1].isalnum() or prev[:1] == "_" or prev in (">", ")"):
                    continue  # a segment of a longer path
            roots.add(text)
    return roots


def _bound_names(toks: list[tuple[str, str]]) -> set[str]:
    """Names the tokens bind in the type namespace of their outermost scope, where our imports go:
    items (``mod std``), ``extern crate regex`` (``as`` its rename) and the leaves of ``use`` trees
    (``use a::std;``, ``use a as core;``); never a path's first segment nor a cast (``x as std::..``),
    and nothing inside a function or inner module (an import there does not meet ours)."""
    texts = [s for _, s in toks]
    bound: set[str] = set()
    depth = 0
    for i, (kind, text) in enumerate(toks):
        if kind == "punct" and text in "{([":
            depth += 1
        elif kind == "punct" and text in "})]":
            depth -= 1
        if depth or kind != "ident":
            continue
        following = texts[i + 1 : i + 4]
        if text in _ITEM_KEYWORDS and following and toks[i + 1][0] == "ident":
            bound.add(following[0])
        elif text == "extern" and following[:1] == ["crate"] and len(following) > 1:
            renamed = following[2:3] == ["as"] and i + 4 < len(texts)
            bound.add(texts[i + 4] if renamed else following[1])  # `extern crate a as b;` binds b
        elif text == "use":
            end = texts.index(";", i) if ";" in texts[i:] else len(texts)
            bound |= {b.name for b in use_tree(join_paths(texts[i + 1 : end]), 0)[0] if not b.glob}
    return bound


def crate_imports(tests: str, edition: str) -> str:
    """``use`` declarations (no newline) of the crates ``tests`` begin a path with and do not bind:
    ``std`` always, and from edition 2018 ``core`` and the offered crates (there ``::name`` is the
    extern crate; in 2015 it is the crate root's item, which only ``std`` is for certain)."""
    try:
        toks = code_tokens(tests)
    except LexError:
        return ""
    offered = set(detect(tests))  # the offered crates the tests name (detect lexes the text once more)
    roots = _path_roots(toks) | offered
    allowed = {"std"} if edition == "2015" else {"std", "core"} | offered
    names = sorted((roots & allowed) - _bound_names(toks))
    return "".join(f"#[allow(unused_imports)] use ::{name}; " for name in names)


def crate_refusal(source: str, tests: str, edition: str) -> str | None:
    """Why ``source`` could stand in for a crate the hidden tests name, where an import cannot stop
    it; None when it cannot. ``extern crate self as std;`` at the root puts the program itself into
    the extern prelude under that name, so even ``::std`` (our imports included) would mean the
    program: refused in any spelling (a correct program never needs it; ``crate::`` names the crate).
    In edition 2015 the tests' ``use`` paths start at the program's root, where its own ``mod core``
    or ``mod regex`` would answer them: a program item named like a crate the tests use is refused."""
    try:
        toks = code_tokens(source)
        test_toks = code_tokens(tests)
    except LexError:
        return None  # rustc refuses it
    texts = [t for _, t in toks]
    if any(texts[i : i + 3] == ["extern", "crate", "self"] for i in range(len(texts))):
        return (
            "declares `extern crate self`, which could stand in for a crate the hidden tests use: write `crate::` paths"
        )
    if edition != "2015":
        return None
    crates = (_path_roots(test_toks) | set(detect(tests))) & ({"core", "alloc"} | set(CURATED_CRATES))
    declared = {b for (_, a), (kb, b) in itertools.pairwise(toks) if a in (*_ITEM_KEYWORDS, "as") and kb == "ident"}
    if clash := sorted(crates & declared):
        return f"declares an item named like the crate `{clash[0]}` the tests use (edition 2015 resolves their paths at its root): rename it"
    return None


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
