"""Does a program's asked function use its arguments? A measure of argument-ignoring stubs.

A policy paid for compiling learns to write the asked function with a body that never reads its
parameters (``Vec::new()`` for ``gray_code(n)``, a constant for ``square_difference(n)``): it
builds, and for most inputs it is wrong. Such a build is cheap to spot without running anything:
the body names none of the parameters. ``rates/argless_builds`` (training) and the learning
benchmark's ``argless_builds`` (per stage) report the share of builds that do so; it should fall
as the policy learns to be right, not rise.

The asked functions are the row's, never the program's nor the tests' own (:func:`asked_functions`):
the functions its hidden tests call that the tests do not define themselves (``fn case_1()`` is a
test, not a call) and, when the row has a reference solution, that the solution defines. So the
check needs no signature (Oxen's rows have none), and a program cannot choose what is judged by
naming one of its own functions like a hidden test. Comments and strings are ignored
(``reward_sandbox.compile.lexer.code_only``), except inline format arguments (``format!("{n:b}")``
reads ``n``). Own-test credit (``mutants.py``) changes the same functions.
"""

from __future__ import annotations

import re

from reward_sandbox.compile.lexer import LexError, code_only

from .audit import matching_brace

_FN = re.compile(r"\bfn\s+([A-Za-z_]\w*)")
_FN_BEFORE = re.compile(r"\bfn\s+$")  # searched in the text before a call: the name follows `fn`
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(?:::\s*<[^()]*>\s*)?\(")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_FORMAT_ARG = re.compile(r"\{([A-Za-z_]\w*)[:}]")
_NOT_BINDINGS = {"mut", "ref", "_"}
_OPEN, _CLOSE = "([<", ")]>"


def _split_top_level(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets (``->`` is not a closing angle bracket)."""
    text = text.replace("->", "  ")
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _parameters(params: str) -> list[str]:
    """The names a parameter list binds: ``self`` for receivers, the lowercase identifiers of each
    pattern (``(a, b): (i32, i32)`` binds a and b; ``Point { x, y }: Point`` binds x and y)."""
    names = []
    for param in _split_top_level(params, ","):
        pattern = _split_top_level(param, ":")[0] if ":" in param else param
        for name in _IDENT.findall(pattern):
            if name not in _NOT_BINDINGS and not name[0].isupper():
                names.append(name)
    return names


def _after_generics(clean: str, pos: int) -> int:
    """The index after a generic parameter list starting at ``pos`` (``<T: Fn(i32) -> i32>``), if any."""
    start = len(clean) - len(clean[pos:].lstrip())
    if not clean.startswith("<", start):
        return pos
    depth, text = 0, clean.replace("->", "  ")
    for i in range(start, len(text)):
        depth += text[i] == "<"
        depth -= text[i] == ">"
        if depth == 0:
            return i + 1
    return pos


def _body_brace(clean: str, pos: int) -> int | None:
    """The ``{`` opening the body of a fn whose header continues at ``pos``, or None when a ``;`` outside
    brackets ends it first (``-> [u8; 4]`` holds one inside)."""
    depth = 0
    for i in range(pos, len(clean)):
        depth += clean[i] in "(["
        depth -= clean[i] in ")]"
        if depth == 0 and clean[i] in "{;":
            return i if clean[i] == "{" else None
    return None


def function_definitions(code: str) -> dict[str, tuple[list[str], str, str]]:
    """``name -> (parameters, body in code-only text, body as written)`` for every ``fn`` with a body
    (the first definition of a name wins). Raises :class:`LexError` on text that does not lex."""
    clean = code_only(code)
    out: dict[str, tuple[list[str], str, str]] = {}
    for match in _FN.finditer(clean):
        name, pos = match.group(1), _after_generics(clean, match.end())
        open_paren = clean.find("(", pos)
        if open_paren < 0:
            continue
        depth, close = 0, -1
        for i in range(open_paren, len(clean)):
            depth += clean[i] == "("
            depth -= clean[i] == ")"
            if depth == 0:
                close = i
                break
        if close < 0:
            continue
        brace = _body_brace(clean, close + 1)
        if brace is None:  # a declaration (trait method), no body
            continue
        end = matching_brace(clean, brace)
        if name not in out:
            out[name] = (_parameters(clean[open_paren + 1 : close]), clean[brace : end + 1], code[brace : end + 1])
    return out


def asked_functions(tests: str, solution: str = "") -> tuple[str, ...]:
    """The functions a row asks for, in the order its hidden ``tests`` first call them: names the tests
    call (``f(``, ``T::f(``, ``x.f(``) and do not define themselves, and that the reference
    ``solution`` defines when the row has one (a solution that does not lex is not used). Empty when
    there are no tests or they call no such function (a row that asks for trait impls only)."""
    try:
        text = code_only(tests)
        own = set(function_definitions(tests))
    except LexError:
        return ()
    reference: set[str] | None = None
    if solution.strip():
        try:
            reference = set(function_definitions(solution))
        except LexError:
            reference = None
    names: list[str] = []
    for match in _CALL.finditer(text):
        name = match.group(1)
        if _FN_BEFORE.search(text[max(0, match.start() - 32) : match.start()]) or name in own or name in names:
            continue  # a definition (`fn case_1()`), or a function of the tests' own
        if reference is None or name in reference:
            names.append(name)
    return tuple(names)


def asked_function(code: str, tests: str, solution: str = "") -> str | None:
    """The first of the row's asked functions (:func:`asked_functions`) that ``code`` defines, or None."""
    try:
        defined = function_definitions(code)
    except LexError:
        return None
    return next((name for name in asked_functions(tests, solution) if name in defined), None)


def ignores_arguments(code: str | None, tests: str, solution: str = "") -> bool | None:
    """True when the asked function (:func:`asked_function`) takes parameters and its body names none
    of them; False when it names one (or takes none); None when there is no such function to judge
    (no code, no hidden tests, or the program defines none of the asked functions)."""
    if not code or not tests.strip():
        return None
    name = asked_function(code, tests, solution)
    if name is None:
        return None
    params, clean_body, body = function_definitions(code)[name]
    if not params:
        return False
    used = set(_IDENT.findall(clean_body)) | set(_FORMAT_ARG.findall(body))
    return not used.intersection(params)
