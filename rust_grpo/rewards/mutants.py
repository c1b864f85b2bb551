"""Wrong versions of a program's asked functions, to check that its tests really test something.

A test that passes on a program is worth something only if it fails on wrong versions of the
functions the row asks for (``argless.asked_functions``). Only those change; the program's
helpers stay as written, so a test of a helper alone catches nothing. Three versions, graded in
one round (:func:`wrong_versions`), each changing every asked function it can:

- ``default``: the answer is ``Default::default()`` (a zero answer; a function that returns
  nothing does nothing), where the return type has a default by its spelling (:func:`has_default`:
  numbers, ``bool``, ``char``, ``String``, ``&str``, ``Vec``, ``Option``, std's maps and sets,
  ``()``, tuples of those), else the perturbed answer;
- ``perturbed``: the body runs as written (in a closure, so ``return`` and ``?`` go through the
  change) and its answer is changed, where the return type's spelling says how
  (:func:`perturbation`): integers ``wrapping_add(1)``, floats ``+ 1.0``, ``bool`` ``!``, ``char``
  another char, ``String`` a char more at each end, ``&str`` another string, ``Ordering`` the next
  one, ``Vec`` its items perturbed and its last one dropped, ``Option`` its value perturbed or
  dropped, ``Result`` its value perturbed or turned into the other side (a default), tuples every
  part that can be; else the default answer;
- ``todo``: the body is ``todo!()`` (it panics).

So ``default`` and ``perturbed`` answer wrongly and change the same functions (a test of any of
them can tell), and a function neither can change (one that returns the program's own type) stays
as written in both: only ``todo`` changes it. A version that would change nothing, or be the same
as another, is not made. The rule they serve: ``Evaluation.catching_tests`` (``functions.py``).
Test functions and ``#[cfg(test)]`` modules are left as they are.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from .audit import code_view, matching_brace

_FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
_CFG_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub\s+)?mod\s+[A-Za-z_][A-Za-z0-9_]*\s*\{")
_TEST_ATTR_BEFORE = re.compile(r"#\[test\]\s*(?:#\[[^\]]*\]\s*)*(?:pub\s+)?(?:async\s+)?$")
_CONST_BEFORE = re.compile(r"\bconst\s+(?:(?:unsafe|async)\s+)?(?:extern\s+(?:\"[^\"]*\"\s+)?)?$")
BODIES = {"default": "Default::default()", "todo": "todo!()"}  # as a stub writes them (``evaluation/verify.py``)
# What the wrong versions write, by paths no program item can shadow (a program's own `Some` or
# `format!` must not turn a wrong answer into a panic that its tautologies "catch").
_ZERO, _PANIC = "::std::default::Default::default()", "::std::todo!()"
_SOME, _NONE, _OK, _ERR = (
    "::std::option::Option::Some",
    "::std::option::Option::None",
    "::std::result::Result::Ok",
    "::std::result::Result::Err",
)
KINDS = ("default", "perturbed", "todo")  # the wrong versions a program's own tests are run on
ANSWER_CHANGING = ("default", "perturbed")  # the kinds that answer, wrongly (``todo`` panics)
_INTEGERS = {f"{sign}{bits}" for sign in "iu" for bits in ("8", "16", "32", "64", "128", "size")}
_FLOATS = {"f32", "f64"}
_CONTAINERS = {"Vec", "VecDeque", "HashMap", "HashSet", "BTreeMap", "BTreeSet", "BinaryHeap", "Option", "String"}
_STR = re.compile(r"&(?:'\w+)?str")
_PATH = re.compile(r"^(?:(?:std|alloc|core)::(?:\w+::)*)?(\w+)(?:<(.*)>)?$")
_V = "__rg_v"  # the binding of the answer in a perturbed body


def body_start(code: str, start: int) -> int | None:
    """Index of the ``{`` opening the body of the fn whose header starts at ``start``; None for a
    declaration without body (``fn f();`` in a trait)."""
    depth = 0
    for i in range(start, len(code)):
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c == ";":
            return None
        elif depth == 0 and c == "{":
            return i
    return None


def _split(text: str, sep: str = ",") -> list[str]:
    """``text`` split at ``sep`` outside brackets (``->`` is no closing angle bracket)."""
    parts, depth, start = [], 0, 0
    masked = text.replace("->", "  ")
    for i, c in enumerate(masked):
        if c in "([<{":
            depth += 1
        elif c in ")]>}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def return_type(header: str) -> str:
    """The return type written in a fn header (the text from after the name to the body's ``{``),
    its spaces collapsed; ``""`` for a function that returns nothing."""
    masked = header.replace("->", "\0\0")
    depth, params_seen = 0, False
    for i, c in enumerate(masked):
        if c in "([<{":
            params_seen = params_seen or (c == "(" and depth == 0)
            depth += 1
        elif c in ")]>}":
            depth -= 1
        elif c == "\0" and depth == 0 and params_seen:
            ret = header[i + 2 :]
            where = re.search(r"\bwhere\b", ret)
            return " ".join((ret[: where.start()] if where else ret).split())
    return ""


def _compact(ty: str) -> str:
    """``ty`` without spaces, where they mean nothing (``impl Trait`` and ``dyn Trait`` are never
    compacted: no type here is spelled with them)."""
    return ty if re.search(r"\b(?:impl|dyn)\b", ty) else re.sub(r"\s+", "", ty)


def _tuple_parts(ty: str) -> list[str] | None:
    if ty.startswith("(") and ty.endswith(")"):
        parts = _split(ty[1:-1])
        return parts if len(parts) > 1 or ty[1:-1].rstrip().endswith(",") else None
    return None


def has_default(ty: str) -> bool:
    """Whether the spelling of ``ty`` says it has a ``Default`` (false for types it cannot tell)."""
    ty = _compact(ty)
    if ty in ("", "()") or ty in _INTEGERS or ty in _FLOATS or ty in ("bool", "char") or _STR.fullmatch(ty):
        return True
    parts = _tuple_parts(ty)
    if parts is not None:
        return all(has_default(p) for p in parts)
    match = _PATH.match(ty)
    return match is not None and match.group(1) in _CONTAINERS and (match.group(2) is not None or ty == "String")


def perturbation(ty: str, value: str) -> str | None:
    """An expression of type ``ty`` that differs from ``value`` (an expression of that type), for the
    types whose spelling says how; None for the others (``Self``, the program's types, generics)."""
    ty = _compact(ty)
    if ty in _INTEGERS:
        return f"{value}.wrapping_add(1)"
    if ty in _FLOATS:
        return f"({value} + 1.0)"
    if ty == "bool":
        return f"!{value}"
    if ty == "char":
        return f"(if {value} == 'a' {{ 'b' }} else {{ 'a' }})"
    if _STR.fullmatch(ty):
        return f'(if {value}.is_empty() {{ "\\u{{1}}" }} else {{ "" }})'
    parts = _tuple_parts(ty)
    if parts is not None:
        names = [f"{_V}{len(value)}_{i}" for i in range(len(parts))]
        changed = [perturbation(p, n) for p, n in zip(parts, names)]
        if all(c is None for c in changed):
            return None
        items = ", ".join(c or n for c, n in zip(changed, names))
        return f"{{ let ({', '.join(names)},) = {value}; ({items},) }}"
    match = _PATH.match(ty)
    if match is None:
        return None
    name, args = match.group(1), _split(match.group(2) or "")
    if (
        name == "Ordering"
        and not args
        and ty in ("Ordering", "cmp::Ordering", "std::cmp::Ordering", "core::cmp::Ordering")
    ):
        o = "::std::cmp::Ordering"
        return f"match {value} {{ {o}::Less => {o}::Equal, {o}::Equal => {o}::Greater, {o}::Greater => {o}::Less }}"
    inner, zero = f"{_V}{len(value)}", _ZERO
    if name == "String" and not args:  # one more char at each end: equality, starts_with, ends_with, len
        return f'::std::format!("\\u{{1}}{{}}\\u{{1}}", {value})'
    # An empty Vec and None stay as they are: the default version answers them already, and a `next`
    # that never ends (None made Some) would turn a finite loop of the program's into an endless one.
    if name == "Vec" and len(args) == 1:  # every item perturbed where it can be, and the last one dropped
        item = perturbation(args[0], inner)
        items = f"{value}.into_iter().map(|{inner}| {item}).collect::<::std::vec::Vec<_>>()" if item else value
        return f"{{ let mut {inner} = {items}; {inner}.pop(); {inner} }}"
    if name == "Option" and len(args) == 1:  # the value perturbed, else dropped
        some = perturbation(args[0], inner)
        return f"match {value} {{ {_SOME}({inner}) => {f'{_SOME}({some})' if some else _NONE}, {_NONE} => {_NONE} }}"
    if name == "Result" and len(args) == 2:  # each side's value perturbed, else the other side (a default)
        ok, err = perturbation(args[0], inner), perturbation(args[1], inner)
        ok_arm = f"{_OK}({ok})" if ok else f"{_ERR}({zero})" if has_default(args[1]) else None
        err_arm = f"{_OK}({zero})" if has_default(args[0]) else f"{_ERR}({err})" if err else None
        if ok_arm is None and err_arm is None:
            return None
        ok_arm, err_arm = ok_arm or f"{_OK}({inner})", err_arm or f"{_ERR}({inner})"
        return f"match {value} {{ {_OK}({inner}) => {ok_arm}, {_ERR}({inner}) => {err_arm} }}"
    return None


def _perturbed_body(body: str, ty: str) -> str | None:
    """``body`` (``{ ... }`` as written) run in a closure whose answer is then perturbed: an early
    ``return`` or ``?`` inside still goes through the change."""
    changed = perturbation(ty, _V)
    if changed is None:
        return None
    return f"{{\n    let {_V}: {ty} = (|| -> {ty} {body})();\n    {changed}\n}}"


def _functions(code: str, names: Collection[str] | None) -> list[tuple[int, int, int, str]]:
    """``(header start, body's {, body's }, return type)`` of every outermost function outside the
    tests, named in ``names`` (every function when None)."""
    clean = code_view(code)
    test_spans = [(m.start(), matching_brace(clean, m.end() - 1)) for m in _CFG_TEST_MOD.finditer(clean)]
    found, pos = [], 0
    for m in _FN.finditer(clean):
        if m.start() < pos or any(a <= m.start() <= b for a, b in test_spans):
            continue  # nested in a body already taken, or a test
        if _TEST_ATTR_BEFORE.search(clean[: m.start()]):
            continue  # a #[test] function outside a test module
        if names is not None and m.group(1) not in names:
            continue  # a helper: left as written (a function nested in it may still be taken)
        open_brace = body_start(clean, m.end())
        if open_brace is None:
            continue
        close = matching_brace(clean, open_brace)
        found.append((m.start(), open_brace, close, return_type(clean[m.end() : open_brace])))
        pos = close + 1
    return found


def _rewrite(code: str, bodies: list[tuple[int, int, int, str | None]], drop_const: bool = False) -> str:
    """``code`` with each ``(header start, {, }, new body)`` applied (None: left as written);
    ``drop_const``: a changed ``const fn`` loses ``const`` (a default answer or a closure is not const)."""
    out, pos = [], 0
    for start, open_brace, close, body in bodies:
        if body is None:
            continue
        head = code[pos:start]
        const = _CONST_BEFORE.search(head) if drop_const else None
        out.append(head[: const.start()] + head[const.start() :].replace("const", "", 1) if const else head)
        out.append(code[start:open_brace])
        out.append(body)
        pos = close + 1
    out.append(code[pos:])
    return "".join(out)


def replace_bodies(code: str, body: str, names: Collection[str] | None = None) -> str:
    """``code`` with the body of every outermost function outside the tests (of those named in
    ``names``, when given) replaced by ``body``."""
    found = _functions(code, names)
    return _rewrite(code, [(s, o, c, f"{{\n    {body}\n}}") for s, o, c, _ in found])


def wrong_versions(code: str, names: Collection[str] | None = None) -> dict[str, str]:
    """The wrong versions of ``code`` by kind (``KINDS``), changing the functions named in ``names``
    (the asked functions; every function outside the tests when None). Empty when none of them is
    defined; without ``default`` and ``perturbed`` when none of them can answer wrongly."""
    found = _functions(code, names)
    zero = f"{{\n    {_ZERO}\n}}"
    answers = [(zero if has_default(t) else None, _perturbed_body(code[o : c + 1], t)) for _, o, c, t in found]
    bodies: dict[str, list[str | None]] = {
        "default": [default or perturbed for default, perturbed in answers],
        "perturbed": [perturbed or default for default, perturbed in answers],
        "todo": [f"{{\n    {_PANIC}\n}}" for _ in found],
    }
    versions: dict[str, str] = {}
    for kind, new in bodies.items():
        source = _rewrite(code, [(s, o, c, b) for (s, o, c, _), b in zip(found, new)], kind != "todo")
        if any(new) and source not in versions.values():
            versions[kind] = source
    return versions
