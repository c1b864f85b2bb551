"""Stage-by-stage learning measurements: base model, after the SFT cold start, after GRPO.

Each stage is scored on the same held-out problems with the same sampling settings, so the
differences between stages are what training gave. Rates carry Wilson 95% intervals (exact enough
at n = 64, and never outside [0, 1]); the mean reward a normal-approximation 95% interval. Used by
``benchmarks/bench_learning.py``; small and pure so that it is tested on its own.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..problems.schema import Problem
from .passk import pass_at_k_curve

Z95 = 1.959963984540054
STAGES = ("base", "sft", "rft", "grpo")  # in training order; rft only when the run has that stage
REQUIRED_STAGES = ("base", "sft", "grpo")
RATES = {"format": "format_ok", "build": "build_ok", "hidden_pass": "hidden_pass"}
PLOTTED = (*RATES, "hidden_share")  # the rates, and the mean share of hidden tests passed
GAINS = ("build", "hidden_pass", "hidden_share")  # what a stage's gain over another is reported for


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial rate (0 <= successes <= n)."""
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_interval(values: Sequence[float], z: float = Z95) -> tuple[float, float]:
    """Mean +- z standard errors (sample standard deviation); a single value has no spread."""
    if not values:
        return (0.0, 0.0)
    mean = sum(values) / len(values)
    if len(values) < 2:
        return (mean, mean)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = z * sd / math.sqrt(len(values))
    return (mean - half, mean + half)


def weighted_reward(rewards: dict[str, float | None], weights: dict[str, float]) -> float | None:
    """The training objective for one completion (the weighted sum TRL pays); None when any
    weighted component is unknown (a sandbox fault)."""
    total = 0.0
    for name, weight in weights.items():
        if not weight:
            continue
        value = rewards.get(name)
        if value is None:
            if name in ("hidden_tests", "all_hidden") and rewards.get("build") is not None:
                continue  # rows without hidden tests: no hidden reward, not a fault
            return None
        total += weight * value
    return total


def hidden_share(record: dict[str, Any]) -> float:
    """The share of its hidden tests a completion passes (0 when it does not build as an answer):
    partial correctness, which moves long before every test passes."""
    tests = record.get("hidden_tests") or {}
    total = int(tests.get("total") or 0)
    return int(tests.get("passed") or 0) / total if total and record.get("build_ok") else 0.0


