"""Rust's ``use`` trees, read from the lexer's tokens: which name each declaration binds to which path.

One parser for every static check that follows ``use``: the audit's path expansion (which std
paths a program names through its aliases) and the hidden tests' scope (which names the tests
bind, which imports are anonymous). It reads token texts with ``::`` as one token
(:func:`join_paths`), starting after the ``use`` keyword, and never fails: a token it does not
parse ends the tree (or, inside a group, is skipped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Binding:
    """What one leaf of a ``use`` tree brings into scope."""

    name: str  # the name bound: the leaf, its ``as`` name (``_`` for an anonymous import); "" for a glob
    path: tuple[str, ...]  # what it stands for (a glob's: the module it reads); ``$x`` segments are ``*``
    glob: bool = False


def ident_name(text: str) -> str:
    """An identifier's name: a raw identifier (``r#type``) without its ``r#``."""
    return text.removeprefix("r#")


def join_paths(texts: Sequence[str]) -> list[str]:
    """Token texts with each ``:`` ``:`` pair joined into one ``::`` (for tokens read without their
    positions: inside a ``use`` declaration two colons apart are never anything else)."""
    out: list[str] = []
    for text in texts:
        if text == ":" and out and out[-1] == ":":
            out[-1] = "::"
        else:
            out.append(text)
    return out


def path_segment(texts: Sequence[str], i: int) -> tuple[str, int] | None:
    """The path segment at ``texts[i]`` and the index after it: an identifier, or a macro's ``$name``
    (``*``: it may stand for any name)."""
    text = texts[i]
    if text[:1].isalpha() or text[:1] == "_":
        return ident_name(text), i + 1
    if text == "$" and i + 1 < len(texts) and texts[i + 1][:1].isalpha():
        return "*", i + 2
    return None


def use_tree(texts: Sequence[str], i: int, prefix: tuple[str, ...] = ()) -> tuple[list[Binding], int]:
    """The bindings of the use tree at ``texts[i]`` (the token after ``use``, or an element of a group
    under ``prefix``), and the index after the tree. ``self`` in a group binds the group's module
    (``use std::io::{self, Read}`` binds ``io``)."""
    out: list[Binding] = []
    path = list(prefix)
    if i < len(texts) and texts[i] == "::":
        i += 1
    while i < len(texts):
        text = texts[i]
        if text == "*":
            return [*out, Binding("", tuple(path), glob=True)], i + 1
        if text == "{":
            i += 1
            while i < len(texts) and texts[i] != "}":
                inner, i = use_tree(texts, i, tuple(path))
                out += inner
                if i < len(texts) and texts[i] == ",":
                    i += 1
                elif i < len(texts) and texts[i] != "}":
                    i += 1  # something we do not parse: skip it
            return out, i + 1
        segment = path_segment(texts, i)
        if segment is None:
            return out, i
        path.append(segment[0])
        i = segment[1]
        if i < len(texts) and texts[i] == "::":
            i += 1
            continue
        if path[-1] == "self":
            path.pop()
        name = path[-1] if path else ""
        if i + 1 < len(texts) and texts[i] == "as":
            renamed = path_segment(texts, i + 1)
            name, i = (renamed[0], renamed[1]) if renamed else (texts[i + 1], i + 2)
        return [*out, Binding(name, tuple(path))] if name else out, i
    return out, i
