"""Refuse programs built on a known soundness hole of rustc that gives safe code arbitrary memory access.

``-F unsafe_code`` keeps FFI and raw pointers out, but safe Rust still has open I-unsound bugs. The one
public exploits use (cve-rs: a ``transmute``, use-after-free and buffer overflow in safe code) is
rust-lang/rust#25860, lifetime extension through implied bounds:

    fn translate<'a, 'b, T>(_witness: &'a &'b (), v: &'b T) -> &'a T { v }
    let f: fn(_, &'x T) -> &'static T = translate;   // the implied `'b: 'a` is not re-checked
    f(&&(), short_lived)                               // now 'static

Its shape is structural, whatever the names: a function whose *own* lifetime parameters ``'a`` and
``'b`` both appear in one parameter's type (that is what makes ``'b: 'a`` an implied bound; where the
value then goes, the return type, an out-parameter or a tuple, does not matter), without an explicit
bound between them (that makes both early-bound, and the coercion then checks it), and that is used
as a value (coerced to a ``fn`` pointer or passed where a higher-ranked ``Fn`` is expected) rather
than only called, since a direct call checks the implied bound. A macro's ``$name`` counts as a
lifetime, so the shape cannot be hidden in a ``macro_rules!`` body. Such a program is refused before it is
built (``invalid_input``, with the reason), by the same lexer that places our declarations
(``lexer.py``), so comments, strings and names change nothing.

The same goes for rust-lang/rust#57893 (a safe ``transmute`` through a trait object, which still
compiles on rustc 1.95): a trait with an associated type, implemented for every type parameter that
may be unsized (so for ``dyn Trait`` too), and named as ``dyn Trait<..., Assoc = X>``; the builtin
impl and the blanket one then give two answers for the associated type.

This is a detector of known holes' shapes, not a proof of soundness: the runner's seccomp
filter (``runner.c``) also refuses what an exploit needs to take over the test's output (moving a
descriptor onto stdout, writable-and-executable memory), and docs/sandbox.md says what remains.
"""

from __future__ import annotations

from dataclasses import dataclass

from .lexer import LexError, tokens

_OPEN = {"(": ")", "[": "]", "{": "}"}
_IGNORED_LIFETIMES = {"'static", "'_"}


@dataclass(frozen=True)
class _Fn:
    name: str
    lifetimes: tuple[str, ...]  # declared in its own generics, in order
    bounds: frozenset[tuple[str, str]]  # explicit ('long, 'short) outlives pairs
    params: tuple[frozenset[str], ...]  # the lifetimes each parameter's type names
    ret: frozenset[str]
    name_index: int


def _significant(code: str) -> list[tuple[str, str]]:
    """Code tokens; a macro's ``$name`` counts as a lifetime (it may be one: ``($a:lifetime)``)."""
    out: list[tuple[str, str]] = []
    for token in tokens(code):
        if token.trivia:
            continue
        text = code[token.start : token.end]
        if token.kind == "ident" and out and out[-1] == ("punct", "$"):
            out[-1] = ("lifetime", "$" + text)
        else:
            out.append((token.kind, text))
    return out


def _angle_end(toks: list[tuple[str, str]], i: int) -> int:
    """Index after the ``>`` closing the ``<`` at ``toks[i]`` (``->`` inside is an arrow)."""
    depth = 0
    for j in range(i, len(toks)):
        text = toks[j][1]
        if text == "<":
            depth += 1
        elif text == ">" and toks[j - 1][1] != "-":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(toks)


def _group_end(toks: list[tuple[str, str]], i: int) -> int:
    """Index after the bracket closing the one at ``toks[i]``."""
    stack: list[str] = []
    for j in range(i, len(toks)):
        text = toks[j][1]
        if text in _OPEN:
            stack.append(_OPEN[text])
        elif stack and text == stack[-1]:
            stack.pop()
            if not stack:
                return j + 1
    return len(toks)


