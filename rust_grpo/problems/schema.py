"""Load Rust problems from JSONL, Parquet or a `datasets` name, in our schema or Oxen's, and
turn them into chat prompts for GRPO.

Our schema: ``id, prompt, signature, solution, tests`` (+ optional ``test_mode``, ``crate_name``).
Oxen's: ``task_id, rust_prompt, rust_code, rust_test_list``. Both become :class:`Problem`.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..shipped import shipped_path

if TYPE_CHECKING:
    from reward_sandbox import InvalidJob, Job

    from .answer_format import AnswerFormat

log = logging.getLogger("rust_grpo")


class DataError(ValueError):
    """A dataset problem; the message names the file, the record and the reason."""


@dataclass(frozen=True)
class Problem:
    id: str
    prompt: str
    signature: str = ""
    solution: str = ""
    tests: str = ""  # hidden reference tests (never shown to the model)
    test_mode: str = "unit"
    crate_name: str = "solution"
    include_ignored: bool = False  # run #[ignore] tests too (Exercism marks most of them so)
    edition: str = "2021"
    opt_level: int = 0  # Exercism's release-mode exercises need an optimised build to finish in time
    allow_unsafe: bool = False  # the sandbox forbids `unsafe` unless a problem needs it (see reward_sandbox.Job)
    crates: tuple[str, ...] = ()  # crates of the sandbox's set (reward_sandbox.compile.crates) the problem may use

    def job(self, source: str, job_id: str | None = None, timeout_s: float | None = None) -> Job:
        """A validated sandbox job grading ``source`` against this problem's hidden tests (the one route
        from a problem to a job; ``timeout_s`` None leaves the grader's own limit); raises
        :class:`reward_sandbox.InvalidJob` naming the problem and the field when it cannot be one."""
        from reward_sandbox import Job

        record: dict[str, Any] = {
            "id": job_id or self.id,
            "source": source,
            "test_mode": self.test_mode,
            "crate_name": self.crate_name,
            "edition": self.edition,
            "opt_level": self.opt_level,
            "allow_unsafe": self.allow_unsafe,
        }
        if self.crates:
            record["crates"] = list(self.crates)
        if timeout_s is not None:
            record["timeout_s"] = timeout_s
        if self.tests.strip():
            record.update(tests=self.tests, include_ignored=self.include_ignored)
        else:
            record["test_mode"] = "unit"
        return Job.from_dict(record)

    def job_or_invalid(
        self, source: str, job_id: str | None = None, timeout_s: float | None = None
    ) -> Job | InvalidJob:
        """:meth:`job`, or the error as an item the grader reports as ``invalid_input`` in its place,
        so one bad record never stops a batch."""
        from reward_sandbox import InvalidJob

        try:
            return self.job(source, job_id, timeout_s)
        except InvalidJob as exc:
            return exc

    def to_dict(self) -> dict[str, Any]:
        """The row as written to JSONL; ``crates`` only when there are some (std-only rows unchanged)."""
        out = asdict(self)
        if self.crates:
            out["crates"] = list(self.crates)
        else:
            del out["crates"]
        return out


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    return str(value)


def oxen_tests(asserts: str) -> str:
    """Oxen's ``rust_test_list`` is bare statements (``assert_eq!(f(1), 2);`` one per line), not
    ``#[test]`` functions: each becomes a test of its own, so credit is per assert. A list that
    already holds ``#[test]`` functions is kept as it is."""
    if "#[test]" in asserts or not asserts.strip():
        return asserts
    statements, current = [], ""
    for line in asserts.splitlines():
        current = f"{current}\n{line}" if current else line
        if current.strip() and current.rstrip().endswith(";"):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip() + ("" if current.rstrip().endswith(";") else ";"))
    return "".join(f"#[test]\nfn assert_{i}() {{\n    {s}\n}}\n\n" for i, s in enumerate(statements, 1))


