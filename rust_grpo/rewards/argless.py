"""Does a program's asked function use its arguments? A measure of argument-ignoring stubs.

A policy paid for compiling learns to write the asked function with a body that never reads its
parameters (``Vec::new()`` for ``gray_code(n)``, a constant for ``square_difference(n)``): it
builds, and for most inputs it is wrong. Such a build is cheap to spot without running anything:
the body names none of the parameters. ``rates/argless_builds`` (training) and the learning
benchmark's ``argless_builds`` (per stage) report the share of builds that do so; it should fall
as the policy learns to be right, not rise.

The asked function is the one the row's hidden tests call that the program defines, so the check
needs no signature (Oxen's rows have none) and follows the names the program chose. Comments and
strings are ignored (``reward_sandbox.compile.lexer.code_only``), except inline format arguments (``format!("{n:b}")``
reads ``n``).
"""

from __future__ import annotations

import re

from reward_sandbox.compile.lexer import LexError, code_only

from .audit import matching_brace

_FN = re.compile(r"\bfn\s+([A-Za-z_]\w*)")
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
        brace, semicolon = clean.find("{", close), clean.find(";", close)
        if brace < 0 or 0 <= semicolon < brace:  # a declaration (trait method), no body
            continue
        end = matching_brace(clean, brace)
        if name not in out:
            out[name] = (_parameters(clean[open_paren + 1 : close]), clean[brace : end + 1], code[brace : end + 1])
    return out


def asked_function(code: str, tests: str) -> str | None:
    """The first function the hidden ``tests`` call that ``code`` defines, or None."""
    try:
        defined = function_definitions(code)
        called = [m.group(1) for m in _CALL.finditer(code_only(tests))]
    except LexError:
        return None
    return next((name for name in called if name in defined), None)


def ignores_arguments(code: str | None, tests: str) -> bool | None:
    """True when the function the hidden tests call takes parameters and its body names none of
    them; False when it names one (or takes none); None when there is no such function to judge
    (no code, no hidden tests, or the tests call nothing the program defines)."""
    if not code or not tests.strip():
        return None
    name = asked_function(code, tests)
    if name is None:
        return None
    params, clean_body, body = function_definitions(code)[name]
    if not params:
        return False
    used = set(_IDENT.findall(clean_body)) | set(_FORMAT_ARG.findall(body))
    return not used.intersection(params)