def _split_params(toks: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Parameters of a parameter list (the tokens between its parentheses), split at top-level commas."""
    params: list[list[tuple[str, str]]] = [[]]
    depth = 0
    for j, (kind, text) in enumerate(toks):
        if text in "([{" or text == "<":
            depth += 1
        elif text in ")]}" or (text == ">" and (j == 0 or toks[j - 1][1] != "-")):
            depth -= 1
        if text == "," and depth == 0:
            params.append([])
        else:
            params[-1].append((kind, text))
    return [p for p in params if p]


def _lifetimes(toks: list[tuple[str, str]]) -> frozenset[str]:
    return frozenset(text for kind, text in toks if kind == "lifetime" and text not in _IGNORED_LIFETIMES)


def _outlives(toks: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """``'b: 'a + 'c`` pairs in generics or a where clause: (long, short)."""
    pairs: set[tuple[str, str]] = set()
    for j in range(len(toks) - 2):
        if toks[j][0] == "lifetime" and toks[j + 1][1] == ":":
            k = j + 2
            while k < len(toks) and toks[k][0] == "lifetime":
                pairs.add((toks[j][1], toks[k][1]))
                if k + 1 < len(toks) and toks[k + 1][1] == "+":
                    k += 2
                else:
                    break
    return pairs


def _functions(toks: list[tuple[str, str]]) -> list[_Fn]:
    found = []
    for i in range(len(toks) - 2):
        if toks[i] != ("ident", "fn") or toks[i + 1][0] != "ident":
            continue
        j = i + 2
        generics: list[tuple[str, str]] = []
        if j < len(toks) and toks[j][1] == "<":
            end = _angle_end(toks, j)
            generics, j = toks[j + 1 : end - 1], end
        if j >= len(toks) or toks[j][1] != "(":
            continue
        end = _group_end(toks, j)
        params = _split_params(toks[j + 1 : end - 1])
        k = end
        ret: list[tuple[str, str]] = []
        where: list[tuple[str, str]] = []
        target = ret if k + 1 < len(toks) and toks[k][1] == "-" and toks[k + 1][1] == ">" else None
        while k < len(toks) and toks[k][1] not in ("{", ";"):
            if toks[k] == ("ident", "where"):
                target = where
            elif target is not None:
                target.append(toks[k])
            k += 1
        declared = tuple(text for kind, text in generics if kind == "lifetime" and text not in _IGNORED_LIFETIMES)
        found.append(
            _Fn(
                name=toks[i + 1][1],
                lifetimes=tuple(dict.fromkeys(declared)),
                bounds=frozenset(_outlives(generics) | _outlives(where)),
                params=tuple(_lifetimes(p) for p in params),
                ret=_lifetimes(ret),
                name_index=i + 1,
            )
        )
    return found


def _translator(fn: _Fn) -> tuple[str, str] | None:
    """Two of ``fn``'s own lifetimes that one parameter's type names together (so one outlives the
    other by an implied bound) with no explicit bound between them; None when there are none.
    Where the value goes (the return type, an out-parameter, a tuple) does not matter."""
    own = set(fn.lifetimes)
    for names in fn.params:
        mine = sorted(names & own)
        for k, a in enumerate(mine):
            for b in mine[k + 1 :]:
                if (a, b) not in fn.bounds and (b, a) not in fn.bounds:
                    return a, b
    return None


def _used_as_value(toks: list[tuple[str, str]], fn: _Fn) -> bool:
    """Whether ``fn``'s name appears other than in its definition and in direct calls."""
    for i, (kind, text) in enumerate(toks):
        if kind != "ident" or text != fn.name or i == fn.name_index or (i > 0 and toks[i - 1][1] in (".", "fn")):
            continue
        j = i + 1
        turbofish = j + 2 < len(toks) and [t[1] for t in toks[j : j + 3]] == [":", ":", "<"]
        if turbofish:
            j = _angle_end(toks, j + 2)
        if j >= len(toks) or toks[j][1] != "(":
            return True
    return False


def _traits_with_types(toks: list[tuple[str, str]]) -> set[str]:
    """The program's traits that declare an associated type."""
    found = set()
    for i in range(len(toks) - 1):
        if toks[i] == ("ident", "trait") and toks[i + 1][0] == "ident":
            j = i + 2
            while j < len(toks) and toks[j][1] not in ("{", ";"):
                j += 1
            end = _group_end(toks, j) if j < len(toks) and toks[j][1] == "{" else j
            body = toks[j + 1 : end - 1]
            depth = 0
            for k, (_, text) in enumerate(body):
                if text in ("{", "(", "["):
                    depth += 1
                elif text in ("}", ")", "]"):
                    depth -= 1
                elif depth == 0 and text == "type" and k + 1 < len(body) and body[k + 1][0] == "ident":
                    found.add(toks[i + 1][1])
    return found


def _blanket_unsized(toks: list[tuple[str, str]], traits: set[str]) -> set[str]:
    """Those of ``traits`` implemented for a bare type parameter that may be unsized
    (``impl<T: ?Sized, ...> Trait<...> for T``): the impl then also covers ``dyn Trait``."""
    found = set()
    for i in range(len(toks) - 1):
        if toks[i] != ("ident", "impl") or toks[i + 1][1] != "<":
            continue
        end = _angle_end(toks, i + 1)
        generics = toks[i + 2 : end - 1]
        params = {
            generics[k][1]
            for k in range(len(generics))
            if generics[k][0] == "ident" and (k == 0 or generics[k - 1][1] in ",<")
        }
        j = end
        while j < len(toks) and toks[j][1] not in ("{", ";"):
            j += 1
        header = toks[end:j]
        texts = [t for _, t in header]
        if "for" not in texts or not texts or texts[0] not in traits:
            continue
        after_for = texts[texts.index("for") + 1 : texts.index("for") + 2]
        unsized = any(a == "?" and b == "Sized" for (_, a), (_, b) in zip(toks[i:j], toks[i + 1 : j + 1]))
        if after_for and after_for[0] in params and unsized:
            found.add(texts[0])
    return found


def _dyn_with_binding(toks: list[tuple[str, str]], traits: set[str]) -> str | None:
    """The first of ``traits`` named as ``dyn Trait<..., Assoc = Type>`` (or through a macro's ``$name``)."""
    for i in range(len(toks) - 2):
        name = toks[i + 1][1]
        if toks[i] != ("ident", "dyn") or toks[i + 2][1] != "<" or not (name in traits or name.startswith("$")):
            continue
        end = _angle_end(toks, i + 2)
        inner = [t for _, t in toks[i + 3 : end - 1]]
        if any(
            inner[k] == "=" and inner[k + 1 : k + 2] != ["="] and inner[k - 1 : k] != ["="]
            for k in range(1, len(inner))
        ):
            return name
    return None


def unsound_reason(source: str) -> str | None:
    """Why ``source`` is refused (it uses a known soundness hole), or None."""
    try:
        toks = _significant(source)
    except LexError:
        return None  # rustc rejects it anyway
    blanket = _blanket_unsized(toks, _traits_with_types(toks))
    if blanket and (name := _dyn_with_binding(toks, blanket)) is not None:
        return (
            f"trait {name} is implemented for every unsized type and also named as `dyn {name}<.. = ..>`: the "
            "shape of a known rustc soundness hole (rust-lang/rust#57893: two answers for one associated type); "
            "such code can read and write any memory in safe Rust, so it is not graded"
        )
    for fn in _functions(toks):
        shape = _translator(fn)
        if shape is not None and _used_as_value(toks, fn):
            a, b = shape
            return (
                f"fn {fn.name} has the shape of a known rustc soundness hole (rust-lang/rust#25860: "
                f"lifetimes {a} and {b} related only by an implied bound, and the fn used as a value); "
                "such code can read and write any memory in safe Rust, so it is not graded"
            )
    return None
