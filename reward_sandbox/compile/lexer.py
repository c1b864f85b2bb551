"""Just enough of Rust's lexer to place text between a program's tokens safely.

Where our module declarations go, and which ``#[test]`` or ``cfg(test)`` are real code, depends
on knowing what is a comment, a string or a char literal: a ``"`` inside a block comment, or a
``'"'`` char, must not fool us (a program that fooled the placement could wrap our declarations
in its own macro). Rust's rules for those are small: nested block comments, (byte/C) strings
with escapes, raw strings with hashes, char literals versus lifetimes, raw identifiers.
Text that does not lex (an unterminated literal) raises :class:`LexError`; rustc rejects it too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_IDENT_START = re.compile(r"[^\W\d]", re.UNICODE)
_IDENT = re.compile(r"\w+", re.UNICODE)
_RAW_STRING = re.compile(r'(?:b|c)?r(#*)"')
_STRING = re.compile(r'(?:b|c)?"')
_NUMBER = re.compile(r"\d[\w]*(?:\.(?!\.)[\w]*)?", re.UNICODE)


class LexError(ValueError):
    """The text is not lexically valid Rust."""


@dataclass(frozen=True)
class Token:
    kind: str  # "space", "comment", "string", "char", "lifetime", "ident", "number", "punct"
    start: int
    end: int

    @property
    def trivia(self) -> bool:
        return self.kind in ("space", "comment")


def _block_comment_end(text: str, pos: int) -> int:
    depth, pos = 1, pos + 2
    while depth:
        if pos >= len(text):
            raise LexError("unterminated block comment")
        if text.startswith("/*", pos):
            depth, pos = depth + 1, pos + 2
        elif text.startswith("*/", pos):
            depth, pos = depth - 1, pos + 2
        else:
            pos += 1
    return pos


def _quoted_end(text: str, pos: int, quote: str) -> int:
    """End of a literal whose opening ``quote`` is at ``pos`` (backslash escapes allowed)."""
    pos += 1
    while pos < len(text):
        if text[pos] == "\\":
            pos += 2
        elif text[pos] == quote:
            return pos + 1
        else:
            pos += 1
    raise LexError("unterminated literal")


def _char_or_lifetime(text: str, pos: int) -> Token:
    """At a ``'``: a char literal (``'x'``, ``'\\n'``, ``'\\u{1F600}'``) or a lifetime/label (``'a``)."""
    nxt = text[pos + 1 : pos + 2]
    if nxt == "\\":
        return Token("char", pos, _quoted_end(text, pos, "'"))
    if nxt and text[pos + 2 : pos + 3] == "'":
        return Token("char", pos, pos + 3)
    match = _IDENT.match(text, pos + 1)
    if match and _IDENT_START.match(nxt):
        return Token("lifetime", pos, match.end())
    raise LexError("stray quote")


# Rust's whitespace (Pattern_White_Space): Python's str.isspace() misses the two direction marks.
_RUST_SPACE = frozenset("\t\n\v\f\r \u0085\u200e\u200f\u2028\u2029")


def _next_token(text: str, pos: int) -> Token:
    n, ch = len(text), text[pos]
    prev_ident = pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] == "_")
    if ch in _RUST_SPACE or (pos == 0 and ch == "\ufeff"):  # a byte-order mark may open the file
        end = pos + 1
        while end < n and text[end] in _RUST_SPACE:
            end += 1
        return Token("space", pos, end)
    if text.startswith("//", pos):
        end = text.find("\n", pos)
        return Token("comment", pos, n if end < 0 else end)
    if text.startswith("/*", pos):
        return Token("comment", pos, _block_comment_end(text, pos))
    if not prev_ident and (raw := _RAW_STRING.match(text, pos)):
        closing = '"' + raw.group(1)
        end = text.find(closing, raw.end())
        if end < 0:
            raise LexError("unterminated raw string")
        return Token("string", pos, end + len(closing))
    if not prev_ident and (plain := _STRING.match(text, pos)):
        return Token("string", pos, _quoted_end(text, plain.end() - 1, '"'))
    if ch == "b" and not prev_ident and text.startswith("b'", pos):
        return Token("char", pos, _char_or_lifetime(text, pos + 1).end)
    if ch == "'":
        return _char_or_lifetime(text, pos)
    if text.startswith("r#", pos) and not prev_ident and _IDENT_START.match(text[pos + 2 : pos + 3]):
        return Token("ident", pos, _match_end(_IDENT, text, pos + 2))
    if _IDENT_START.match(ch):
        return Token("ident", pos, _match_end(_IDENT, text, pos))
    if ch.isdigit():
        return Token("number", pos, _match_end(_NUMBER, text, pos))
    return Token("punct", pos, pos + 1)


def _match_end(pattern: re.Pattern[str], text: str, pos: int) -> int:
    match = pattern.match(text, pos)
    return match.end() if match else pos + 1


def tokens(text: str) -> Iterator[Token]:
    """The tokens of ``text`` in order; their spans cover it exactly."""
    pos = 0
    while pos < len(text):
        token = _next_token(text, pos)
        yield token
        pos = token.end


def code_tokens(text: str) -> list[tuple[str, str]]:
    """``(kind, text)`` of every token but whitespace and comments, in order (raises :class:`LexError`)."""
    return [(t.kind, text[t.start : t.end]) for t in tokens(text) if not t.trivia]


def code_only(text: str, keep_delimiters: bool = False) -> str:
    """``text`` with comments, strings and char literals blanked (lengths and newlines kept), so that
    patterns searched in it match code only. ``keep_delimiters`` keeps a literal's first and last
    character (``"  "``), so that an argument made of a literal still shows as one."""
    out = list(text)
    for token in tokens(text):
        if token.kind in ("comment", "string", "char"):
            keep = 1 if keep_delimiters and token.kind != "comment" else 0
            for i in range(token.start + keep, token.end - keep):
                if out[i] != "\n":
                    out[i] = " "
    return "".join(out)


def _is_inner_doc(comment: str) -> bool:
    """``//! ...`` and ``/*! ... */`` are inner doc attributes, not comments."""
    return comment.startswith("//!") or (comment.startswith("/*!") and not comment.startswith("/*!*/"))


