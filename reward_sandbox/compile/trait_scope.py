"""Which of the program's traits the hidden tests can reach: the compiler decides, not their text.

The hidden tests see the program through a glob (``use super::*``, or ``use my_crate::*``), and a
glob brings every trait the program declares into scope. Method lookup tries a by-value trait
method before a by-reference inherent one, so a program trait ``trait Sure { fn is_empty(self) ->
bool { false } }`` implemented for ``Vec<i32>`` answers the tests' ``v.is_empty()`` in place of
std's: a wrong program passes ``assert!(!v.is_empty())``. An item the tests' module declares itself
beats a glob import, so the hidden tests are first built with *every* trait name of the program
shadowed (``shadows``): an empty module of that name next to the glob, and next to each glob of the
tests' own in an inner scope, where an outer item no longer shadows. Names that a declaration in
the same scope binds already (a ``use`` or an item of the tests', our own std imports) beat the
glob by themselves and are left alone: a second item would clash.

A module is no trait, no type and no value, so when the tests needed the program's item of a
shadowed name, their build fails and rustc says which (``trait_needs``):

- ``expected trait, found module `Shape``` (E0404): the tests write ``Shape`` as a trait (a bound,
  ``dyn Shape``, ``impl Shape for``): they name it (``named``), as the asked trait of a task;
- any other error about the module (``Shape::area(&c)``, ``x: Shape``), or a method or associated
  item found in a program trait that is "implemented but not in scope" (Exercism's space-age:
  ``Mercury::years_during(&d)`` through the helper ``trait Planet``; queen-attack's
  ``queen.can_attack(..)``): the tests need it (``needed``).

The grader builds again with exactly those names back (``grader.grade_job``; a batch member whose
every error says so is graded that way at once, ``batch/rounds.py``); no verdict is read from the
first build. A needed trait comes back only if every impl of it is for a struct, enum or union the
program declares in the impl's own module (``foreign_impl``): its methods then answer calls on the
program's own types alone, whose inherent methods could answer anything anyway. A needed trait with
an impl for anything else (``Vec<i32>``, ``&str``, a tuple, an array, ``Box<..>``, a type alias, a
blanket ``impl<T> X for T``, an impl written by a macro) is refused (``invalid_input``): its
by-value ``is_empty`` would answer std's calls too. How a name appears in the tests' expressions
decides nothing: a loop variable, a closure parameter or a field value named like a program trait
never resolves to a module, so it never brings one back.

Three ways around a name-based shadow are refused before grading (``scope_refusal``): an anonymous
import of a trait not from std (``use inner::Sure as _;`` is glob-imported without a name to
shadow), a trait declared or renamed through a macro parameter (``trait $name``, ``as $name``), and a
trait named like a function or constant of the program (a test's ``use super::items;`` would bind
both).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .diagnostics import primary_span
from .lexer import LexError, code_tokens
from .usetree import Binding, ident_name, join_paths, use_tree

_STD_ROOTS = {"std", "core", "alloc"}
# identifiers a shadow must write raw (``mod r#type {}``); ``self``, ``super``, ``crate``, ``Self`` never name a trait
_KEYWORDS = frozenset(
    {
        *("abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do", "dyn", "else"),
        *("enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "macro"),
        *("match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return", "static", "struct", "trait"),
        *("true", "try", "type", "typeof", "union", "unsafe", "unsized", "use", "virtual", "where", "while", "yield"),
    }
)
_UNRAW = {"self", "super", "crate", "Self", "_"}


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
_TYPE_ITEMS = {"struct", "enum", "union", "trait", "type", "mod"}  # items of the type namespace


def type_names(tests: str) -> set[str]:
    """Names the ``tests`` look up in their own scope where a trait can be meant: the names their
    ``use`` declarations bind, and the first segment of a path (``Shape::new``) or a name after a
    single ``:`` (a bound or a type), ``+``, ``dyn``, ``impl``, ``as``, ``for``, ``where``, or before
    ``<``. A text heuristic, for the Exercism importer only (which stub traits a suite should import
    by name, ``rust_grpo/problems/importers.py``): the grader decides what the tests reach by
    building them (``shadows``, ``trait_needs``)."""
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


def _values(toks: Toks) -> set[str]:
    """Names the tokens declare in the value namespace (functions, constants, statics)."""
    out = set()
    for i in range(len(toks) - 1):
        if toks[i][0] == "ident" and toks[i][1] in ("fn", "const", "static"):
            j = i + 2 if toks[i + 1] == ("ident", "mut") else i + 1
            if j < len(toks) and toks[j][0] == "ident":
                out.add(ident_name(toks[j][1]))
    return out


# ---- the first build: every program trait shadowed -------------------------------------------------


@dataclass(frozen=True)
class Shadows:
    """Item declarations (one line each) that keep program traits out of the hidden tests' scope."""

    outer: str  # beside the glob at the top of the tests
    inner: str  # beside each glob of the tests' own in an inner scope (a block, a nested module)
    names: frozenset[str]  # every name shadowed somewhere: what the compiler's errors are read for


