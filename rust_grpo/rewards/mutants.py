"""Wrong versions of a program, to check that tests really test something.

A test that passes on a program is worth something only if it fails on a wrong one. Two cheap
wrong versions cover the tricks a policy finds (``#[should_panic]`` around a false assert,
``catch_unwind``, ``assert!(f(x) == f(x))``, tests any implementation passes):

- ``default``: every body returns ``Default::default()`` (it answers, wrongly); it builds only
  where every return type has a default, so where it does not build:
- ``todo``: every function body of the program is ``todo!()`` (it panics).

Test functions and ``#[cfg(test)]`` modules are left as they are.
"""

from __future__ import annotations

import re

from .audit import code_view, matching_brace

_FN = re.compile(r"\bfn\s+[A-Za-z_][A-Za-z0-9_]*")
_CFG_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub\s+)?mod\s+[A-Za-z_][A-Za-z0-9_]*\s*\{")
_TEST_ATTR_BEFORE = re.compile(r"#\[test\]\s*(?:#\[[^\]]*\]\s*)*(?:pub\s+)?(?:async\s+)?$")
BODIES = {"default": "Default::default()", "todo": "todo!()"}  # in the order they are tried


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


def replace_bodies(code: str, body: str) -> str:
    """``code`` with every outermost function body outside the tests replaced by ``body``."""
    clean = code_view(code)
    test_spans = [(m.start(), matching_brace(clean, m.end() - 1)) for m in _CFG_TEST_MOD.finditer(clean)]
    out, pos = [], 0
    for m in _FN.finditer(clean):
        if m.start() < pos or any(a <= m.start() <= b for a, b in test_spans):
            continue  # nested in a body we already replaced, or a test
        if _TEST_ATTR_BEFORE.search(clean[: m.start()]):
            continue  # a #[test] function outside a test module
        open_brace = body_start(clean, m.end())
        if open_brace is None:
            continue
        close = matching_brace(clean, open_brace)
        out.append(code[pos : open_brace + 1])
        out.append(f"\n    {body}\n}}")
        pos = close + 1
    out.append(code[pos:])
    return "".join(out)
