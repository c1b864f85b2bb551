"""Reward functions for TRL's GRPOTrainer, all fed by one sandbox pass per completion.

TRL calls each reward function in turn with the same batch. The first call grades the whole
batch in one parallel sandbox pass (program + its own tests + the row's hidden tests in one
test binary); the others read the shared memo. A reward is ``None`` ("unknown", dropped by
TRL) when the sandbox itself failed, so an infrastructure fault never reads as a bad program.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from reward_sandbox import Result, Status

from .audit import CodeAudit, audit_code
from .data import Problem, problem_from_columns
from .parsing import ParsedCompletion, completion_text, parse_completion

log = logging.getLogger("rust_grpo")

REWARD_NAMES = ("format", "code_block", "tests_present", "build", "clippy", "own_tests", "hidden_tests")


class GraderLike(Protocol):
    """A local :class:`reward_sandbox.Grader` or the HTTP client share this shape."""

    def grade(self, items: Sequence[Any]) -> list[Result]: ...


@dataclass(frozen=True)
class Evaluation:
    """Everything the reward functions need to know about one completion."""

    parsed: ParsedCompletion
    audit: CodeAudit | None
    result: Result | None  # None when there was no code to grade
    has_hidden: bool


class RewardContext:
    """Grades each batch once and remembers it, keyed by the batch's completions and tests."""

    def __init__(self, grader: GraderLike, min_tests: int = 2, samples_path: Path | None = None,
                 samples_every: int = 1, samples_per_step: int = 4, timeout_s: float | None = None) -> None:  # fmt: skip
        self.grader = grader
        self.min_tests = min_tests
        self.timeout_s = timeout_s
        self.samples_path = samples_path
        self.samples_every = samples_every
        self.samples_per_step = samples_per_step
        self._memo: OrderedDict[tuple, list[Evaluation]] = OrderedDict()
        self._lock = threading.Lock()
        self.sandbox_seconds = 0.0  # total wall time spent grading (for the step-time share)

    def evaluate(self, completions: Sequence[Any], columns: dict[str, Any]) -> list[Evaluation]:
        texts = [completion_text(c) for c in completions]
        rows = [problem_from_columns(columns, i) for i in range(len(texts))]
        key = (tuple(texts), tuple(rows))
        with self._lock:
            if key in self._memo:
                return self._memo[key]
            evaluations = self._grade(texts, rows, columns)
            self._memo[key] = evaluations
            while len(self._memo) > 8:
                self._memo.popitem(last=False)
        return evaluations

    def _grade(self, texts: list[str], rows: list[Problem], columns: dict[str, Any]) -> list[Evaluation]:
        parsed = [parse_completion(t) for t in texts]
        jobs, owners = [], []
        for i, p in enumerate(parsed):
            if p.code is None:
                continue
            job = rows[i].job(p.code, str(i))
            if self.timeout_s:
                job["timeout_s"] = self.timeout_s
            jobs.append(job)
            owners.append(i)
        start = time.monotonic()
        results: list[Result | None] = [None] * len(texts)
        if jobs:
            try:
                graded = self.grader.grade(jobs)
            except Exception as exc:  # noqa: BLE001 - a dead reward server must not crash the run
                log.error("reward grading failed for a batch of %d programs (%s); their cargo rewards are None", len(jobs), exc)
                graded = [Result(id=j["id"], status=Status.SANDBOX_ERROR, reason=str(exc)) for j in jobs]
            for i, r in zip(owners, graded):
                results[i] = r
        self.sandbox_seconds += time.monotonic() - start
        evaluations = [
            Evaluation(parsed=p, audit=audit_code(p.code) if p.code else None, result=results[i], has_hidden=bool(rows[i].tests.strip()))
            for i, p in enumerate(parsed)
        ]
        self._write_samples(texts, evaluations, columns)
        return evaluations

    def _write_samples(self, texts: list[str], evaluations: list[Evaluation], columns: dict[str, Any]) -> None:
        state = columns.get("trainer_state")
        step = getattr(state, "global_step", 0) if state is not None else 0
        if self.samples_path is None or not self.samples_every or step % self.samples_every:
            return
        ids = _column(columns, "id", len(texts), "")
        self.samples_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.samples_path, "a", encoding="utf-8") as fh:
            for i in range(min(self.samples_per_step, len(texts))):
                e = evaluations[i]
                record = {"step": step, "id": ids[i], "completion": texts[i], "status": e.result.status.value if e.result else "no_code",
                          "rewards": {name: REWARDS[name](e, self.min_tests) for name in REWARD_NAMES}}  # fmt: skip
                fh.write(json.dumps(record) + "\n")


def _column(columns: dict[str, Any], name: str, n: int, default: Any) -> list[Any]:
    values = columns.get(name)
    if values is None:
        return [default] * n
    return [default if v is None else v for v in values]


# --- The components: each maps one Evaluation to a reward in [0, 1], or None (unknown) -------


def _sandbox_failed(e: Evaluation) -> bool:
    return e.result is not None and not e.result.status.is_program_verdict


