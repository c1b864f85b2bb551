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
    both = program_traits(source) & value_names(source)
    if both:  # a test's `use super::items;` of the function would bring the trait in too
        return f"names a trait like one of its functions or constants ({', '.join(sorted(both))}): rename it"
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


_TYPE_BEFORE = {"dyn", "impl", "as", "for", "where"}
_TYPE_ITEMS = {"struct", "enum", "union", "trait", "type", "mod"}  # the tests' own items of those names


def type_names(tests: str) -> set[str]:
    """Names ``tests`` use where a trait can be meant: in a ``use`` declaration, before ``::`` or
    ``<``, after a single ``:`` (a bound or a type), ``+``, ``dyn``, ``impl``, ``as``, ``for`` or
    ``where``. A name only called (``items(3)``), or a local (``v.len()``), is no trait of theirs."""
    toks = _significant(tests)
    names: set[str] = set()
    for decl in _use_declarations(toks):
        names |= {_name(s) for kind, s in decl if kind == "ident"}
    for i, (kind, text) in enumerate(toks):
        before = [s for _, s in toks[max(0, i - 2) : i]]
        if kind == "ident" and before[-1:] != ["fn"] and _type_position(before, [s for _, s in toks[i + 1 : i + 3]]):
            names.add(_name(text))
    return names


def _type_position(before: list[str], after: list[str]) -> bool:
    if after[:2] == [":", ":"] or after[:1] == ["<"]:  # a path or a generic: `Shape::new`, `Stack<T>`
        return True
    if before[-1:] == [":"]:  # `x: Shape`, `T: Shape` (not the `::` of a path)
        return before[-2:-1] != [":"]
    return bool(before) and (before[-1] in _TYPE_BEFORE or before[-1] == "+" or before[-1] in _TYPE_ITEMS)


def value_names(source: str) -> set[str]:
    """Names ``source`` declares in the value namespace (functions, constants, statics)."""
    toks = _significant(source)
    out = set()
    for i in range(len(toks) - 1):
        if toks[i][0] == "ident" and toks[i][1] in ("fn", "const", "static"):
            j = i + 2 if toks[i + 1] == ("ident", "mut") else i + 1
            if j < len(toks) and toks[j][0] == "ident":
                out.add(_name(toks[j][1]))
    return out


def _block_end(toks: list[tuple[str, str]], i: int) -> int:
    """Index just past the ``{...}`` group opening at or after ``i`` (len(toks) when none closes)."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j][1] == "{":
            depth += 1
        elif toks[j][1] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(toks)


def _trait_methods(toks: list[tuple[str, str]], name: str) -> dict[str, bool] | None:
    """The methods trait ``name`` declares, each with whether it takes ``self`` by reference (or
    takes no ``self``); None when the trait is not declared exactly once."""
    starts = [i for i in range(len(toks) - 1) if toks[i] == ("ident", "trait") and _name(toks[i + 1][1]) == name]
    if len(starts) != 1:
        return None
    i = starts[0]
    while i < len(toks) and toks[i][1] not in ("{", ";"):
        i += 1
    body = toks[i : _block_end(toks, i)]
    methods = {}
    for k in range(len(body) - 2):
        if body[k] == ("ident", "fn") and body[k + 1][0] == "ident":
            j = k + 2
            while j < len(body) and body[j][1] != "(":
                j += 1
            params = [s for _, s in body[j + 1 : j + 5]]
            by_value = (
                "self" in params[:2]
                and params[:1] != ["&"]
                and not (params[:2] == ["self", ":"] and params[2:3] == ["&"])
            )
            methods[_name(body[k + 1][1])] = not by_value
    return methods


def _impl_targets(toks: list[tuple[str, str]], name: str) -> list[list[str]]:
    """The self types (as tokens) of every ``impl ... name ... for TYPE``."""
    out = []
    for i, (kind, text) in enumerate(toks):
        if (kind, text) != ("ident", "impl"):
            continue
        j, depth, saw_trait = i + 1, 0, False
        while j < len(toks) and not (depth == 0 and toks[j][1] in ("{", ";")):
            if toks[j][1] == "<":
                depth += 1
            elif toks[j][1] == ">":
                depth -= 1
            elif depth == 0 and toks[j][0] == "ident" and _name(toks[j][1]) == name:
                saw_trait = True
            elif depth == 0 and toks[j] == ("ident", "for") and saw_trait:
                end = j + 1
                while end < len(toks) and toks[end][1] not in ("{", "where"):
                    end += 1
                out.append([s for _, s in toks[j + 1 : end]])
                break
            j += 1
    return out


def _needed(source: str, name: str, called: set[str]) -> bool:
    """Whether trait ``name`` of the program may stay in the tests' scope unnamed: the tests call one
    of its methods, and it cannot stand in for a std method. Method lookup tries by-value receivers
    before references, and a receiver's own type before what it derefs to, so that holds when every
    method takes ``&self``/``&mut self`` (or no ``self``) and every impl is for a type the program
    declares itself, by value (not ``&T``, a std type, or a blanket ``T``); std's inherent methods of
    the same name then win, and std's trait methods make the call ambiguous (a compile error)."""
    toks = _significant(source)
    methods = _trait_methods(toks, name)
    if not methods or not called & set(methods) or not all(methods.values()):
        return False
    own_types = {
        _name(b[1]) for a, b in itertools.pairwise(toks) if a[1] in ("struct", "enum", "union") and b[0] == "ident"
    }
    targets = _impl_targets(toks, name)
    return bool(targets) and all(t[:1] and t[0] in own_types and t[1:2] in ([], ["<"]) for t in targets)


def shadowing_items(source: str, tests: str) -> str:
    """Item declarations (one line) that keep the program's traits out of the ``tests``' scope, but
    for the names they use where a trait can be meant (``type_names``) and the traits whose methods
    they call and which cannot stand in for std's (``_needed``); empty when there is none."""
    toks = _significant(tests)
    called = {_name(b[1]) for a, b in itertools.pairwise(toks) if a[1] in (".", ":") and b[0] == "ident"}
    candidates = program_traits(source) - type_names(tests)
    hidden = sorted(name for name in candidates if not _needed(source, name, called))
    return "".join(f"#[allow(warnings)] trait {name} {{}} " for name in hidden)