def normalize(record: Any, where: str) -> Problem:
    """One record in either schema -> Problem, or a DataError saying what is wrong."""
    from reward_sandbox.jobs import InvalidCrate, check_crate_name

    if not isinstance(record, dict):
        raise DataError(f"{where}: expected an object, got {type(record).__name__}")
    if "rust_prompt" in record or "task_id" in record:  # Oxen's schema
        prompt, problem_id = _text(record.get("rust_prompt")), record.get("task_id")
        solution, tests = _text(record.get("rust_code")), oxen_tests(_text(record.get("rust_test_list")))
        signature = ""
    else:
        prompt, problem_id = _text(record.get("prompt")), record.get("id")
        solution, tests, signature = (
            _text(record.get("solution")),
            _text(record.get("tests")),
            _text(record.get("signature")),
        )
    if problem_id is None or str(problem_id) == "":
        raise DataError(f"{where}: missing 'id' (or Oxen's 'task_id')")
    if not prompt.strip():
        raise DataError(f"{where} (id={problem_id}): missing 'prompt' (or Oxen's 'rust_prompt')")
    mode = record.get("test_mode") or "unit"
    if mode not in ("unit", "integration", "main"):
        raise DataError(f"{where} (id={problem_id}): test_mode must be unit, integration or main, got {mode!r}")
    crate_name = record.get("crate_name") or "solution"
    try:  # the sandbox's own check, at load time rather than as every job's ``invalid_input``
        check_crate_name(crate_name)
    except InvalidCrate as exc:
        raise DataError(f"{where} (id={problem_id}): {exc}") from None
    return Problem(
        id=str(problem_id),
        prompt=prompt,
        signature=signature,
        solution=solution,
        tests=tests,
        test_mode=mode,
        crate_name=crate_name,
        include_ignored=bool(record.get("include_ignored", False)),
        edition=str(record.get("edition") or "2021"),
        opt_level=int(record.get("opt_level") or 0),
        allow_unsafe=bool(record.get("allow_unsafe", False)),
        crates=row_crates(record.get("crates"), f"{where} (id={problem_id})"),
    )


def row_crates(value: Any, where: str) -> tuple[str, ...]:
    """A row's ``crates`` (a list of names, or one comma-separated string), checked against the
    sandbox's set by the sandbox's own check (``reward_sandbox.jobs.check_crates``) now, so a typo
    fails at load time rather than as every job's ``invalid_input``."""
    from reward_sandbox.jobs import InvalidCrate, check_crates

    if value is None or value == "":
        return ()
    try:
        return check_crates([v.strip() for v in value.split(",")] if isinstance(value, str) else value)
    except InvalidCrate as exc:
        raise DataError(f"{where}: {exc}") from None


def jsonl_records(path: Path) -> list[tuple[int, Any]]:
    """(line number, record) for each non-blank line of a JSONL file; a line that is not UTF-8 JSON
    becomes a :class:`DataError` naming the file and line, in its place, so the others still count."""
    out: list[tuple[int, Any]] = []
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                out.append((number, DataError(f"{path}:{number}: not UTF-8 text (byte {exc.start})")))
                continue
            if line.strip():
                try:
                    out.append((number, json.loads(line)))
                except json.JSONDecodeError as exc:
                    out.append((number, DataError(f"{path}:{number}: not valid JSON ({exc.msg})")))
    return out


def read_records(spec: str, split: str = "train") -> list[tuple[str, Any]]:
    """Raw records with a location label each, from a file or a `datasets` name."""
    path = shipped_path(spec)
    if path.suffix == ".json" and path.exists():  # one JSON document: an array of records (MultiPL-E) or one record
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DataError(f"{spec}: not valid JSON ({exc.msg})") from None
        except UnicodeDecodeError as exc:
            raise DataError(f"{spec}: not UTF-8 text (byte {exc.start})") from None
        records = document if isinstance(document, list) else [document]
        return [(f"{spec}[{i}]", record) for i, record in enumerate(records)]
    if path.suffix == ".jsonl":
        if not path.exists():
            raise DataError(f"dataset file not found: {spec}")
        return [(f"{spec}:{number}", record) for number, record in jsonl_records(path)]
    if path.suffix == ".parquet":
        if not path.exists():
            raise DataError(f"dataset file not found: {spec}")
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
        return [(f"{path.name} row {i}", r) for i, r in enumerate(rows)]
    import datasets

    dataset = datasets.load_dataset(spec, split=split)
    return [(f"{spec}[{split}] row {i}", r) for i, r in enumerate(dataset)]