def _declared(toks: Toks) -> tuple[set[str], set[str]]:
    """Names the tests bind in the type namespace by a declaration: their ``use`` bindings, their
    items of the type namespace and ``extern crate`` names, at their top level and anywhere."""
    top: set[str] = set()
    anywhere: set[str] = set()
    depth, i = 0, 0
    while i < len(toks):
        kind, text = toks[i]
        found: set[str] = set()
        if kind == "punct" and text == "{":
            depth += 1
        elif kind == "punct" and text == "}":
            depth -= 1
        elif (kind, text) == ("ident", "use"):
            j = i + 1
            while j < len(toks) and toks[j][1] != ";":
                j += 1
            found = {b.name for b in _bindings(toks[i + 1 : j]) if not b.glob}
            i = j
        elif (
            kind == "ident"
            and i + 1 < len(toks)
            and toks[i + 1][0] == "ident"
            and (text in _TYPE_ITEMS or (text == "crate" and i > 0 and toks[i - 1] == ("ident", "extern")))
        ):
            found = {ident_name(toks[i + 1][1])}
            if text == "crate" and i + 3 < len(toks) and toks[i + 2] == ("ident", "as"):  # extern crate a as b
                found = {ident_name(toks[i + 3][1])}
        anywhere |= found
        if depth == 0:
            top |= found
        i += 1
    return top, anywhere


def _imported(uses: str) -> set[str]:
    """The names our own ``use`` declarations (``uses``) bind."""
    return {b.name for decl in _use_declarations(_significant(uses)) for b in _bindings(decl) if not b.glob}


def _shadow_item(name: str) -> str:
    raw = f"r#{name}" if name in _KEYWORDS else name
    return f"#[allow(warnings)] mod {raw} {{}} "


def shadows(
    source: str, tests: str, *, outer_uses: str = "", inner_uses: str = "", keep: frozenset[str] = frozenset()
) -> Shadows:
    """The shadows of every trait name of ``source`` but ``keep`` (names a failed build brought
    back, ``trait_needs``) and the names a declaration binds in the same scope already: the tests'
    own (their top level for ``outer``, anywhere for ``inner``, where one string serves every
    inner glob) and ours (``outer_uses``: our std imports beside the top glob; ``inner_uses``:
    those beside the inner ones)."""
    traits = program_traits(source) - keep - _UNRAW
    if not traits:
        return Shadows("", "", frozenset())
    top, anywhere = _declared(_significant(tests))
    outer = sorted(traits - top - _imported(outer_uses))
    inner = sorted(traits - anywhere - _imported(inner_uses))
    return Shadows(
        "".join(map(_shadow_item, outer)), "".join(map(_shadow_item, inner)), frozenset(outer) | frozenset(inner)
    )


# ---- what the failed build says ----------------------------------------------------------------------


@dataclass(frozen=True)
class TraitNeeds:
    """What the hidden tests' failed build says about the shadowed trait names."""

    named: frozenset[str] = frozenset()  # written as traits by the tests (E0404): theirs to use
    needed: frozenset[str] = frozenset()  # needed some other way: back only without a foreign impl
    unexplained: int = 0  # errors that are not about a shadowed name (or not in the tests' file)

    @property
    def names(self) -> frozenset[str]:
        return self.named | self.needed


_ABOUT_MODULE = (
    re.compile(r"\bmodule `(?:r#)?([A-Za-z_]\w*)`"),  # "expected trait, found module `N`", "in module `N`"
    re.compile(r"could not find `[^`]*` in `(?:r#)?([A-Za-z_]\w*)`"),  # E0433 on a path through the module
)
_IMPORT = re.compile(r"\buse\s+((?:r#)?\w+(?:\s*::\s*(?:r#)?\w+)*)(?:\s+as\s+_)?\s*;")
_PROVIDES = re.compile(r"\btraits? `([\w:#]+)` which provides? ")
_NOT_IN_SCOPE = ("not in scope", "in scope but", "trait is in scope")


def _texts(diag: dict[str, Any]) -> Iterable[str]:
    """A diagnostic's children's messages and suggested replacements, depth first."""
    for child in diag.get("children") or []:
        yield str(child.get("message") or "")
        for span in child.get("spans") or []:
            yield str(span.get("suggested_replacement") or "")
        yield from _texts(child)


