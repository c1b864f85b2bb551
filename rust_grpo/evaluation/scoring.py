"""Score model outputs against cargo test suites: per-record verdicts and rewards, plus a summary.

Used by ``rust-grpo score`` (existing completions) and ``rust-grpo eval`` (fresh samples). The
verdicts come from the same sandbox pass and reward functions that training uses.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reward_sandbox import GraderLike

from ..problems.schema import DataError, Problem, jsonl_records
from ..rewards.context import RewardContext
from ..rewards.functions import REWARD_NAMES, reward_values
from ..rewards.verdict import Evaluation
from .passk import curve_ks, pass_at_k, pass_at_k_curve

if TYPE_CHECKING:
    from ..config import RewardConfig


@dataclass(frozen=True)
class Completion:
    problem_id: str
    text: str
    sample: int = 0


def read_completions(path: Path) -> tuple[list[Completion], list[str]]:
    """Completions from JSONL; each record has ``completion`` (or ``code``) and ``problem_id`` (or ``id``),
    and optionally ``sample`` (a non-negative integer, unique per problem: a repeated pair would count
    one answer twice in pass@k). Bad lines are reported by line number, not fatal."""
    out, errors = [], []
    counters: dict[str, int] = defaultdict(int)
    seen: set[tuple[str, int]] = set()
    if not Path(path).is_file():
        raise DataError(f"completions file not found: {path}")
    for number, record in jsonl_records(Path(path)):
        where = f"{path}:{number}"
        if isinstance(record, DataError):
            errors.append(str(record))
            continue
        if not isinstance(record, dict):
            errors.append(f"{where}: expected an object")
            continue
        problem_id = record.get("problem_id", record.get("id"))
        text = record.get("completion")
        if text is None and isinstance(record.get("code"), str):
            text = f"```rust\n{record['code']}\n```"
        if problem_id is None or not isinstance(text, str):
            errors.append(f"{where}: needs 'problem_id' (or 'id') and 'completion' (or 'code')")
            continue
        sample = record.get("sample", counters[str(problem_id)])
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
            errors.append(f"{where}: 'sample' must be a non-negative integer, got {sample!r}")
            continue
        if (str(problem_id), sample) in seen:
            errors.append(f"{where}: sample {sample} of {problem_id!r} appears twice (kept the first)")
            continue
        seen.add((str(problem_id), sample))
        counters[str(problem_id)] = max(counters[str(problem_id)], sample + 1)
        out.append(Completion(str(problem_id), text, sample))
    return out, errors


class PartialScore(KeyboardInterrupt):
    """Ctrl-C while scoring: ``records`` are the completions graded before it (in input order), of
    ``total``; the caller writes them as a report that says it is partial."""

    def __init__(self, records: list[dict[str, Any]], total: int) -> None:
        super().__init__(f"interrupted after {len(records)} of {total} completions")
        self.records = records
        self.total = total


SCORE_CHUNK = 128  # completions graded at once: large enough to batch well, small enough that Ctrl-C keeps most


def score_completions(
    completions: list[Completion],
    problems: dict[str, Problem],
    grader: GraderLike,
    reward: RewardConfig | None = None,
) -> list[dict[str, Any]]:
    """One record per completion with its verdicts and every reward component, graded as a run's
    ``reward`` section says (None: the defaults and the grader's own limit). Without ``problems``
    each completion is graded as a bare program (no hidden tests). Graded in chunks of
    ``SCORE_CHUNK``, so that an interruption (:class:`PartialScore`) keeps what was graded."""
    unknown = sorted({c.problem_id for c in completions if problems and c.problem_id not in problems})
    if unknown and len(unknown) == len({c.problem_id for c in completions}):
        raise DataError(f"no completion matches a problem of the dataset (e.g. {unknown[0]!r})")
    records: list[dict[str, Any] | None] = [
        _unknown_record(c) if problems and c.problem_id not in problems else None for c in completions
    ]
    known = [i for i, r in enumerate(records) if r is None]
    rows = problems or {c.problem_id: Problem(id=c.problem_id, prompt="") for c in completions}
    context = RewardContext.from_config(reward, grader, rows.values())
    try:
        for start in range(0, len(known), SCORE_CHUNK):
            part = known[start : start + SCORE_CHUNK]
            texts = [completions[i].text for i in part]
            evaluations = context.evaluate(texts, context.lookup([completions[i].problem_id for i in part]))
            for i, evaluation in zip(part, evaluations, strict=True):
                records[i] = score_record(completions[i], evaluation)
    except KeyboardInterrupt as exc:
        raise PartialScore([r for r in records if r is not None], len(completions)) from exc
    return [r for r in records if r is not None]


def _unknown_record(c: Completion) -> dict[str, Any]:
    """A completion for a problem the dataset does not hold: not graded, counted apart."""
    return {
        "problem_id": c.problem_id, "sample": c.sample, "status": "unknown_problem", "format_ok": False,
        "parse_problems": [], "build_ok": False, "clippy_clean": False, "own_tests": {"passed": 0, "total": 0},
        "own_tests_pass": False, "meaningful_tests": 0, "hack_flags": [], "hidden_tests": {"passed": 0, "total": 0},
        "hidden_pass": False, "argless": False, "rewards": {}, "catching_tests": [], "duration_s": 0.0, "unknown_problem": True,
        "reason": f"problem {c.problem_id!r} is not in the dataset",
    }  # fmt: skip


def score_record(c: Completion, e: Evaluation) -> dict[str, Any]:
    """One line of ``results.jsonl``: a completion's verdicts and every reward training would pay."""
    r = e.result
    hidden = r.tests.hidden if r else None
    record: dict[str, Any] = {
        "problem_id": c.problem_id,
        "sample": c.sample,
        "status": r.status.value if r else "no_code",
        "format_ok": e.format_ok,
        "parse_problems": list(e.parsed.problems),
        "build_ok": e.builds,
        "clippy_clean": e.clippy_clean,
        "own_tests": {"passed": r.tests.own.passed, "total": r.tests.own.total} if r else {"passed": 0, "total": 0},
        "own_tests_pass": e.own_tests_pass,
        "meaningful_tests": e.audit.meaningful_tests if e.audit else 0,
        "hack_flags": list(e.audit.flags) if e.audit else [],
        "hidden_tests": {"passed": hidden.passed, "total": max(hidden.total, hidden.expected)}
        if hidden
        else {"passed": 0, "total": 0},
        "hidden_pass": e.hidden_pass,
        "argless": e.builds and e.argless,  # builds, but the asked function names none of its parameters
        "rewards": reward_values(e),
        "catching_tests": sorted(e.catching_tests),
        "reason": r.reason if r else "; ".join(e.parsed.problems),
        "duration_s": r.duration_s if r else 0.0,
        "unknown_problem": False,
    }
    return record


RATE_KEYS = {
    "format": "format_ok",
    "build": "build_ok",
    "clippy_clean": "clippy_clean",
    "own_tests": "own_tests_pass",
    "hidden_tests": "hidden_pass",
}


def summarize(
    records: list[dict[str, Any]], ks: tuple[int, ...] = (1, 5, 10), tiers: Mapping[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """Rates over all samples, and per-problem unbiased pass@k on the hidden tests (``hidden``: ``ks`` and
    the powers of two up to the samples per problem). Completions for problems the dataset does not
    hold are counted apart (``unknown_problems``), never as failures. With ``tiers`` (name -> problem
    ids), ``tiers`` holds each tier's problems, samples, build and hidden-test rates and pass@k curve,
    so the ceiling on the hard problems is not hidden by the easy ones."""
    unknown = [r for r in records if r.get("unknown_problem")]
    records = [r for r in records if not r.get("unknown_problem")]
    n = len(records)
    by_problem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_problem[r["problem_id"]].append(r)
    rates = {name: (sum(bool(r[key]) for r in records) / n if n else 0.0) for name, key in RATE_KEYS.items()}
    per_problem = {}
    samples = min((len(v) for v in by_problem.values()), default=0)
    pass_k: dict[str, float] = {}
    for k in sorted({k for k in ks if k <= samples} | set(curve_ks(samples))):
        values = [pass_at_k(len(v), sum(r["hidden_pass"] for r in v), k) for v in by_problem.values()]
        pass_k[f"pass@{k}"] = sum(values) / len(values) if values else 0.0
    for pid, rows in sorted(by_problem.items()):
        per_problem[pid] = {
            "samples": len(rows),
            "build": sum(r["build_ok"] for r in rows),
            "clippy_clean": sum(r["clippy_clean"] for r in rows),
            "own_tests": sum(r["own_tests_pass"] for r in rows),
            "hidden_pass": sum(r["hidden_pass"] for r in rows),
        }
    statuses: dict[str, int] = defaultdict(int)
    for r in records:
        statuses[r["status"]] += 1
    mean_rewards = {name: _mean([r["rewards"][name] for r in records]) for name in REWARD_NAMES}
    return {
        "samples": n,
        "problems": len(by_problem),
        "samples_per_problem": samples,
        "samples_per_problem_max": max((len(v) for v in by_problem.values()), default=0),
        "unknown_problems": len(unknown),
        "rates": rates,
        "hidden": pass_k,
        "statuses": dict(statuses),
        "mean_rewards": mean_rewards,
        "per_problem": per_problem,
        **({"tiers": tier_summaries(by_problem, tiers)} if tiers else {}),
    }


def tier_summaries(
    by_problem: Mapping[str, list[dict[str, Any]]], tiers: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, Any]]:
    """Per tier: ``{"problems", "samples", "build", "hidden_tests", "pass_at_k"}`` over its problems' records."""
    out: dict[str, dict[str, Any]] = {}
    for name, ids in tiers.items():
        rows = {pid: by_problem[pid] for pid in ids if pid in by_problem}
        flat = [r for v in rows.values() for r in v]
        n = len(flat)
        out[name] = {
            "problems": len(rows),
            "samples": n,
            "build": sum(bool(r["build_ok"]) for r in flat) / n if n else 0.0,
            "hidden_tests": sum(bool(r["hidden_pass"]) for r in flat) / n if n else 0.0,
            "pass_at_k": pass_at_k_curve((len(v), sum(bool(r["hidden_pass"]) for r in v)) for v in rows.values()),
        }
    return out


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