def load_problems(
    spec: str,
    split: str = "train",
    max_rows: int = 0,
    shuffle_seed: int = -1,
    strict: bool = False,
    max_solution_chars: int = 0,
) -> list[Problem]:
    """Problems from ``spec``. Bad records are reported by location and skipped (or raise, if strict).
    ``max_solution_chars`` > 0 keeps only problems whose reference solution is at most that long
    (applied before ``max_rows``)."""
    problems, errors = [], []
    for where, record in read_records(spec, split):
        try:
            if isinstance(record, DataError):
                raise record
            problems.append(normalize(record, where))
        except DataError as exc:
            errors.append(str(exc))
    if errors:
        if strict:
            raise DataError("; ".join(errors))
        for message in errors[:20]:
            log.warning("skipping %s", message)
        if len(errors) > 20:
            log.warning("... and %d more bad records", len(errors) - 20)
    if not problems:
        raise DataError(f"{spec}: no usable problems" + (f" ({errors[0]})" if errors else ""))
    seen: set[str] = set()
    duplicates = [p.id for p in problems if p.id in seen or seen.add(p.id)]  # type: ignore[func-returns-value]
    if duplicates:
        raise DataError(f"{spec}: duplicate ids {duplicates[:5]}")
    if shuffle_seed >= 0:
        random.Random(shuffle_seed).shuffle(problems)
    if max_solution_chars > 0:
        problems = [p for p in problems if 0 < len(p.solution) <= max_solution_chars]
        if not problems:
            raise DataError(f"{spec}: no problem has a reference solution of at most {max_solution_chars} characters")
    return problems[:max_rows] if max_rows > 0 else problems


def crates_note(crates: Iterable[str]) -> str:
    """What the prompt tells the model about crates: which it may use, and that they are already
    linked (no Cargo.toml, no `extern crate` needed), so it neither avoids them nor invents others."""
    return (
        f"You may use these crates (already available, no Cargo.toml needed): {', '.join(sorted(crates))}. "
        "No other crate is available."
    )


def user_prompt(problem: Problem, fmt: AnswerFormat | None = None) -> str:
    """The user message. The crates the format offers (``data.offer_crates``) are offered on top of
    the crates the row itself declares; without either the prompt says nothing about crates."""
    from .answer_format import THINK

    fmt = fmt or THINK
    parts = [problem.prompt.strip()]
    if problem.signature.strip():
        parts.append(f"Implement this signature:\n```rust\n{problem.signature.strip()}\n```")
    if problem.crates or fmt.crates:
        parts.append(crates_note({*problem.crates, *fmt.crates}))
    parts.append(fmt.instruction)
    return "\n\n".join(parts)


def chat_prompt(problem: Problem, fmt: AnswerFormat | None = None) -> list[dict[str, str]]:
    from .answer_format import THINK

    fmt = fmt or THINK
    return [
        {"role": "system", "content": fmt.system_prompt},
        {"role": "user", "content": user_prompt(problem, fmt)},
    ]


def to_training_rows(problems: list[Problem], fmt: AnswerFormat | None = None) -> list[dict[str, Any]]:
    """Rows for TRL: ``prompt`` is a chat and ``id`` names the problem, by which the reward functions
    find it (``rewards.context.RewardContext.lookup``); no hidden test travels in a dataset column."""
    return [{"prompt": chat_prompt(p, fmt), "id": p.id} for p in problems]
