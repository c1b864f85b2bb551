"""Does a real pretrained model get better at Rust? SmolLM2-135M-Instruct (GGUF from PyPI) is scored
on held-out problems after each stage, with the same sampling settings and seed: as it comes (base),
after a brief supervised cold start on reference answers (sft), after rejection-sampling
fine-tuning on its own verified answers when the config has an RFT stage (rft), and after GRPO
with sandboxed rewards on top of that (grpo). The held-out problems are the easiest of data/eval.jsonl (the core
tier) and the basics tier's held-out third (data/basics-eval.jsonl, one-liners), which no stage
trains on; every figure is given for both together and for each tier apart.

Writes runs/bench/learning.json ({"model", "grpo_steps", "stages": {"base", "sft", ["rft",] "grpo"}}, each
stage {"n", "format", "build", "hidden_pass", "hidden_share", "argless_builds", "mean_reward"} with 95%
intervals in "<name>_ci", and the same per tier under "tiers"; argless_builds is the share of builds
that use none of their arguments; "grpo_steps" counts optimiser steps and "generation_batches" the
batches sampled and graded for them (fewer with train.num_iterations > 1), and every "per_step_*"
list has one entry per generation batch; "grpo_gain_over_sft": GRPO's gain in build, hidden_pass and
hidden_share with 95% intervals that resample held-out problems, overall and per tier; "per_problem":
each stage's counts per held-out problem, {"n", "build", "hidden_pass", "argless"}),
runs/bench/learning.png, and every stage's graded completions. Exit code 1 when GRPO does not
raise held-out build by the target over SFT (the JSON is written either way).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import provenance

from rust_grpo.config import load_config
from rust_grpo.evaluation.learning import (
    GAINS,
    easiest,
    learning_report,
    per_problem_counts,
    plot_learning,
    stage_gains,
    stage_metrics,
    tier_metrics,
)
from rust_grpo.evaluation.sampling import BACKENDS, DTYPES, SamplingSettings
from rust_grpo.problems.schema import DataError, Problem, load_problems
from rust_grpo.problems.selection import run_format, training_problems, with_tiers
from rust_grpo.rewards.sandbox import sandbox_settings
from rust_grpo.training.callbacks import read_metrics


def peak_rss_gib() -> float:
    """The process's resident-memory high-water mark so far (Linux reports KiB): what a machine needs."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 1)


def sampling_settings(args: argparse.Namespace, samples: int) -> SamplingSettings:
    """How every stage is sampled: one place, so the report records exactly what the stages used."""
    return SamplingSettings(
        samples=samples,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=0.95,
        batch_problems=args.batch_problems,
        seed=args.seed,
        dtype=args.dtype,
    )


def score_stage(
    name: str,
    model: str,
    adapter: str | None,
    problems: list[Problem],
    tiers: dict[str, list[str]],
    args: argparse.Namespace,
    cfg: object,
    samples: int = 0,
) -> tuple[dict[str, object], list[dict[str, object]]]:
    """The stage's metrics and its graded records (kept for the paired gains); ``samples`` per problem
    (0: the stage's usual count)."""
    from reward_sandbox import open_grader
    from rust_grpo.evaluation.sampling import generate
    from rust_grpo.evaluation.scoring import score_completions

    start = time.monotonic()
    settings = sampling_settings(args, samples or (args.base_samples if name == "base" else args.samples))
    completions = generate(args.backend, model, problems, settings, fmt=run_format(cfg.data), adapter=adapter)  # type: ignore[attr-defined]
    with open_grader(sandbox_settings(cfg.reward)) as grader:  # type: ignore[attr-defined]
        records = score_completions(completions, {p.id: p for p in problems}, grader, cfg.reward)  # type: ignore[attr-defined]
    with open(args.out / f"{name}-completions.jsonl", "w", encoding="utf-8") as fh:
        for c, r in zip(completions, records):
            fh.write(json.dumps({**r, "completion": c.text}) + "\n")
    metrics = stage_metrics(records, cfg.reward.weights)  # type: ignore[attr-defined]
    metrics["tiers"] = tier_metrics(records, tiers, cfg.reward.weights)  # type: ignore[attr-defined]
    print(f"[{name}] {json.dumps(metrics)} ({time.monotonic() - start:.0f} s, peak {peak_rss_gib()} GiB)", flush=True)
    return metrics, records