def _one(diag: dict[str, Any], shadowed: frozenset[str], roots: set[str]) -> tuple[set[str], set[str]]:
    """(named, needed) shadowed names one error is about."""
    named: set[str] = set()
    needed: set[str] = set()
    message = str(diag.get("message") or "")
    code = (diag.get("code") or {}).get("code")
    for pattern in _ABOUT_MODULE:
        for name in pattern.findall(message):
            if name in shadowed:
                (named if code == "E0404" and message.startswith("expected trait") else needed).add(name)
    texts = list(_texts(diag))
    # "trait `X` which provides `m` is implemented but not in scope; perhaps you want to import it"
    if any(m in text for text in texts for m in _NOT_IN_SCOPE):
        for text in texts:
            paths = [p.replace(" ", "") for p in _IMPORT.findall(text)] + _PROVIDES.findall(text)
            for path in paths:
                segments = [ident_name(s) for s in path.split("::")]
                if (len(segments) == 1 or segments[0] in roots) and segments[-1] in shadowed:
                    needed.add(segments[-1])
    return named, needed


def trait_needs(diags: Iterable[dict[str, Any]], tests_file: str, shadowed: frozenset[str], crate: str) -> TraitNeeds:
    """Read the errors of a build of the hidden tests (``tests_file``: their file's name) whose
    ``shadowed`` trait names were shadowed: which of those names the tests need back. ``crate``:
    the program's crate name, the root of its paths in a separate test crate (integration mode)."""
    named: set[str] = set()
    needed: set[str] = set()
    unexplained = 0
    roots = {"crate", "self", "super", crate}
    for diag in diags:
        if diag.get("level") != "error":
            continue
        primary = primary_span(diag)
        file = str(primary.get("file_name", "")) if primary else ""
        found = _one(diag, shadowed, roots) if file.rsplit("/", 1)[-1] == tests_file else (set(), set())
        named |= found[0]
        needed |= found[1]
        unexplained += not (found[0] or found[1])
    return TraitNeeds(frozenset(named), frozenset(needed - named), unexplained)


# ---- a needed trait comes back only for the program's own types ------------------------------------


@dataclass(frozen=True)
class _Impl:
    trait: str | None  # the trait's last path segment; None when a macro parameter writes it
    type_text: str
    own: bool  # for a struct, enum or union declared in the impl's own module


_OPEN, _CLOSE = "([{<", ")]}>"


def _scopes(toks: Toks) -> list[tuple[int, ...] | None]:
    """For each token, the module it sits in at item level (the positions of the ``mod x {`` braces
    around it), or None inside anything else (a block, a macro's body, parentheses)."""
    stack: list[tuple[int, bool]] = []
    out: list[tuple[int, ...] | None] = []
    for i, (kind, text) in enumerate(toks):
        if kind == "punct" and text in "([{":
            is_mod = text == "{" and i >= 2 and toks[i - 2] == ("ident", "mod") and toks[i - 1][0] == "ident"
            stack.append((i, is_mod))
        elif kind == "punct" and text in ")]}" and stack:
            stack.pop()
        out.append(tuple(p for p, _ in stack) if all(m for _, m in stack) else None)
    return out


def _cfg_attributes(toks: Toks, i: int) -> bool:
    """Whether the item whose keyword is ``toks[i]`` carries an attribute naming ``cfg``/``cfg_attr``
    (it may not exist at all: another item of its name then answers)."""
    j = i - 1
    if j >= 0 and toks[j][1] == ")":  # pub(crate), pub(in path)
        while j >= 0 and toks[j][1] != "(":
            j -= 1
        j -= 1
    if j >= 0 and toks[j] == ("ident", "pub"):
        j -= 1
    while j >= 0 and toks[j][1] == "]":
        depth, k = 0, j
        while k >= 0:
            depth += toks[k][1] == "]"
            depth -= toks[k][1] == "["
            if depth == 0:
                break
            k -= 1
        if any(t in ("cfg", "cfg_attr") for _, t in toks[k:j]):
            return True
        j = k - 2 if k >= 1 and toks[k - 1][1] in ("#", "!") else k - 1
    return False


def _group_end(toks: Toks, j: int) -> int:
    """The index after the bracketed group (``<...>``, ``(...)``) that opens at ``toks[j]``; the
    ``>`` of ``->`` and ``=>`` closes nothing."""
    depth = 0
    while j < len(toks):
        text = toks[j][1]
        arrow = text == ">" and j > 0 and toks[j - 1][1] in ("-", "=")
        if text in _OPEN:
            depth += 1
        elif text in _CLOSE and not arrow:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return j