def format_reward(e: Evaluation, _min_tests: int) -> float:
    """1 for <think>...</think> then exactly one ```rust block; 0.5 for the block without reasoning."""
    if e.parsed.format_ok:
        return 1.0
    return 0.5 if e.parsed.rust_blocks == 1 and e.parsed.other_blocks == 0 else 0.0


def code_block_reward(e: Evaluation, _min_tests: int) -> float:
    return 1.0 if e.parsed.rust_blocks == 1 else 0.0


def tests_present_reward(e: Evaluation, min_tests: int) -> float:
    """Meaningful own tests (real asserts on the program's own items), up to ``min_tests``."""
    if e.audit is None:
        return 0.0
    return min(e.audit.meaningful_tests, min_tests) / min_tests


def build_reward(e: Evaluation, _min_tests: int) -> float | None:
    if e.result is None:
        return 0.0
    if _sandbox_failed(e):
        return None
    return 1.0 if e.result.build.ok else 0.0


def clippy_reward(e: Evaluation, _min_tests: int) -> float | None:
    if e.result is None:
        return 0.0
    if _sandbox_failed(e):
        return None
    if not e.result.build.ok:
        return 0.0
    return 1.0 if e.result.clippy.ok else max(0.0, 0.5 - 0.1 * (e.result.clippy.warnings - 1))


def own_tests_reward(e: Evaluation, min_tests: int) -> float | None:
    """Share of meaningful own tests that really passed (trusted harness run, no hacks)."""
    if e.result is None or e.audit is None:
        return 0.0
    if _sandbox_failed(e):
        return None
    if e.audit.hacked or not e.result.tests.trusted:
        return 0.0
    passed = len(e.audit.meaningful_names() & set(e.result.tests.passes))
    return passed / max(len(e.audit.tests), min_tests)


def hidden_tests_reward(e: Evaluation, _min_tests: int) -> float | None:
    """Share of the row's reference tests passed; None for rows without hidden tests."""
    if not e.has_hidden:
        return None
    if e.result is None:
        return 0.0
    if _sandbox_failed(e):
        return None
    if (e.audit is not None and e.audit.hacked) or not e.result.tests.trusted:
        return 0.0
    hidden = e.result.tests.hidden
    return hidden.passed / hidden.total if hidden.total else 0.0


REWARDS: dict[str, Callable[[Evaluation, int], float | None]] = {
    "format": format_reward,
    "code_block": code_block_reward,
    "tests_present": tests_present_reward,
    "build": build_reward,
    "clippy": clippy_reward,
    "own_tests": own_tests_reward,
    "hidden_tests": hidden_tests_reward,
}


class RewardFunction:
    """A TRL reward function for one component; picklable, with a readable ``__name__``."""

    def __init__(self, name: str, context: RewardContext, log_rates: bool = False) -> None:
        if name not in REWARDS:
            raise ValueError(f"unknown reward {name!r}; known: {', '.join(REWARD_NAMES)}")
        self.__name__ = name
        self.context = context
        self.log_rates = log_rates

    def __call__(self, prompts: list[Any], completions: list[Any], completion_ids: list[Any] | None = None, **columns: Any) -> list[float | None]:
        evaluations = self.context.evaluate(completions, columns)
        if self.log_rates and callable(columns.get("log_metric")):
            for name, value in batch_metrics(evaluations).items():
                columns["log_metric"](name, value)
        return [REWARDS[self.__name__](e, self.context.min_tests) for e in evaluations]


def batch_metrics(evaluations: Sequence[Evaluation]) -> dict[str, float]:
    """Pass rates and sandbox health of one batch (logged once per step)."""
    n = max(len(evaluations), 1)
    graded = [e.result for e in evaluations if e.result is not None]
    return {
        "rates/format": sum(e.parsed.format_ok for e in evaluations) / n,
        "rates/build": sum(r.build.ok for r in graded) / n,
        "rates/clippy_clean": sum(r.build.ok and r.clippy.ok for r in graded) / n,
        "rates/own_tests_pass": sum(r.tests.ok and r.tests.own.total > 0 and r.tests.own.failed == 0 for r in graded) / n,
        "rates/hidden_tests_pass": sum(r.tests.trusted and r.tests.hidden.total > 0 and r.tests.hidden.failed == 0 for r in graded) / n,
        "sandbox/seconds": sum(r.duration_s for r in graded),
        "sandbox/timeouts": float(sum(r.status is Status.TIMEOUT for r in graded)),
        "sandbox/errors": float(sum(r.status is Status.SANDBOX_ERROR for r in graded)),
        "hacks/flagged": float(sum(e.audit is not None and e.audit.hacked for e in evaluations)),
        "hacks/trivial_tests": float(sum(len(e.audit.tests) - e.audit.meaningful_tests for e in evaluations if e.audit)),
    }


def build_reward_functions(context: RewardContext, weights: dict[str, float]) -> tuple[list[RewardFunction], list[float]]:
    """All components in a fixed order with their weights (weight 0 = logged diagnostic)."""
    funcs = [RewardFunction(name, context, log_rates=(i == 0)) for i, name in enumerate(REWARD_NAMES)]
    return funcs, [float(weights.get(name, 0.0)) for name in REWARD_NAMES]