def _opens_attribute(text: str, pos: int) -> bool:
    """Whether the first token at or after ``pos`` (past whitespace and comments) is ``[``."""
    for token in tokens(text[pos:]):
        if not token.trivia:
            return text[pos + token.start] == "["
    return False


def inner_attributes_end(text: str) -> int:
    """Offset just after the leading inner attributes (``#![...]``, ``//!``, ``/*! */``): the first
    place an item may go. Raises :class:`LexError` when the text does not lex."""
    i, end = 0, 0
    if text.startswith("\ufeff"):
        end = 1
    shebang = text.startswith("#!", end) and not _opens_attribute(text, end + 2)
    if shebang:  # `#!/usr/bin/env ...` on the first line is not Rust: rustc skips that line
        newline = text.find("\n")
        end = len(text) if newline < 0 else newline + 1
    toks = list(tokens(text[end:]))
    toks = [Token(t.kind, t.start + end, t.end + end) for t in toks]
    while i < len(toks):
        tok = toks[i]
        if tok.kind == "space" or (tok.kind == "comment" and not _is_inner_doc(text[tok.start : tok.end])):
            i += 1
            continue
        if tok.kind == "comment":  # an inner doc comment; after a `//!` line, go past its newline
            end, i = tok.end, i + 1
            if text.startswith("//", tok.start) and text.startswith("\n", end):
                end += 1
            continue
        significant = [k for k in range(i, len(toks)) if not toks[k].trivia][:3]
        if len(significant) < 3 or [text[toks[k].start : toks[k].end] for k in significant] != ["#", "!", "["]:
            return end
        depth, k = 0, significant[2]
        while k < len(toks):
            piece = text[toks[k].start : toks[k].end] if toks[k].kind == "punct" else ""
            if piece in ("(", "[", "{"):
                depth += 1
            elif piece in (")", "]", "}"):
                depth -= 1
                if depth == 0:
                    break
            k += 1
        if k >= len(toks):
            raise LexError("unterminated inner attribute")
        end, i = toks[k].end, k + 1
    return end
