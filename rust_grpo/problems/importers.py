"""Import external Rust test suites into our problem schema (one JSONL row per problem).

- ``exercism``: an Exercism Rust track checkout (``exercises/practice/<slug>/`` with
  ``.meta/example.rs``, ``tests/*.rs``, ``Cargo.toml``, ``.docs/instructions*.md``). Tests are
  integration tests (``use <crate>::*``); ``#[ignore]`` tests run too. Exercises with
  dependencies are skipped (crates.io may be unreachable).
- ``exercism-jsonl``: the same exercises already flattened to JSONL (fields slug, crate_name,
  prompt, solution, tests).
- ``multipl-e``: MultiPL-E Rust rows (``name``, ``prompt`` ending in an open ``fn``, ``tests`` that
  close it and hold a ``fn main`` with asserts).
- ``humaneval``: HumanEval-style rows whose ``test`` is a ``#[cfg(test)] mod tests`` suite
  (``task_id``, ``prompt``, ``declaration``, ``canonical_solution``, ``test``).
- ``oxen``: Oxen's parquet/JSONL (``task_id``, ``rust_prompt``, ``rust_code``, ``rust_test_list``).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from .schema import DataError, Problem, normalize, read_records

FORMATS = ("exercism", "exercism-jsonl", "multipl-e", "humaneval", "oxen")
# the fields a record of each format must have: a file of another format is refused, not "imported"
REQUIRED_FIELDS = {
    "exercism-jsonl": ("slug", "prompt", "tests"),
    "multipl-e": ("name", "prompt", "tests"),
    "humaneval": ("task_id", "prompt", "declaration", "test"),
    "oxen": ("task_id", "rust_prompt", "rust_code", "rust_test_list"),
}


def import_exercism_dir(root: Path) -> tuple[list[Problem], list[str]]:
    base = root / "exercises" / "practice" if (root / "exercises" / "practice").is_dir() else root
    exercises = sorted(p for p in base.iterdir() if p.is_dir())
    if not any((p / "Cargo.toml").exists() for p in exercises):
        raise DataError(
            f"{root}: no exercises here (expected exercises/practice/<slug>/Cargo.toml, as in a checkout "
            "of the Exercism Rust track)"
        )
    problems, skipped = [], []
    for exercise in exercises:
        slug = exercise.name
        manifest = exercise / "Cargo.toml"
        example = exercise / ".meta" / "example.rs"
        tests = sorted((exercise / "tests").glob("*.rs"))
        if not (manifest.exists() and example.exists() and tests):
            skipped.append(f"{slug}: missing Cargo.toml, .meta/example.rs or tests/*.rs")
            continue
        cargo = tomllib.loads(manifest.read_text())
        if cargo.get("dependencies"):
            skipped.append(f"{slug}: needs crates ({', '.join(cargo['dependencies'])})")
            continue
        if len(tests) > 1:
            skipped.append(f"{slug}: more than one test file")
            continue
        crate = cargo.get("package", {}).get("name", slug).replace("-", "_")
        docs = [exercise / ".docs" / name for name in ("instructions.md", "instructions.append.md")]
        prompt = (
            "\n\n".join(d.read_text().strip() for d in docs if d.exists()) or f"Solve the Exercism exercise {slug}."
        )
        stub = exercise / "src" / "lib.rs"
        problems.append(
            Problem(
                id=f"exercism/{slug}",
                prompt=prompt + f"\n\nImplement the library crate `{crate}` (src/lib.rs).",
                signature=stub.read_text() if stub.exists() else "",
                solution=example.read_text(),
                tests=name_stub_traits(tests[0].read_text(), stub.read_text() if stub.exists() else "", crate),
                test_mode="integration",
                crate_name=crate,
                include_ignored=True,
                edition=str(cargo.get("package", {}).get("edition", "2021")),
            )
        )
    return problems, skipped


def _from_exercism_jsonl(record: dict[str, Any]) -> Problem:
    if record.get("extra_src_files"):
        raise DataError(
            f"{record['slug']}: needs extra source files {sorted(record['extra_src_files'])} (multi-file crates are not supported)"
        )
    edition = (
        tomllib.loads(record["cargo_toml"]).get("package", {}).get("edition", "2021")
        if record.get("cargo_toml")
        else "2021"
    )
    crate = record.get("crate_name", record["slug"]).replace("-", "_")
    return Problem(
        edition=str(edition),
        opt_level=2 if record.get("test_in_release_mode") else 0,
        id=record.get("id") or f"exercism/{record['slug']}",
        prompt=record["prompt"],
        signature=record.get("stub", ""),
        solution=record.get("solution", ""),
        tests=name_stub_traits(record["tests"], record.get("stub", ""), crate),
        test_mode="integration",
        crate_name=crate,
        include_ignored=True,
        # the reference needs `unsafe` (a linked list, a ring buffer): this row's answers may use it too
        allow_unsafe=_uses_unsafe(record.get("solution", "")),
    )


def name_stub_traits(tests: str, stub: str, crate: str) -> str:
    """``tests`` importing by name each trait the exercise's ``stub`` declares that they call without
    naming it: the hidden tests see only the program traits they name (``reward_sandbox.compile.trait_scope``),
    and an exercise such as luhn-trait calls ``"059".valid_luhn()`` through its glob import alone."""
    from reward_sandbox.compile.lexer import inner_attributes_end
    from reward_sandbox.compile.trait_scope import program_traits, type_names

    # the names the grader keeps in the tests' scope (a word in a comment or a path segment is none)
    missing = sorted(program_traits(stub) - type_names(tests))
    if not missing:
        return tests
    at = inner_attributes_end(tests)
    line = f"#[allow(unused_imports)] use {crate}::{{{', '.join(missing)}}};\n"
    return tests[:at] + ("\n" if at and not tests[:at].endswith("\n") else "") + line + tests[at:]


def _uses_unsafe(code: str) -> bool:
    from reward_sandbox.compile.lexer import LexError, code_only

    try:
        return re.search(r"\bunsafe\b", code_only(code)) is not None
    except LexError:
        return "unsafe" in code


def _from_multipl_e(record: dict[str, Any]) -> Problem:
    prompt = record["prompt"]
    header = re.search(r"^\s*(?:pub\s+)?fn\s.*$", prompt, re.MULTILINE)
    signature = header.group(0).strip().rstrip("{").strip() if header else ""
    tests = record["tests"].lstrip()
    if tests.startswith("}"):  # MultiPL-E's tests close the function the prompt opened
        tests = tests[1:]
    return Problem(
        id=str(record.get("name") or record["task_id"]),
        prompt=f"Complete this Rust function:\n```rust\n{prompt.rstrip()}\n```",
        signature=signature,
        solution=record.get("canonical_solution", "") or "",
        tests=tests,
        test_mode="main",
    )


_STD_ROOTS = {"std", "core", "alloc", "self", "super", "crate"}
_USE_LINE = re.compile(r"^[ \t]*use[ \t]+(?:::)?([A-Za-z_][A-Za-z0-9_]*)[^;\n]*;[ \t]*\n?", re.MULTILINE)
_LAST_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*;\s*$")


def drop_unused_crate_imports(code: str, body: str, where: str) -> tuple[str, tuple[str, ...]]:
    """HumanEvalPack declares ``use rand::Rng; use regex::Regex; use md5;`` in every problem. Drop each
    such import of a crate the ``body`` never uses (a std-only problem then links nothing); keep the
    imports of crates it does use, and return those crates, when the sandbox's set has them
    (``reward_sandbox.compile.crates``). A body that uses a crate outside the set cannot be graded offline,
    so the problem is refused naming the crate."""
    from reward_sandbox.compile.crateset import CURATED

    out, used = code, set()
    for match in list(_USE_LINE.finditer(code))[::-1]:
        root = match.group(1)
        if root in _STD_ROOTS:
            continue
        last = _LAST_NAME.search(match.group(0).strip())
        names = {root} | ({last.group(1)} if last else set())
        if any(re.search(rf"\b{re.escape(name)}\b", body) for name in names):
            if root not in CURATED:
                raise DataError(f"{where}: needs the crate `{root}` (not in the sandbox's set: {', '.join(CURATED)})")
            used.add(root)
            continue
        out = out[: match.start()] + out[match.end() :]
    return out, tuple(sorted(used))


_GEN_RANGE = re.compile(r"\.\s*gen_range\s*(?:::\s*<[^()]*>\s*)?\(")
_LOWER_THAN_RANGE = re.compile(r"\.\.|(?<![=!<>])=(?!=)|\|")  # `a..b` would parse these apart


def port_gen_range(code: str) -> str:
    """``rng.gen_range(low, high)`` rewritten as ``rng.gen_range(low..high)``: the set's rand (0.8)
    takes one range, while HumanEvalPack's tests (Rust/32, Rust/50) were written for rand <= 0.7's two
    arguments, the same half-open range. Without this their canonical solutions fail on the tests'
    own compile error. Calls with one argument, and text in comments and literals, stay as they are."""
    from reward_sandbox.compile.lexer import LexError, code_only

    try:
        blank = code_only(code, keep_delimiters=True)
    except LexError:
        return code
    out, pos = [], 0
    for match in _GEN_RANGE.finditer(blank):
        if match.start() < pos:
            continue  # inside a call already rewritten (its arguments were ported with it)
        close, commas = _call_close(blank, match.end())
        if close < 0 or len(commas) != 1:
            continue
        spans = ((match.end(), commas[0]), (commas[0] + 1, close))
        low, high = (
            f"({text})" if _LOWER_THAN_RANGE.search(blank[a:b]) else text
            for a, b in spans
            for text in [port_gen_range(code[a:b]).strip()]
        )
        out += [code[pos : match.end()], f"{low}..{high}"]
        pos = close
    return "".join(out) + code[pos:]


def _call_close(blank: str, start: int) -> tuple[int, list[int]]:
    """The index of the ``)`` closing a call whose arguments begin at ``start``, and of its top-level
    commas; -1 when it never closes."""
    depth, commas = 0, list[int]()
    for i in range(start, len(blank)):
        ch = blank[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return i, commas
            depth -= 1
        elif ch == "," and depth == 0:
            commas.append(i)
    return -1, commas


def _entry_signature(declaration: str, entry_point: str) -> str:
    """The entry point's own `fn` line (HumanEvalPack's declaration also holds a `fn main(){}`)."""
    headers = re.findall(rf"^\s*(?:pub\s+)?fn\s+{re.escape(entry_point)}\b[^{{]*", declaration, re.MULTILINE)
    return headers[-1].strip() if headers else declaration.strip().splitlines()[-1].rstrip("{").strip()


def humaneval_problem(record: dict[str, Any], solution_field: str = "canonical_solution") -> Problem:
    """A HumanEval-style row as a problem whose reference is the declaration plus ``solution_field``'s
    body (HumanEvalPack's ``buggy_solution`` gives the problem with its planted bug, which a check of
    the tests grades as it grades the canonical one)."""
    where = str(record["task_id"])
    body = port_gen_range(record.get(solution_field) or "")
    tests = port_gen_range(record["test"])
    declaration, crates = drop_unused_crate_imports(record.get("declaration", ""), body + tests, where)
    prompt, _ = drop_unused_crate_imports(record["prompt"], body + tests, where)
    return Problem(
        id=where,
        crates=crates,
        prompt=prompt,
        signature=_entry_signature(declaration, record.get("entry_point", "")),
        solution=(declaration + body) if body else "",
        tests=tests,
        test_mode="unit",
    )


_CONVERTERS = {"exercism-jsonl": _from_exercism_jsonl, "multipl-e": _from_multipl_e, "humaneval": humaneval_problem}


def import_problems(fmt: str, source: Path) -> tuple[list[Problem], list[str]]:
    """Problems and the reasons records were skipped (each naming the record)."""
    if fmt not in FORMATS:
        raise DataError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "exercism":
        if not source.is_dir():
            raise DataError(f"{source}: an Exercism track directory is needed")
        return import_exercism_dir(source)
    if not source.is_file():
        raise DataError(f"{source}: no such file (--format {fmt} reads one .jsonl/.json/.parquet file)")
    records = read_records(str(source))
    _check_fields(fmt, source, [r for _, r in records if isinstance(r, dict)])
    problems, skipped = [], []
    for where, record in records:
        try:
            if isinstance(record, DataError):
                raise record
            problems.append(normalize(record, where) if fmt == "oxen" else _CONVERTERS[fmt](record))
        except (KeyError, TypeError, AttributeError) as exc:
            skipped.append(f"{where}: missing or malformed field {exc}")
        except DataError as exc:
            skipped.append(str(exc))
    return problems, skipped


def _check_fields(fmt: str, source: Path, records: list[dict[str, Any]]) -> None:
    """Refuse a file none of whose records has the fields ``fmt`` needs (most likely another format)."""
    needed = REQUIRED_FIELDS[fmt]
    if any(all(key in r for key in needed) for r in records):
        return
    seen = sorted({key for r in records[:50] for key in r})[:12]
    raise DataError(
        f"{source}: no record has the fields --format {fmt} needs ({', '.join(needed)}); "
        f"its records have {', '.join(seen) or 'no fields'}"
    )


def summarize_skips(skipped: list[str], limit: int = 10) -> list[str]:
    """One line per distinct reason (the record named, then how many more share it), at most ``limit``."""
    by_reason: dict[str, list[str]] = {}
    for line in skipped:
        where, _, reason = line.partition(": ")
        by_reason.setdefault(reason or where, []).append(where)
    lines = [
        f"{wheres[0]}: {reason}" + (f" (and {len(wheres) - 1} more like it)" if len(wheres) > 1 else "")
        for reason, wheres in by_reason.items()
    ]
    return lines[:limit] + ([f"... and {len(lines) - limit} more reasons"] if len(lines) > limit else [])


def write_problems(path: Path, problems: list[Problem]) -> None:
    from reward_sandbox.outfiles import write_lines

    path.parent.mkdir(parents=True, exist_ok=True)
    write_lines(path, (json.dumps(p.to_dict()) for p in problems))
