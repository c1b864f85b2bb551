"""What a run's ``[data]`` section selects: its training problems, and the answer format it asks for.

Kept out of ``config.py`` (dataclasses, TOML and validation only): loading problems and building
prompts is this package's work, done when a run starts, from a config validated at load time.
"""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING, Any

from .answer_format import AnswerFormat, answer_format
from .schema import DataError, Problem, load_problems, row_crates

if TYPE_CHECKING:
    from ..config import DataConfig


def offered_crates(data: DataConfig) -> tuple[str, ...]:
    """``data.offer_crates`` as the set's names (``"all"``: every crate of the set)."""
    from reward_sandbox.compile.crateset import CURATED

    if data.offer_crates == "all":
        return tuple(CURATED)
    return row_crates(data.offer_crates, "data.offer_crates")


def training_problems(data: DataConfig) -> list[Problem]:
    """The training problems ``data`` selects (files, split, length cap, shuffle, row cap), validated
    once here: everything downstream finds them by id."""
    if isinstance(data.train, str):
        return load_problems(
            data.train, data.split, data.max_rows, data.shuffle_seed, max_solution_chars=data.max_solution_chars
        )
    problems = [
        p
        for spec in data.train_files()
        for p in load_problems(spec, data.split, max_solution_chars=data.max_solution_chars)
    ]
    seen: set[str] = set()
    if clash := sorted({p.id for p in problems if p.id in seen or seen.add(p.id)}):  # type: ignore[func-returns-value]
        raise DataError(f"data.train: ids in more than one of {data.train}: {clash[:5]}")
    if data.shuffle_seed >= 0:
        random.Random(data.shuffle_seed).shuffle(problems)
    return problems[: data.max_rows] if data.max_rows > 0 else problems


def run_format(data: DataConfig) -> AnswerFormat:
    """The answer format, with the run's system prompt when one is set and the crates it offers."""
    changes: dict[str, Any] = {"system_prompt": data.system_prompt} if data.system_prompt else {}
    if crates := offered_crates(data):
        changes["crates"] = crates
    fmt = answer_format(data.answer_format)
    return dataclasses.replace(fmt, **changes) if changes else fmt  # the shipped format itself when unchanged


def with_tiers(
    first: str, problems: list[Problem], specs: list[str], max_rows: int = 0
) -> tuple[list[Problem], dict[str, list[str]]]:
    """``problems`` as tier ``first``, plus every problem of each ``NAME=FILE`` spec as tier NAME: all of
    them, and each tier's ids, so rates and pass@k are reported per tier (a gain or a ceiling on the
    hard problems is never averaged away by the easy ones). A problem may sit in one tier only."""
    tiers = {first: [p.id for p in problems]}
    out = list(problems)
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path or name in tiers:
            raise DataError(f"tier {spec!r}: expected NAME=FILE with a new NAME (have: {', '.join(tiers)})")
        rows = load_problems(path, max_rows=max_rows)
        taken = {p.id for p in out}
        if twice := sorted(p.id for p in rows if p.id in taken):
            raise DataError(f"tier {spec!r}: problems already in another tier: {twice[:5]}")
        tiers[name] = [p.id for p in rows]
        out += rows
    return out, tiers
