"""PNG training curves from a run's metrics.jsonl (``rust-grpo plot RUN_DIR``)."""

from __future__ import annotations

from pathlib import Path

from .callbacks import read_metrics

PANELS = [
    ("Total reward", ["reward"]),
    (
        "Reward components",
        [
            "rewards/format/mean",
            "rewards/code_block/mean",
            "rewards/tests_present/mean",
            "rewards/build/mean",
            "rewards/clippy/mean",
            "rewards/own_tests/mean",
            "rewards/hidden_tests/mean",
        ],
    ),
    (
        "Pass rates",
        ["rates/format", "rates/build", "rates/clippy_clean", "rates/own_tests_pass", "rates/hidden_tests_pass"],
    ),
    ("Loss / KL", ["loss", "kl"]),
    ("Completion length", ["completions/mean_length"]),
    ("Time in rewards (share of step)", ["time/reward_share"]),
]


def plot_run(run_dir: Path, out: Path | None = None) -> Path:
    """Draw the standard panels; series absent from the run are skipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    records = [r for r in read_metrics(run_dir / "metrics.jsonl") if "reward" in r or "loss" in r]
    if not records:
        raise FileNotFoundError(f"{run_dir}/metrics.jsonl has no training steps to plot")
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax, (title, keys) in zip(axes.flat, PANELS):
        for key in keys:
            points = [(r["step"], r[key]) for r in records if key in r]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o", markersize=3, label=key.split("/")[-2] if key.endswith("/mean") else key)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    fig.suptitle(f"rust-grpo: {run_dir.name}")
    fig.tight_layout()
    out = out or run_dir / "training_curves.png"
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