def _header_part(toks: Toks, j: int, stop_at_for: bool) -> tuple[Toks, int, bool]:
    """The tokens from ``j`` to the end of an impl header part: ``for`` (when ``stop_at_for``), or
    ``{``, ``;``, ``where`` or a closing bracket at depth 0; the index there; whether ``for`` ended it."""
    out: Toks = []
    depth = 0
    while j < len(toks):
        kind, text = toks[j]
        arrow = text == ">" and j > 0 and toks[j - 1][1] in ("-", "=")
        if depth == 0 and (text in ("{", ";") or (kind, text) == ("ident", "where")):
            return out, j, False
        if depth == 0 and stop_at_for and (kind, text) == ("ident", "for"):
            return out, j + 1, True
        if kind == "punct" and text in _OPEN:
            depth += 1
        elif kind == "punct" and text in _CLOSE and not arrow:
            if depth == 0:
                return out, j, False
            depth -= 1
        out.append(toks[j])
        j += 1
    return out, j, False


def _text(toks: Toks) -> str:
    out = ""
    for kind, text in toks:
        out += (" " if out and kind in ("ident", "lifetime") and out[-1].isalnum() else "") + text
        out += " " if text in (",", ";") else ""
    return out


def _impls(toks: Toks) -> list[_Impl]:
    """Every trait impl of the program (``impl`` anywhere: in modules, blocks and macro bodies)."""
    scopes = _scopes(toks)
    own = {
        (scopes[i], ident_name(toks[i + 1][1]))
        for i in range(len(toks) - 1)
        if toks[i][0] == "ident"
        and toks[i][1] in ("struct", "enum", "union")
        and toks[i + 1][0] == "ident"
        and scopes[i] is not None
        and not _cfg_attributes(toks, i)
    }
    out = []
    for i, (kind, text) in enumerate(toks):
        if (kind, text) != ("ident", "impl"):
            continue
        j, generics = i + 1, set()
        if j < len(toks) and toks[j][1] == "<":
            end = _group_end(toks, j)
            generics = {ident_name(t) for k, t in toks[j:end] if k == "ident"}
            j = end
        trait_toks, j, is_trait_impl = _header_part(toks, j, stop_at_for=True)
        if not is_trait_impl or not trait_toks:  # inherent, or `impl for<'a> Fn(..)` in a type
            continue
        type_toks, _, _ = _header_part(toks, j, stop_at_for=False)
        lead = itertools.takewhile(lambda kt: kt[0] == "ident" or kt[1] in ":!", trait_toks)
        path = [t for k, t in lead if k == "ident"]
        trait = None if any(t == "$" for _, t in trait_toks) or not path else ident_name(path[-1])
        first = type_toks[0] if type_toks else ("", "")
        rest = type_toks[1:]
        is_own = (
            first[0] == "ident"
            and ident_name(first[1]) not in generics
            and (scopes[i], ident_name(first[1])) in own
            and (not rest or (rest[0][1] == "<" and _group_end(type_toks, 1) == len(type_toks)))
        )
        out.append(_Impl(trait, _text(type_toks), is_own))
    return out


def _aliases(toks: Toks, names: Iterable[str]) -> set[str]:
    """``names`` and every name an ``as`` import of the program links to them (either way)."""
    pairs = [
        (ident_name(b.path[-1]), b.name)
        for decl in _use_declarations(toks)
        for b in _bindings(decl)
        if b.path and not b.glob and b.name != b.path[-1]
    ]
    found = set(names)
    while True:
        more = {b for a, b in pairs if a in found} | {a for a, b in pairs if b in found}
        if more <= found:
            return found
        found |= more


def foreign_impl(source: str, needed: Iterable[str]) -> str | None:
    """Why ``source``'s traits of the ``needed`` names may not come back into the hidden tests'
    scope, or None: an impl of one for a type that is not a struct, enum or union the program
    declares in the impl's own module, or an impl whose trait a macro parameter writes."""
    names = set(needed)
    if not names:
        return None
    toks = _significant(source)
    wanted = _aliases(toks, names)
    for impl in _impls(toks):
        if impl.trait is None:
            return (
                f"the hidden tests need its trait `{sorted(names)[0]}` in scope, and it implements a trait "
                "through a macro parameter (`impl $trait for ..`): write such impls out"
            )
        if impl.trait in wanted and not impl.own:
            return (
                f"the hidden tests need its trait `{impl.trait}` in scope, and it implements it for "
                f"`{impl.type_text}`: a trait the tests do not name may be implemented only for the "
                "program's own structs, enums and unions (declared in the impl's module)"
            )
    return None