def _graded(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records that carry the program's verdict (not a sandbox fault, a known problem)."""
    return [r for r in records if r.get("status") != "sandbox_error" and not r.get("unknown_problem")]


def _metric(name: str) -> Callable[[dict[str, Any]], float]:
    if name == "hidden_share":
        return hidden_share
    if name not in RATES:
        raise ValueError(f"no per-sample metric {name!r}: expected one of {[*RATES, 'hidden_share']}")
    key = RATES[name]
    return lambda r: float(bool(r[key]))


def problem_bootstrap_gain(
    before: Sequence[dict[str, Any]],
    after: Sequence[dict[str, Any]],
    name: str,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """``after``'s mean of metric ``name`` minus ``before``'s, with a 95% interval that resamples
    *problems*, each with all its samples at both stages (a paired cluster bootstrap).

    Why: the per-stage Wilson intervals treat every sample as independent, but the samples of
    one problem move together (a model that knows ``s.len()`` answers all 16 right), so a gain
    carried by two or three problems looks firmer than it is. Resampling problems asks whether
    the gain would hold on another draw of held-out problems like these. Problems graded at
    only one stage are left out."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    value = _metric(name)
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])  # after sum, n, before sum, n
    for offset, records in ((0, after), (2, before)):
        for r in _graded(records):
            cell = sums[str(r.get("problem_id"))]
            cell[offset] += value(r)
            cell[offset + 1] += 1
    cells = [c for _, c in sorted(sums.items()) if c[1] and c[3]]
    if not cells:
        return {"gain": 0.0, "ci": [0.0, 0.0], "problems": 0}

    def gain(drawn: Sequence[list[float]]) -> float:
        after_sum, after_n, before_sum, before_n = (sum(c[i] for c in drawn) for i in range(4))
        return after_sum / after_n - before_sum / before_n

    rng = random.Random(seed)
    draws = sorted(gain(rng.choices(cells, k=len(cells))) for _ in range(resamples))
    lo, hi = draws[int(0.025 * resamples)], draws[min(resamples - 1, int(0.975 * resamples))]
    return {"gain": round(gain(cells), 4), "ci": [round(lo, 4), round(hi, 4)], "problems": len(cells)}


def stage_gains(
    before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], tiers: Mapping[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """:func:`problem_bootstrap_gain` of every metric in ``GAINS``, for all problems and, under
    ``"tiers"``, for each tier's problems apart."""
    out: dict[str, Any] = {name: problem_bootstrap_gain(before, after, name) for name in GAINS}
    if tiers:
        out["tiers"] = {}
        for tier, ids in tiers.items():
            members = set(ids)
            b = [r for r in before if r.get("problem_id") in members]
            a = [r for r in after if r.get("problem_id") in members]
            out["tiers"][tier] = {name: problem_bootstrap_gain(b, a, name) for name in GAINS}
    return out


def stage_metrics(records: Sequence[dict[str, Any]], weights: dict[str, float]) -> dict[str, Any]:
    """``{"n", "format", "build", "hidden_pass", "hidden_share", "argless_builds", "mean_reward"}`` plus
    ``<name>_ci`` 95% intervals, from ``score_completions`` records (completions the sandbox could not
    grade are left out), and ``pass_at_k``: all hidden tests passing within k samples, per problem,
    averaged (:func:`~rust_grpo.evaluation.passk.pass_at_k_curve`). ``argless_builds`` is the share of
    *builds* whose asked function ignores its arguments (each record's ``argless``, from the same
    Evaluation training pays): stubs that compile, which should fall."""
    graded = _graded(records)
    n = len(graded)
    out: dict[str, Any] = {"n": n}
    for name, key in RATES.items():
        k = sum(bool(r[key]) for r in graded)
        out[name] = round(k / n, 4) if n else 0.0
        out[f"{name}_ci"] = [round(x, 4) for x in wilson_interval(k, n)]
    shares = [hidden_share(r) for r in graded]
    out["hidden_share"] = round(sum(shares) / n, 4) if n else 0.0
    out["hidden_share_ci"] = [round(max(0.0, x), 4) for x in mean_interval(shares)]
    builds = [r for r in graded if r.get("build_ok")]
    argless = sum(bool(r.get("argless")) for r in builds)
    out["argless_builds"] = round(argless / len(builds), 4) if builds else 0.0
    out["argless_builds_ci"] = [round(x, 4) for x in wilson_interval(argless, len(builds))]
    rewards = [v for r in graded if (v := weighted_reward(r.get("rewards", {}), weights)) is not None]
    out["mean_reward"] = round(sum(rewards) / len(rewards), 4) if rewards else 0.0
    out["mean_reward_ci"] = [round(x, 4) for x in mean_interval(rewards)]
    counts = per_problem_counts(graded)
    out["pass_at_k"] = pass_at_k_curve((c["n"], c["hidden_pass"]) for c in counts.values())
    return out


def per_problem_counts(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """``{problem_id: {"n", "build", "hidden_pass", "argless"}}``: counts of graded samples, so the
    problems a gain comes from (or a loss: a problem right at SFT and wrong after GRPO) can be read
    from a saved report without its completions files."""
    out: dict[str, dict[str, int]] = {}
    for r in _graded(records):
        row = out.setdefault(str(r.get("problem_id")), {"n": 0, "build": 0, "hidden_pass": 0, "argless": 0})
        row["n"] += 1
        row["build"] += bool(r.get("build_ok"))
        row["hidden_pass"] += bool(r.get("hidden_pass"))
        row["argless"] += bool(r.get("build_ok") and r.get("argless"))
    return dict(sorted(out.items()))


def tier_metrics(
    records: Sequence[dict[str, Any]], tiers: Mapping[str, Sequence[str]], weights: dict[str, float]
) -> dict[str, dict[str, Any]]:
    """:func:`stage_metrics` of each tier's records (``tiers``: name -> its problem ids), so a gain on
    easy problems is never read as a gain on the hard ones."""
    members = {name: set(ids) for name, ids in tiers.items()}  # one set per tier, not one per record
    return {
        name: stage_metrics([r for r in records if r.get("problem_id") in ids], weights)
        for name, ids in members.items()
    }


def learning_report(model: str, grpo_steps: int, stages: dict[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The benchmark's JSON: ``{"model", "grpo_steps", "stages": {"base", "sft", ["rft",] "grpo"}}`` (+ extra keys)."""
    missing = [s for s in REQUIRED_STAGES if s not in stages]
    unknown = [s for s in stages if s not in STAGES]
    if missing or unknown:
        raise ValueError(f"stages missing: {missing}, unknown: {unknown}")
    return {"model": model, "grpo_steps": grpo_steps, "stages": {s: stages[s] for s in STAGES if s in stages}, **extra}


def easiest(problems: Sequence[Problem], k: int) -> list[Problem]:
    """The ``k`` problems with the shortest reference solutions (ties by id): a deterministic
    choice of problems a 135M model can sometimes solve."""
    return sorted(problems, key=lambda p: (len(p.solution), p.id))[:k]


def _stage_bars(ax: Any, stages: dict[str, dict[str, Any]], names: Sequence[str], title: str) -> None:
    """Grouped bars, one group per metric and one bar per stage, with their 95% intervals."""
    width = 0.8 / len(stages)
    for i, (stage, m) in enumerate(stages.items()):
        xs = [j + (i - (len(stages) - 1) / 2) * width for j in range(len(names))]
        ys = [m[name] for name in names]
        errs = [
            [max(0.0, y - m[f"{name}_ci"][0]) for name, y in zip(names, ys)],
            [max(0.0, m[f"{name}_ci"][1] - y) for name, y in zip(names, ys)],
        ]
        ax.bar(xs, ys, width, yerr=errs, capsize=3, label=f"{stage} (n={m['n']})")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend()


def plot_learning(report: dict[str, Any], steps: Sequence[dict[str, Any]], out: Path) -> Path:
    """Left: the three stages' rates and hidden-test share with 95% intervals (then one panel per
    tier when the report has tiers: build, all hidden tests passing, share passed; and one of each
    tier's pass@k curves, a line per stage). Right: GRPO's
    per-step mean reward with a band of +-1 standard deviation of that step's rewards, and the
    step's build rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report import plot_pass_at_k

    stages = report["stages"]
    tiers = list(stages["base"].get("tiers", {}))
    curves = [t for t in tiers if all(m["tiers"][t].get("pass_at_k") for m in stages.values())]
    panels = 2 + len(tiers) + len(curves)
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.5))
    left, right = axes[0], axes[-1]
    names = [name for name in PLOTTED if name in stages["base"]]  # reports from before hidden_share lack it
    _stage_bars(left, stages, names, f"{report['model']}: held-out, 95% intervals")
    left.set_ylabel("rate on held-out problems")
    for ax, tier in zip(axes[1:-1], tiers):
        by_stage = {s: m["tiers"][tier] for s, m in stages.items()}
        _stage_bars(ax, by_stage, ["build", "hidden_pass", "hidden_share"], f"tier {tier}")
    ceiling = report.get("ceiling") or {}
    for ax, tier in zip(axes[1 + len(tiers) : -1], curves):
        by_stage = {s: m["tiers"][tier]["pass_at_k"] for s, m in stages.items()}
        if ceiling.get("tier") == tier:  # the trained stages sampled again, more times a problem
            by_stage.update({f"{s}, {ceiling['samples']} samples": c for s, c in ceiling["pass_at_k"].items()})
        plot_pass_at_k(ax, by_stage, f"tier {tier}: pass@k")
    xs = [int(r.get("step", i + 1)) for i, r in enumerate(steps)]
    mean = [float(r.get("reward", 0.0)) for r in steps]
    sd = [float(r.get("reward_std", 0.0)) for r in steps]
    right.plot(xs, mean, color="C2", label="mean reward")
    right.fill_between(
        xs, [m - s for m, s in zip(mean, sd)], [m + s for m, s in zip(mean, sd)], color="C2", alpha=0.2, label="+-1 sd"
    )
    build = [r.get("rates/build") for r in steps]
    if all(b is not None for b in build) and build:
        right.plot(xs, build, color="C1", linestyle="--", label="build rate (training batch)")
    right.set_xlabel("GRPO step")
    right.set_title("GRPO training reward per step")
    right.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
