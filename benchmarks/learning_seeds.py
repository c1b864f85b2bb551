"""Several learning runs (``bench_learning.py --seed N``, one ``learning.json`` each) as one claim: per stage
and tier, the mean over seeds of each figure with a 95% t-interval across seeds, and GRPO's gain over
SFT the same way. One seed on one host is one draw (the first token that differs sends GRPO down
another path), so a gain is claimed from the spread between seeds, not from one run's own interval.

    python benchmarks/learning_seeds.py runs/vllm-s0/learning.json runs/vllm-s1/learning.json ... \\
        --out benchmarks/results/learning-seeds.json

Prints a Markdown table; ``--out`` writes the JSON (every seed's figures, wall time and provenance
too). Refuses runs that differ in anything but their seed: a mean over different recipes is no claim.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

FIGURES = ("build", "hidden_pass", "hidden_share")
# two-sided 95% Student t quantiles by degrees of freedom (seeds - 1)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def mean_interval(values: list[float], rate: bool = False) -> dict[str, Any]:
    """``{"mean", "ci", "values"}``: the mean and a 95% t-interval over seeds (none from one seed); a
    ``rate``'s interval is clipped to [0, 1]."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": round(mean, 4), "ci": None, "values": values}
    half = T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))
    low, high = (max(0.0, mean - half), min(1.0, mean + half)) if rate else (mean - half, mean + half)
    return {"mean": round(mean, 4), "ci": [round(low, 4), round(high, 4)], "values": values}


def _recipe(report: dict[str, Any]) -> str:
    """What must agree between seeds: the config, overrides (but the seed) and sampling (but its seed)."""
    prov = report.get("provenance", {})
    overrides = [o for o in prov.get("overrides", []) if not o.startswith(("train.seed=", "train.output_dir="))]
    sampling = {k: v for k, v in report.get("sampling", {}).items() if k != "seed"}
    recipe = [prov.get("config"), overrides, sampling, report.get("grpo_steps"), report.get("heldout")]
    return json.dumps(recipe, sort_keys=True)  # the order a run wrote its keys in is no difference


def summarize(reports: list[dict[str, Any]]) -> dict[str, Any]:
    recipes = {_recipe(r) for r in reports}
    if len(recipes) != 1:
        raise SystemExit("these runs differ in more than their seed (config, overrides, sampling or held-out set)")
    seeds = [r["sampling"]["seed"] for r in reports]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"a seed appears twice: {seeds}")
    stages = list(reports[0]["stages"])
    tiers = ["all", *reports[0]["stages"][stages[0]].get("tiers", {})]
    out: dict[str, Any] = {"seeds": seeds, "stages": {}, "gain_over_sft": {}}
    for stage in stages:
        out["stages"][stage] = {}
        for tier in tiers:
            rows = [r["stages"][stage] if tier == "all" else r["stages"][stage]["tiers"][tier] for r in reports]
            out["stages"][stage][tier] = {f: mean_interval([float(m[f]) for m in rows], rate=True) for f in FIGURES}
    for tier in tiers:
        gains = [r["grpo_gain_over_sft"] if tier == "all" else r["grpo_gain_over_sft"]["tiers"][tier] for r in reports]
        out["gain_over_sft"][tier] = {f: mean_interval([float(g[f]["gain"]) for g in gains]) for f in FIGURES}
    ceilings = [r["ceiling"] for r in reports if r.get("ceiling")]
    if ceilings:  # the core tier's pass@k at many samples a problem, in the runs that measured it
        out["ceiling"] = {"tier": ceilings[0]["tier"], "samples": ceilings[0]["samples"], "seeds": len(ceilings)}
        for stage in ceilings[0]["pass_at_k"]:
            curves = [c["pass_at_k"][stage] for c in ceilings]
            out["ceiling"][stage] = {k: mean_interval([float(c[k]) for c in curves], rate=True) for k in curves[0]}
            out["ceiling"][f"{stage}_ever_passing"] = sorted(
                {p for c in ceilings for p in c["problems_ever_passing"][stage]}
            )
    out["wall_s"] = mean_interval([float(r["wall_s"]) for r in reports])
    if all("recipe_s" in r for r in reports):  # training and scoring without the ceiling (recorded since 2026-12-07)
        out["recipe_s"] = mean_interval([float(r["recipe_s"]) for r in reports])
    out["runs"] = [
        {
            "seed": r["sampling"]["seed"],
            "wall_s": r["wall_s"],
            **({"recipe_s": r["recipe_s"]} if "recipe_s" in r else {}),
            "provenance": r.get("provenance", {}),
        }
        for r in reports
    ]
    return out


def _cell(x: dict[str, Any], scale: float = 100.0, sign: bool = False) -> str:
    fmt = "{:+.1f}" if sign else "{:.1f}"
    text = fmt.format(scale * x["mean"])
    return text if x["ci"] is None else text + " [" + ", ".join(fmt.format(scale * v) for v in x["ci"]) + "]"


def markdown(summary: dict[str, Any]) -> str:
    seeds = ", ".join(str(s) for s in summary["seeds"])
    lines = [
        f"Mean over seeds {seeds}, 95% t-interval across seeds (percent):",
        "",
        "| stage | tier | build | all hidden tests pass | hidden share |",
        "|---|---|---|---|---|",
    ]
    for stage, tiers in summary["stages"].items():
        for tier, m in tiers.items():
            lines.append(f"| {stage} | {tier} | " + " | ".join(_cell(m[f]) for f in FIGURES) + " |")
    lines += ["", "| GRPO over SFT | build | all hidden tests pass | hidden share |", "|---|---|---|---|"]
    for tier, g in summary["gain_over_sft"].items():
        lines.append(f"| {tier} | " + " | ".join(_cell(g[f], sign=True) for f in FIGURES) + " |")
    if ceiling := summary.get("ceiling"):
        lines += [
            "",
            f"{ceiling['tier']} tier, pass@k at {ceiling['samples']} samples a problem ({ceiling['seeds']} seeds):",
        ]
        for stage, curve in ceiling.items():
            if isinstance(curve, dict):
                ever = ", ".join(ceiling[f"{stage}_ever_passing"]) or "none"
                lines.append(
                    f"- {stage}: "
                    + ", ".join(f"@{k} {_cell(v)}" for k, v in curve.items())
                    + f" (ever passing: {ever})"
                )
    lines += ["", f"wall time: {_cell(summary['wall_s'], scale=1.0)} s"]
    if "recipe_s" in summary:
        lines += [f"without the ceiling: {_cell(summary['recipe_s'], scale=1.0)} s"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", type=Path, help="learning.json files of one recipe, one per seed")
    parser.add_argument("--out", type=Path, default=None, help="also write the summary as JSON here")
    args = parser.parse_args()
    summary = summarize([json.loads(p.read_text()) for p in args.reports])
    summary = {
        "what": f"learning benchmark, mean over seeds {summary['seeds']} with 95% t-intervals across seeds",
        "results": [str(p) for p in args.reports],
        **summary,
    }
    print(markdown(summary))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
