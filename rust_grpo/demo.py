"""``rust-grpo demo`` / ``make demo``: the whole pipeline on the CPU, offline, in minutes."""

from __future__ import annotations

from pathlib import Path

from .callbacks import read_metrics
from .config import load_config
from .train import train

DEMO_CONFIG = Path(__file__).resolve().parent / "configs" / "tiny-cpu.toml"


def run_demo(out: Path, steps: int = 8, config: Path = DEMO_CONFIG) -> dict[str, float]:
    """Train the tiny model with real sandboxed rewards; print and return the reward trend."""
    cfg = load_config(config, [f'train.output_dir="{out}"', f"train.max_steps={steps}"])
    final = train(cfg)
    steps_logged = [r for r in read_metrics(out / "metrics.jsonl") if "reward" in r]
    first, last = steps_logged[0], steps_logged[-1]
    keys = ["reward", "rates/format", "rates/build", "rates/clippy_clean", "rates/own_tests_pass", "time/reward_share"]
    print(f"\ndemo finished: {len(steps_logged)} GRPO steps, model in {final}")
    for key in keys:
        if key in first:
            print(f"  {key:<22} step {first['step']}: {first[key]:.3f}   step {last['step']}: {last[key]:.3f}")
    print(
        f"  metrics: {out / 'metrics.jsonl'}\n  samples: {out / 'samples.jsonl'}\n  curves:  {out / 'training_curves.png'}"
    )
    return {k: last[k] for k in keys if k in last}
