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

from .lexer import LexError, code_tokens
from .usetree import Binding, ident_name, join_paths, use_tree

_STD_ROOTS = {"std", "core", "alloc"}


Toks = list[tuple[str, str]]


def _significant(code: str) -> Toks:
    """The code's tokens; none for text that does not lex (rustc refuses it: nothing to shadow)."""
    try:
        return code_tokens(code)
    except LexError:
        return []


def _use_declarations(toks: Toks) -> list[Toks]:
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


def program_traits(source: str) -> set[str]:
    """Names under which ``source`` may put a trait of its own in a glob's reach: every trait it
    declares, and every name it gives an import with ``as`` (a renamed re-export of its trait)."""
    return _traits(_significant(source))


def _traits(toks: Toks) -> set[str]:
    names = {ident_name(b[1]) for a, b in itertools.pairwise(toks) if a == ("ident", "trait") and b[0] == "ident"}
    for decl in _use_declarations(toks):
        names |= {ident_name(b[1]) for a, b in itertools.pairwise(decl) if a == ("ident", "as") and b[0] == "ident"}
    return names - {"_"}


def scope_refusal(source: str) -> str | None:
    """Why ``source`` could put a trait in the hidden tests' scope under no name we can shadow, or None."""
    toks = _significant(source)
    both = _traits(toks) & _values(toks)
    if both:  # a test's `use super::items;` of the function would bring the trait in too
        return f"names a trait like one of its functions or constants ({', '.join(sorted(both))}): rename it"
    for a, b in itertools.pairwise(toks):
        if a == ("ident", "trait") and b == ("punct", "$"):
            return "declares a trait through a macro parameter (`trait $name`): name the trait in the source"
    for decl in _use_declarations(toks):
        pairs = list(itertools.pairwise(decl))
        if (("ident", "as"), ("punct", "$")) in pairs:
            return "renames an import through a macro parameter (`as $name`): write the name in the source"
        anonymous = [b for b in _bindings(decl) if b.name == "_"]
        # an `as _` the tree does not place (it could not be parsed) is refused like a foreign one
        if pairs.count((("ident", "as"), ("ident", "_"))) > len(anonymous) or any(
            not b.path or b.path[0] not in _STD_ROOTS for b in anonymous
        ):
            return (
                "imports its own trait anonymously (`use ... as _`), which would reach the hidden "
                "tests' method calls unnamed: import it by name"
            )
    return None


def _bindings(decl: Toks) -> list[Binding]:
    """What one ``use`` declaration's tree binds (its tokens after ``use``)."""
    return use_tree(join_paths([s for _, s in decl]), 0)[0]


_TYPE_BEFORE = {"dyn", "impl", "as", "for", "where"}
_TYPE_ITEMS = {"struct", "enum", "union", "trait", "type", "mod"}  # the tests' own items of those names


def type_names(tests: str) -> set[str]:
    """Names the ``tests`` look up in their own scope where a trait can be meant: the names their
    ``use`` declarations bind, and the first segment of a path (``Shape::new``) or a name after a
    single ``:`` (a bound or a type), ``+``, ``dyn``, ``impl``, ``as``, ``for``, ``where``, or before
    ``<``. A name after ``::`` or ``.`` is looked up elsewhere (``std::collections``, ``v.len``), and a
    name only called (``items(3)``) is a value: neither keeps a program trait of that name in scope."""
    toks = _significant(tests)
    names: set[str] = set()
    for decl in _use_declarations(toks):
        names |= {b.name for b in _bindings(decl) if not b.glob}
    texts = [s for _, s in toks]
    for i, (kind, text) in enumerate(toks):
        before, after = texts[max(0, i - 2) : i], texts[i + 1 : i + 3]
        if kind != "ident" or before[-1:] in (["fn"], ["."]) or before == [":", ":"]:
            continue
        if (
            after[:2] == [":", ":"]
            or after[:1] == ["<"]
            or before[-1:] == [":"]
            or (before and (before[-1] in _TYPE_BEFORE or before[-1] == "+" or before[-1] in _TYPE_ITEMS))
        ):
            names.add(ident_name(text))
    return names


def value_names(source: str) -> set[str]:
    """Names ``source`` declares in the value namespace (functions, constants, statics)."""
    return _values(_significant(source))


def _values(toks: Toks) -> set[str]:
    out = set()
    for i in range(len(toks) - 1):
        if toks[i][0] == "ident" and toks[i][1] in ("fn", "const", "static"):
            j = i + 2 if toks[i + 1] == ("ident", "mut") else i + 1
            if j < len(toks) and toks[j][0] == "ident":
                out.add(ident_name(toks[j][1]))
    return out


def shadowing_items(source: str, tests: str) -> str:
    """Item declarations (one line) that keep every program trait out of the ``tests``' scope but for
    the names they look up where a trait can be meant (``type_names``); empty when there is none."""
    hidden = sorted(program_traits(source) - type_names(tests))
    return "".join(f"#[allow(warnings)] trait {name} {{}} " for name in hidden)
