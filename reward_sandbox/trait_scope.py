"""Which of the program's traits the hidden tests' method calls can reach.

The hidden tests see the program through a glob (``use super::*``, or ``use my_crate::*``), and a
glob brings every trait the program declares into scope. Method lookup tries a by-value trait
method before a by-reference inherent one, so a program trait ``trait Sure { fn is_empty(self) ->
bool { false } }`` implemented for ``Vec<i32>`` answers the tests' ``v.is_empty()`` in place of
std's: a wrong program passes ``assert!(!v.is_empty())``. An item the tests' module declares itself
beats a glob import, so for every program trait the tests do not name we declare an empty trait of
that name next to the glob (and next to each glob of the tests' own in an inner scope, where an
outer item no longer shadows): the program's trait leaves the tests' scope, std's prelude traits
stay. A test that calls the methods of a program trait names it (``use super::Shape;``); the
Exercism importer adds that import for the traits an exercise's stub declares.

Two ways around a name-based shadow are refused instead (``scope_refusal``): an anonymous import of
a trait not from std (``use inner::Sure as _;`` is glob-imported without a name to shadow), and a
trait declared or renamed through a macro parameter (``trait $name``, ``as $name``).
"""

from __future__ import annotations

import itertools

from .rustlex import LexError, tokens

_STD_ROOTS = {"std", "core", "alloc"}


def _significant(code: str) -> list[tuple[str, str]]:
    try:
        return [(t.kind, code[t.start : t.end]) for t in tokens(code) if not t.trivia]
    except LexError:
        return []


def _name(ident: str) -> str:
    return ident.removeprefix("r#")


def _use_declarations(toks: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The tokens of each ``use ...;`` (macro bodies included: a macro may expand to one)."""
    out, i = [], 0
    while i < len(toks):
        if toks[i] == ("ident", "use"):
            j = i + 1
            while j < len(toks) and toks[j][1] != ";":
                j += 1
            out.append(toks[i + 1 : j])
            i = j
        i += 1
    return out


def _root(decl: list[tuple[str, str]], k: int) -> str:
    """The crate or module a ``use`` tree's path at token ``k`` starts from: the declaration's first
    name, or, in a top-level group (``use {a::B, c::D as _};``), the first name of ``k``'s element."""
    start = 0
    if any(s == "{" for _, s in decl[:1]) or [s for _, s in decl[:3]] == [":", ":", "{"]:
        depth = 0
        for i, (_, s) in enumerate(decl[:k]):
            if s == "{":
                depth += 1
                if depth == 1:
                    start = i + 1
            elif s == "}":
                depth -= 1
            elif s == "," and depth == 1:
                start = i + 1
    return next((_name(s) for kind, s in decl[start:k] if kind == "ident"), "")


def program_traits(source: str) -> set[str]:
    """Names under which ``source`` may put a trait of its own in a glob's reach: every trait it
    declares, and every name it gives an import with ``as`` (a renamed re-export of its trait)."""
    toks = _significant(source)
    names = {_name(b[1]) for a, b in itertools.pairwise(toks) if a == ("ident", "trait") and b[0] == "ident"}
    for decl in _use_declarations(toks):
        names |= {_name(b[1]) for a, b in itertools.pairwise(decl) if a == ("ident", "as") and b[0] == "ident"}
    return names - {"_"}


def scope_refusal(source: str) -> str | None:
    """Why ``source`` could put a trait in the hidden tests' scope under no name we can shadow, or None."""
    toks = _significant(source)
    for a, b in itertools.pairwise(toks):
        if a == ("ident", "trait") and b == ("punct", "$"):
            return "declares a trait through a macro parameter (`trait $name`): name the trait in the source"
    for decl in _use_declarations(toks):
        for k in range(len(decl) - 1):
            if decl[k] == ("ident", "as") and decl[k + 1] == ("punct", "$"):
                return "renames an import through a macro parameter (`as $name`): write the name in the source"
            if decl[k] == ("ident", "as") and decl[k + 1] == ("ident", "_") and _root(decl, k) not in _STD_ROOTS:
                return (
                    "imports its own trait anonymously (`use ... as _`), which would reach the hidden "
                    "tests' method calls unnamed: import it by name"
                )
    return None


def shadowing_items(source: str, tests: str) -> str:
    """Item declarations (one line) that keep the program's traits the ``tests`` do not name out of
    their scope; empty when there is none. The tests' own identifiers are never shadowed."""
    used = {_name(s) for kind, s in _significant(tests) if kind == "ident"}
    hidden = sorted(program_traits(source) - used)
    return "".join(f"#[allow(warnings)] trait {name} {{}} " for name in hidden)
