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
as another, is not made. The rule they serve: ``Evaluation.catching_tests`` (``verdict.py``).
Test functions and ``#[cfg(test)]`` modules are left as they are.

For auditing a row's hidden tests (``evaluation/suite_audit.py``), :func:`mutants` adds small
source-level changes in the spirit of cargo-mutants (:data:`OPERATORS`), one wrong version per
site, inside the asked functions' bodies only, read through the sandbox's lexer so that no text
inside a comment, string or char is changed (a dropped statement goes whole, literals and all):
comparisons flipped (``<`` and ``<=``, ``>`` and ``>=``, ``==`` and ``!=``), arithmetic swapped
(``+`` and ``-``, ``*`` to ``+``, ``/`` to ``*``, ``%`` to ``/``, their ``=`` forms, ``<<`` and
``>>``, ``^`` to ``|``), integer literals plus one, ``&&`` and ``||`` swapped, ``if`` conditions
negated, ``!`` dropped, a parameter ignored (shadowed by its type's default), an expression
statement dropped. Own-test credit uses :func:`wrong_versions` alone, unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from reward_sandbox.compile.lexer import LexError, tokens

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


# --- source-level operators: the audit's wrong versions (cargo-mutants' kind) -------------------

OPERATORS = (
    "default",
    "perturbed",
    "comparison",
    "arithmetic",
    "literal",
    "logical",
    "negate_if",
    "argument",
    "statement",
    "not",
)
MAX_MUTANTS = 20  # per program, by default
_SWAPS = {
    "comparison": {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="},
    "arithmetic": {
        **{"+": "-", "-": "+", "*": "+", "/": "*", "%": "/"},  # `*` to `+`, not `/`: no division by zero
        **{"+=": "-=", "-=": "+=", "*=": "+=", "/=": "*=", "%=": "/="},
        **{"<<": ">>", ">>": "<<", "^": "|"},  # shifts and xor
    },
    "logical": {"&&": "||", "||": "&&"},
}
# Rust's operators of more than one char, longest first (`..=` before `..`)
_JOINED: tuple[str, ...] = ("..=", "<<=", ">>=", "...", "::", "->", "=>", "==", "!=", "<=", ">=", "&&", "||")
_JOINED += ("+=", "-=", "*=", "/=", "%=", "^=", "&=", "|=", "<<", ">>", "..")
_KEYWORDS = frozenset({
    "as", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "fn", "for", "if", "impl", "in",
    "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait", "type",
    "unsafe", "use", "where", "while",
})  # fmt: skip
_INT = re.compile(r"(\d[\d_]*)((?:[iu](?:8|16|32|64|128|size))?)")
_SIMPLE_PARAM = re.compile(r"(mut\s+)?([a-z_]\w*)")
_SLICE_REF = re.compile(r"&\s*(?:'\w+\s+)?(?:mut\s+)?\[[^;]*\]")  # `&[T]`, `&mut [T]`: Default gives `&[]`


@dataclass(frozen=True)
class Mutant:
    """One wrong version of a program: the operator that made it, where, and its whole text."""

    operator: str  # one of OPERATORS
    line: int  # the first changed line of the original (1-based)
    change: str  # what changed, short: "`<` -> `<=`"
    source: str


@dataclass(frozen=True)
class _Tok:
    kind: str  # the lexer's kinds, "generic" for a `<`/`>` that opens or closes generics
    start: int
    end: int
    text: str


def _is_type(name: str) -> bool:
    """An identifier spelled as a type (``Vec``, ``T``), not as a constant (``MAX``)."""
    return name[:1].isupper() and not (len(name) > 1 and name.isupper())


def _joined_tokens(code: str, start: int, end: int) -> list[_Tok]:
    """The code tokens between ``start`` and ``end``, adjacent punctuation joined into Rust's operators;
    a ``<`` after a type or ``::`` opens generics, and a ``>`` inside them closes one, alone."""
    raw = [t for t in tokens(code) if not t.trivia and start <= t.start and t.end <= end]
    out: list[_Tok] = []
    generics, i = 0, 0
    while i < len(raw):
        t = raw[i]
        text = code[t.start : t.end]
        if t.kind != "punct":
            out.append(_Tok(t.kind, t.start, t.end, text))
            i += 1
            continue
        generics = 0 if text in ";{}" else generics
        prev = out[-1].text if out else ""
        if (text == "<" and (prev == "::" or _is_type(prev))) or (text == ">" and generics):
            generics += 1 if text == "<" else -1
            out.append(_Tok("generic", t.start, t.end, text))
            i += 1
            continue
        j = i + 1
        while j < len(raw) and raw[j].kind == "punct" and raw[j].start == raw[j - 1].end and j - i < 3:
            j += 1
        run = code[t.start : raw[j - 1].end]
        op = next((o for o in _JOINED if run.startswith(o)), text)
        out.append(_Tok("punct", t.start, t.start + len(op), op))
        i += len(op)  # punctuation tokens are one char each
    return out


def _operand(tok: _Tok | None) -> bool:
    """Whether ``tok`` can end an operand, so that an operator after it is binary (``a - b``, not ``-b``)."""
    if tok is None:
        return False
    if tok.kind in ("number", "string", "char"):
        return True
    return (tok.kind == "ident" and tok.text not in _KEYWORDS) or tok.text in (")", "]", "?")


def _short(text: str, width: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _token_sites(code: str, toks: list[_Tok]) -> dict[str, list[tuple[int, int, str, str]]]:
    """``operator -> [(start, end, replacement, change)]``: every site in ``toks`` (one body's tokens)."""
    sites: dict[str, list[tuple[int, int, str, str]]] = {name: [] for name in OPERATORS}
    for i, tok in enumerate(toks):
        prev = toks[i - 1] if i else None
        if tok.kind == "punct" and _operand(prev):
            for operator, swaps in _SWAPS.items():
                if tok.text in swaps:
                    new = swaps[tok.text]
                    sites[operator].append((tok.start, tok.end, new, f"`{tok.text}` -> `{new}`"))
        elif tok.kind == "punct" and tok.text == "!" and prev is not None and not _operand(prev):
            sites["not"].append((tok.start, tok.end, "", "`!` dropped"))
        elif tok.kind == "number" and (m := _INT.fullmatch(tok.text)) and (prev is None or prev.text != "."):
            new = f"{int(m.group(1).replace('_', '')) + 1}{m.group(2)}"
            sites["literal"].append((tok.start, tok.end, new, f"`{tok.text}` -> `{new}`"))
        elif tok.kind == "ident" and tok.text == "if" and i + 1 < len(toks) and toks[i + 1].text != "let":
            end = _scan(toks, i + 1, stop=("{", "=>"))
            if end is not None and end > i + 1:
                a, b = toks[i + 1].start, toks[end - 1].end
                cond = code[a:b]
                sites["negate_if"].append((a, b, f"!({cond})", f"`if {_short(cond)}` negated"))
        if i and prev is not None and prev.text in (";", "{", "}") and _statement_start(toks, i):
            end = _scan(toks, i, stop=(";",), abort=("{", "}", "=>", ","))
            if end is not None:
                text = code[tok.start : toks[end].end]
                sites["statement"].append((tok.start, toks[end].end, "", f"`{_short(text)}` dropped"))
    return sites


def _statement_start(toks: list[_Tok], i: int) -> bool:
    """An expression statement may start at ``toks[i]``: a plain name (no keyword, no macro) or a deref."""
    tok, nxt = toks[i], toks[i + 1] if i + 1 < len(toks) else None
    if tok.kind == "ident":
        return tok.text not in _KEYWORDS and (nxt is None or nxt.text != "!")
    return tok.text == "*"


def _scan(toks: list[_Tok], i: int, stop: tuple[str, ...], abort: tuple[str, ...] = ()) -> int | None:
    """Index of the first token from ``i`` on that is in ``stop`` outside brackets; None when one in
    ``abort`` (or a closing bracket of an enclosing level) comes first, or nothing stops."""
    depth = 0
    for j in range(i, len(toks)):
        text = toks[j].text
        if depth == 0 and toks[j].kind == "punct" and text in stop:
            return j
        if depth == 0 and toks[j].kind == "punct" and text in abort:
            return None
        if toks[j].kind == "punct" and text in "([{":
            depth += 1
        elif toks[j].kind == "punct" and text in ")]}":
            depth -= 1
            if depth < 0:
                return None
    return None


def _argument_sites(code: str, start: int, open_brace: int) -> list[tuple[int, int, str, str]]:
    """One site per parameter whose type has a default: the body starts by shadowing it with that default."""
    clean = code_view(code)
    match = _FN.match(clean, start) or _FN.search(clean, start, open_brace)
    if match is None:
        return []
    pos = match.end()
    if clean[pos:open_brace].lstrip().startswith("<"):  # skip the generics (`->` is no closing bracket)
        depth, masked = 0, clean.replace("->", "  ")
        for k in range(clean.index("<", pos), open_brace):
            depth += (masked[k] == "<") - (masked[k] == ">")
            if depth == 0:
                pos = k + 1
                break
    paren = clean.find("(", pos, open_brace)
    if paren < 0:
        return []
    depth, close = 0, -1
    for k in range(paren, open_brace):
        depth += (clean[k] == "(") - (clean[k] == ")")
        if depth == 0:
            close = k
            break
    sites = []
    for param in _split(clean[paren + 1 : close]):
        pattern, colon, ty = param.partition(":")
        named = _SIMPLE_PARAM.fullmatch(pattern.strip())
        ty = " ".join(ty.split())
        if not colon or named is None or named.group(2) == "self":
            continue
        if has_default(ty) or _SLICE_REF.fullmatch(ty):
            mut, name = named.group(1) or "", named.group(2)
            line = f"\n    let {mut}{name}: {ty} = {_ZERO};"
            sites.append((open_brace + 1, open_brace + 1, line, f"`{name}` ignored (its type's default instead)"))
    return sites


def _line_of(code: str, pos: int) -> int:
    return code.count("\n", 0, pos) + 1


def _first_changed_line(a: str, b: str) -> int:
    for number, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), 1):
        if x != y:
            return number
    return min(len(a.splitlines()), len(b.splitlines())) + 1


def _spread(items: list[Mutant]) -> list[Mutant]:
    """``items`` in an order that spreads over them (first, middle, quarters...: bit-reversed indices),
    so that a cap takes sites from the whole body, not only its top."""
    width = max(1, (len(items) - 1).bit_length())
    return [items[i] for i in sorted(range(len(items)), key=lambda i: int(format(i, f"0{width}b")[::-1], 2))]


def mutants(
    code: str,
    names: Collection[str] | None = None,
    limit: int = MAX_MUTANTS,
    operators: Collection[str] = OPERATORS,
) -> list[Mutant]:
    """Wrong versions of ``code`` changing only the bodies of the functions named in ``names`` (the
    asked functions; every function outside the tests when None): the ``default`` and ``perturbed``
    versions of :func:`wrong_versions`, then one per site of each source-level operator, taken in turn
    from each operator (:data:`OPERATORS` order) up to ``limit``, each text once and never ``code``
    itself. Deterministic. Code that does not lex gets the two body versions only."""
    versions = wrong_versions(code, names)
    groups: dict[str, list[Mutant]] = {name: [] for name in OPERATORS if name in operators}
    for kind, change in (("default", "body -> its default answer"), ("perturbed", "answer perturbed")):
        if kind in groups and kind in versions:
            groups[kind].append(Mutant(kind, _first_changed_line(code, versions[kind]), change, versions[kind]))
    try:
        found = _functions(code, names)
        bodies = [(s, o, _joined_tokens(code, o, c + 1)) for s, o, c, _ in found]
    except LexError:
        bodies = []
    for start, open_brace, toks in bodies:
        sites = _token_sites(code, toks)
        sites["argument"] = _argument_sites(code, start, open_brace)
        for operator, found_sites in sites.items():
            if operator in groups:
                groups[operator] += [
                    Mutant(operator, _line_of(code, a), change, code[:a] + new + code[b:])
                    for a, b, new, change in found_sites
                ]
    queues = [_spread(group) for group in groups.values()]
    out: list[Mutant] = []
    seen = {code}
    while len(out) < limit and any(queues):
        for queue in queues:
            while queue:
                mutant = queue.pop(0)
                if mutant.source not in seen:
                    seen.add(mutant.source)
                    out.append(mutant)
                    break
            if len(out) >= limit:
                break
    return out
