"""Which std paths a program names, through whatever ``use`` aliases it declares.

A check that looks for ``process::exit`` in the text misses ``use std::process as p; p::exit(1 - 1)``,
``use std::process::{exit as e}; e(0)`` and ``use std::process::*; exit(0)``. Here the program's
``use`` declarations (and ``extern crate ... as``) are parsed from the real lexer's tokens into a map
from each name they bind to the path it stands for, and every path the code spells is expanded
through that map before it is compared. The map ignores modules (a name bound anywhere counts
everywhere): an alias declared in one module and used in another is still followed, at the price of
flagging a program that binds the same name twice to different things.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from reward_sandbox.compile.lexer import LexError, tokens
from reward_sandbox.compile.usetree import ident_name, path_segment, use_tree

# (module, item) pairs whose use ends the process (or aborts it) without libtest's say
EXIT_PATHS = frozenset(
    {
        ("process", "exit"),
        ("process", "abort"),
        ("libc", "exit"),
        ("libc", "_exit"),
        ("libc", "abort"),
        ("alloc", "handle_alloc_error"),
        ("intrinsics", "abort"),
    }
)
_EXIT_MODULES = {a for a, _ in EXIT_PATHS}
_EXIT_ITEMS = {b for _, b in EXIT_PATHS}
_ROOTS = {"crate", "self", "super"}


@dataclass(frozen=True)
class Tok:
    text: str
    start: int


def _significant(code: str) -> list[Tok]:
    """Code tokens (no whitespace, comments or literals' contents), ``::`` joined into one."""
    out: list[Tok] = []
    try:
        for token in tokens(code):
            if token.trivia:
                continue
            text = code[token.start : token.end] if token.kind in ("ident", "punct", "lifetime") else '""'
            if text == ":" and out and out[-1].text == ":" and out[-1].start == token.start - 1:
                out[-1] = Tok("::", out[-1].start)
            else:
                out.append(Tok(text, token.start))
    except LexError:
        return []
    return out


def _bindings(toks: list[Tok]) -> tuple[dict[str, list[str]], list[list[str]], set[int]]:
    """Every name a ``use`` or ``extern crate ... as`` binds, every glob's module, and the indices of
    the tokens those declarations span (a declaration alone ends nothing: only a use of it does)."""
    binds: dict[str, list[str]] = {}
    globs: list[list[str]] = []
    spans: set[int] = set()
    texts = [t.text for t in toks]
    for i, tok in enumerate(toks):
        if tok.text == "use" and (i == 0 or toks[i - 1].text not in (".", "::")):
            tree, end = use_tree(texts, i + 1)
            for binding in tree:
                if binding.glob:
                    globs.append(list(binding.path))
                elif binding.name != "_":
                    binds[binding.name] = list(binding.path)
            spans.update(range(i, end + 1))
        elif tok.text == "extern" and i + 4 < len(toks) and toks[i + 1].text == "crate" and toks[i + 3].text == "as":
            binds[ident_name(toks[i + 4].text)] = [ident_name(toks[i + 2].text)]
            spans.update(range(i, i + 5))
    return binds, globs, spans


def _expand(path: list[str], binds: dict[str, list[str]]) -> list[str]:
    """``path`` with its first segment replaced by what it stands for, repeatedly (alias of alias)."""
    for _ in range(8):
        while path and path[0] in _ROOTS:
            path = path[1:]
        if not path or path[0] not in binds or binds[path[0]][:1] == path[:1]:
            return path
        path = binds[path[0]] + path[1:]
    return path


def _names_exit(path: list[str]) -> bool:
    return any(
        (a, b) in EXIT_PATHS or (a == "*" and b in _EXIT_ITEMS) or (b == "*" and a in _EXIT_MODULES)
        for a, b in itertools.pairwise(path)
    )


def exit_paths(code: str, counts: Callable[[int], bool] = lambda _pos: True) -> list[str]:
    """The paths in ``code`` (at offsets ``counts`` accepts) that name a way to end the process, each as
    written. A bare name counts when a ``use`` binds it to one, or a glob brings one in."""
    toks = _significant(code)
    texts = [t.text for t in toks]
    binds, globs, declarations = _bindings(toks)
    glob_exits = {b for path in globs for a, b in EXIT_PATHS if _expand(path, binds)[-1:] == [a]}
    found: list[str] = []
    i = 0
    while i < len(toks):
        start = i
        if toks[i].text == "::":
            i += 1
        path: list[str] = []
        while i < len(toks) and (segment := path_segment(texts, i)) is not None:
            path.append(segment[0])
            i = segment[1]
            if i < len(toks) and toks[i].text == "::":
                i += 1
            else:
                break
        if not path:
            i = start + 1
            continue
        member = start > 0 and toks[start - 1].text in (".", "fn")  # a method, field or definition
        full = _expand(path, binds)
        bare_glob = len(path) == 1 and path[0] in glob_exits and path[0] not in binds
        if start not in declarations and not member and counts(toks[start].start):
            # a re-export followed through its module (``a::bye`` of ``mod a { pub use ...exit as bye; }``)
            reexport = len(path) > 1 and path[-1] in binds and _names_exit(_expand(path[-1:], binds))
            if _names_exit(full) or bare_glob or reexport:
                found.append("::".join(path))
    return found
