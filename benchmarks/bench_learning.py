"""Does GRPO actually learn on a CPU? Train the tiny model on an easy objective (the format reward)
and report whether the reward rises over steps, plus the share of step time spent in rewards.

The tiny model is warm-started only briefly, so it gets the answer format right some of the
time; GRPO must then raise that rate. Every other reward component is still computed (one
sandbox pass per completion) and logged with weight 0, so the reward-time share is real.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rust_grpo.callbacks import read_metrics
from rust_grpo.config import load_config
from rust_grpo.rewards import REWARD_NAMES
from rust_grpo.train import train


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warm-start-steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/learning"))
    args = parser.parse_args()
    weights = "{" + ", ".join(f"{name} = {1.0 if name == 'format' else 0.0}" for name in REWARD_NAMES) + "}"
    cfg = load_config(
        "configs/tiny-cpu.toml",
        [
            f'train.output_dir="{args.out}"',
            f"train.max_steps={args.steps}",
            f"model.warm_start_steps={args.warm_start_steps}",
            f"train.learning_rate={args.lr}",
            f"reward.weights={weights}",
            "train.save_steps=1000",
            'train.report_to=["none"]',
        ],
    )
    train(cfg)
    steps = [r for r in read_metrics(args.out / "metrics.jsonl") if "reward" in r]
    k = max(1, len(steps) // 4)
    first = sum(r["rewards/format/mean"] for r in steps[:k]) / k
    last = sum(r["rewards/format/mean"] for r in steps[-k:]) / k
    share = sum(r.get("time/reward_share", 0.0) for r in steps) / len(steps)
    step_s = sum(r.get("step_time", 0.0) for r in steps) / len(steps)
    report = {
        "steps": len(steps),
        "format_reward_first_quarter": round(first, 3),
        "format_reward_last_quarter": round(last, 3),
        "rises": last > first,
        "mean_step_s": round(step_s, 2),
        "reward_time_share": round(share, 4),
        "per_step_format_reward": [round(r["rewards/format/mean"], 3) for r in steps],
    }
    (args.out / "learning.json").write_text(json.dumps(report, indent=2))
    print(
        f"format reward: first quarter {first:.3f} -> last quarter {last:.3f} ({'rises' if last > first else 'does NOT rise'})"
    )
    print(f"per step: {report['per_step_format_reward']}")
    print(
        f"mean step {step_s:.1f}s, of which rewards (sandbox) {100 * share:.1f}%; curves in {args.out / 'training_curves.png'}"
    )
    return 0 if last > first else 1


if __name__ == "__main__":
    sys.exit(main())
