"""``rust-grpo demo`` / ``make demo``: the whole pipeline on the CPU, offline, in minutes.

The tiny model is warm-started on reference answers, then trained with GRPO on real sandboxed
rewards. Each GRPO step sees one different problem, so per-step rewards track the problems'
difficulty, not learning. The summary therefore compares like with like: the same problems,
sampled with the same seed and settings, before GRPO (the warm-started model) and after it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reward_sandbox.outfiles import write_text

from .config import load_config
from .outdir import record_outputs
from .problems.selection import run_format, training_problems
from .training.callbacks import read_metrics
from .training.train import train

DEMO_CONFIG = Path(__file__).resolve().parent / "configs" / "tiny-cpu.toml"
RATES = {"format": "format_ok", "build": "build_ok", "hidden tests": "hidden_pass"}


def _score(model: str, adapter: str | None, problems: list[Any], fmt: Any, samples: int, tokens: int) -> dict[str, Any]:
    from reward_sandbox import Settings, open_grader

    from .evaluation.sampling import SamplingSettings, generate_hf
    from .evaluation.scoring import score_completions

    settings = SamplingSettings(samples=samples, max_new_tokens=tokens, temperature=1.0, top_p=1.0, seed=0)
    completions = generate_hf(model, problems, settings, fmt, adapter=adapter)
    with open_grader(Settings(workers=2).with_run_timeout(5.0)) as grader:
        records = score_completions(completions, {p.id: p for p in problems}, grader)
    n = len(records)
    return {"n": n, **{name: sum(bool(r[key]) for r in records) / n for name, key in RATES.items()}}


def run_demo(
    out: Path, steps: int = 8, config: Path = DEMO_CONFIG, samples: int = 2, overwrite: bool = False
) -> dict[str, Any]:
    """Train the tiny model with real sandboxed rewards, then score the same problems before and after.

    ``overwrite`` replaces an earlier run in ``out``; any other content there is refused (``train``)."""
    from .training.train import resolve_model_path

    cfg = load_config(config, [f'train.output_dir="{out}"', f"train.max_steps={steps}"])
    final = train(cfg, overwrite=overwrite, can_resume=False)
    problems = training_problems(cfg.data)
    fmt = run_format(cfg.data)
    base = resolve_model_path(cfg.model, problems, fmt)
    tokens = cfg.train.max_completion_length
    before = _score(base, None, problems, fmt, samples, tokens)
    after = _score(base, str(final), problems, fmt, samples, tokens)
    logged = [r for r in read_metrics(out / "metrics.jsonl") if "loss" in r]
    clipped = [r["completions/clipped_ratio"] for r in logged if "completions/clipped_ratio" in r]
    lines = [
        f"demo finished: {len(logged)} GRPO steps on {len(problems)} training problems, adapter in {final}",
        f"the same {len(problems)} problems x {samples} samples (seed 0, temperature 1, {tokens} tokens), "
        "before and after GRPO:",
        "",
        "| rate | before | after | n |",
        "|---|---|---|---|",
        *(f"| {name} | {before[name]:.1%} | {after[name]:.1%} | {before['n']} |" for name in RATES),
    ]
    if clipped:
        lines.append(
            f"\ncompletions cut at {tokens} tokens during training: {sum(clipped) / len(clipped):.0%} on average"
        )
    write_text(out / "summary.md", "\n".join(lines) + "\n")
    record_outputs(out)  # summary.md joins the run's manifest: a later --overwrite replaces it
    print("\n" + "\n".join(lines))
    print(
        f"  {steps} steps on a 2-layer model show the pipeline working end to end with real rewards; they are\n"
        "  too few and too noisy to show learning (benchmarks/bench_learning.py asks that question).\n"
        f"  metrics: {out / 'metrics.jsonl'}\n  samples: {out / 'samples.jsonl'}\n  curves:  {out / 'training_curves.png'}\n"
        f"  this summary: {out / 'summary.md'}"
    )
    return {"before": before, "after": after}