def arguments() -> argparse.ArgumentParser:
    """The benchmark's options (benchmarks/score_backends.py reads its sampling settings from them too)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/smollm-cpu.toml")
    parser.add_argument("--heldout", type=int, default=16, help="held-out problems (the easiest of the eval set)")
    parser.add_argument("--heldout-data", default="data/eval.jsonl")
    parser.add_argument(
        "--tier",
        action="append",
        default=None,
        help="NAME=FILE: every problem of FILE held out too, reported as its own tier (default basics=data/basics-eval.jsonl;"
        " --tier none for the core tier alone)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=16,
        help="samples per held-out problem and stage (16: 512 a stage, narrow enough to tell a 5-point gain)",
    )
    parser.add_argument(
        "--base-samples", type=int, default=4, help="the same for the base model (it never answers; 4: 128 a stage)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument(
        "--batch-problems", type=int, default=2, help="problems per generate call (x samples sequences)"
    )
    parser.add_argument("--grpo-steps", type=int, default=0, help="0 = the config's train.max_steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=2, help="torch threads (on 2 cores busy with other jobs, 1 is faster)"
    )
    parser.add_argument("--target", type=float, default=0.10, help="build gain of GRPO over SFT to call it a pass")
    parser.add_argument("--set", action="append", default=[], help="config override, e.g. train.learning_rate=1e-4")
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="sampling engine for scoring and GRPO groups (vllm: colocated in training; auto: vllm when installed, "
        "else transformers, said in one line). The README's figures are vllm's, three seeds (2026-12-07); the "
        "transformers runs before them are in docs/experiments.md",
    )
    parser.add_argument(
        "--ceiling",
        type=int,
        default=-1,
        help="after training, sample the core tier this many times a problem at every trained stage for its "
        "pass@k curve: the ceiling GRPO can reach (-1: 64 with vllm, 0 = off, with hf)",
    )
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default="auto",
        help="scoring precision (auto: vLLM in bfloat16 where the CPU has it, transformers in the checkpoint's "
        "float32); GRPO's groups follow the config's vllm.cpu_dtype",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench"))
    return parser


def heldout_set(args: argparse.Namespace) -> tuple[list[Problem], list[Problem], dict[str, list[str]]]:
    """(the core tier, every held-out problem, tier name -> its problem ids), as ``args`` selects them."""
    core = easiest(load_problems(args.heldout_data), args.heldout)
    specs = [s for s in args.tier or ["basics=data/basics-eval.jsonl"] if s != "none"]
    try:
        heldout, tiers = with_tiers("core", core, specs)
    except DataError as exc:
        raise SystemExit(f"--tier: {exc}") from None
    return core, heldout, tiers


def main() -> int:
    args = arguments().parse_args()

    import logging

    import torch

    logging.basicConfig(format="%(message)s")
    logging.getLogger("rust_grpo").setLevel(logging.INFO)  # the cold start's and RFT's counts
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    run_dir = args.out / "learning"
    from rust_grpo.evaluation.sampling import resolve_backend

    args.backend = resolve_backend(args.backend)
    overrides = [
        f'train.output_dir="{run_dir}"',
        f"train.seed={args.seed}",
        f"vllm.enabled={str(args.backend == 'vllm').lower()}",
    ]
    overrides += args.set
    if args.grpo_steps:
        overrides.append(f"train.max_steps={args.grpo_steps}")
    cfg = load_config(args.config, overrides)
    origin = provenance()  # at the start: the code that runs is the tree as it is now
    started = time.monotonic()

    from rust_grpo.models import resolve_model
    from rust_grpo.training.rft import rft_policy
    from rust_grpo.training.train import resolve_model_path, train

    fmt = run_format(cfg.data)
    core, heldout, tiers = heldout_set(args)
    train_problems = training_problems(cfg.data)
    overlap = {p.id for p in heldout} & {p.id for p in train_problems}
    if overlap:
        raise SystemExit(f"held-out problems are in the training data: {sorted(overlap)}")
    print(f"held-out: {len(heldout)} problems x {args.samples} samples: {[p.id for p in heldout]}", flush=True)

    stages: dict[str, dict[str, object]] = {}
    records: dict[str, list[dict[str, object]]] = {}
    base = resolve_model(cfg.model.name_or_path)
    stages["base"], records["base"] = score_stage("base", base, None, heldout, tiers, args, cfg)
    sft = resolve_model_path(cfg.model, train_problems, fmt)  # the cold start, cached: train() reuses it
    stages["sft"], records["sft"] = score_stage("sft", sft, None, heldout, tiers, args, cfg)
    policy = rft_policy(sft, cfg, train_problems)  # sft itself without an RFT stage; cached: train() reuses it
    if policy != sft:
        stages["rft"], records["rft"] = score_stage("rft", policy, None, heldout, tiers, args, cfg)
    final = train(cfg, overwrite=True)  # runs/bench/learning is this benchmark's own run
    print(f"[train] peak {peak_rss_gib()} GiB", flush=True)
    stages["grpo"], records["grpo"] = score_stage("grpo", policy, str(final), heldout, tiers, args, cfg)
    gains = stage_gains(records["sft"], records["grpo"], tiers)
    recipe_s = round(time.monotonic() - started)  # training and scoring: what runs without --ceiling
    if args.ceiling < 0:
        args.ceiling = 64 if args.backend == "vllm" else 0
    ceiling: dict[str, object] = {}
    if args.ceiling:
        trained = {
            "sft": (sft, None),
            **({"rft": (policy, None)} if policy != sft else {}),
            "grpo": (policy, str(final)),
        }
        curves, ever = {}, {}
        for name, (model, adapter) in trained.items():
            metrics, recs = score_stage(
                f"{name}-ceiling", model, adapter, core, {"core": tiers["core"]}, args, cfg, args.ceiling
            )
            curves[name] = metrics["pass_at_k"]  # core problems only: stage_metrics' own curve
            ever[name] = [pid for pid, c in per_problem_counts(recs).items() if c["hidden_pass"]]
        ceiling = {
            "tier": "core",
            "samples": args.ceiling,
            "pass_at_k": curves,
            "problems_ever_passing": ever,
            "seconds": round(time.monotonic() - started) - recipe_s,
        }

    logged = read_metrics(run_dir / "metrics.jsonl")
    steps = [r for r in logged if "reward" in r]  # one per generation batch
    optimizer_steps = sum(1 for r in logged if "loss" in r)  # train.num_iterations per generation batch
    used = sampling_settings(args, args.samples)
    report = learning_report(
        cfg.model.name_or_path,
        optimizer_steps,
        stages,
        heldout=[p.id for p in heldout],
        tiers=tiers,
        generation_batches=len(steps),
        per_problem={stage: per_problem_counts(rows) for stage, rows in records.items()},
        sampling={
            "samples": args.samples,
            "base_samples": args.base_samples,
            **{k: getattr(used, k) for k in ("max_new_tokens", "temperature", "top_p", "top_k", "seed", "dtype")},
            "backend": args.backend,
        },
        per_step_reward=[round(float(r["reward"]), 4) for r in steps],
        per_step_build=[round(float(r.get("rates/build", 0.0)), 4) for r in steps],
        per_step_argless_builds=[r.get("rates/argless_builds") for r in steps],  # None: no build that step
        per_step_zero_variance_sampled=[r.get("dynamic/zero_variance_share_sampled") for r in steps],
        per_step_canary_pass_rate=[r.get("train/canary_pass_rate") for r in steps],  # None: no canary drawn
        grpo_gain_over_sft=gains,
        **({"ceiling": ceiling} if ceiling else {}),
        recipe_s=recipe_s,
        wall_s=round(time.monotonic() - started),
        peak_rss_gib=peak_rss_gib(),
    )
    report["provenance"] = {**origin, "backend": args.backend, "overrides": overrides, "config": args.config}
    (args.out / "learning.json").write_text(json.dumps(report, indent=2))
    plot_learning(report, steps, args.out / "learning.png")
    gain = float(stages["grpo"]["build"]) - float(stages["sft"]["build"])  # type: ignore[arg-type]
    names = list(report["stages"])
    print(
        f"\nheld-out ({len(heldout)} problems x {args.samples}), {' -> '.join(names)}"
        f" ({optimizer_steps} GRPO steps on {len(steps)} generation batches):"
    )
    for key in ("format", "build", "hidden_pass", "hidden_share", "argless_builds", "mean_reward"):
        print(f"  {key:<12} " + " -> ".join(f"{stages[s][key]:.3f}" for s in names))
    for tier_name in tiers:
        by_stage = [stages[s]["tiers"][tier_name] for s in names]  # type: ignore[index]
        for key in ("build", "hidden_pass", "hidden_share"):
            print(f"  {tier_name + ' ' + key:<20} " + " -> ".join(f"{m[key]:.3f}" for m in by_stage))
    if ceiling:
        for name, curve in ceiling["pass_at_k"].items():  # type: ignore[attr-defined]
            print(
                f"  core pass@k, {name} ({args.ceiling} samples a problem): "
                + ", ".join(f"@{k} {v:.3f}" for k, v in curve.items())
            )
    print("GRPO's gain over SFT, 95% intervals resampling problems:")
    for key in GAINS:
        g = gains[key]
        print(f"  {key:<12} {g['gain']:+.3f} [{g['ci'][0]:+.3f}, {g['ci'][1]:+.3f}] over {g['problems']} problems")
    timing = f"{report['wall_s']} s in all" + (f", {recipe_s} s without the ceiling" if ceiling else "")
    timing += f", peak memory {report['peak_rss_gib']} GiB"
    print(f"GRPO build gain over SFT: {gain:+.3f} (target {args.target:+.2f}); {timing}")
    print(f"wrote {args.out / 'learning.json'} and {args.out / 'learning.png'}")
    return 0 if gain >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
