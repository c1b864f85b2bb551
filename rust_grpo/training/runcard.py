"""The README.md of a training run: what was trained, from what, on what, with which rewards, and
what the run measured, in place of TRL's generic model card (which names no base model here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reward_sandbox.outfiles import write_text

from ..config import RunConfig
from .callbacks import read_metrics

SHOWN = {
    "format": "rates/format",
    "builds": "rates/build",
    "clippy clean": "rates/clippy_clean",
    "own tests pass": "rates/own_tests_pass",
    "hidden tests pass": "rates/hidden_tests_pass",
}


def _mean(rows: list[dict[str, Any]], key: str) -> str:
    values = [float(r[key]) for r in rows if key in r]
    return f"{sum(values) / len(values):.1%}" if values else "n/a"


def _adapter_base(out: Path) -> str:
    """The model the adapter was trained on (after the cold start and RFT, which live in the cache),
    as PEFT recorded it; ``<base>`` for a run without an adapter."""
    import json

    try:
        return str(json.loads((out / "final" / "adapter_config.json").read_text())["base_model_name_or_path"])
    except (OSError, ValueError, KeyError):
        return "<base>"


def run_card(cfg: RunConfig, out: Path) -> str:
    """Markdown describing the run in ``out`` (its config and its logged training rates)."""
    steps = (
        [r for r in read_metrics(out / "metrics.jsonl") if "reward" in r] if (out / "metrics.jsonl").exists() else []
    )
    head, tail = steps[: max(1, len(steps) // 4)], steps[-max(1, len(steps) // 4) :]
    weights = ", ".join(f"{name} {w:g}" for name, w in cfg.reward.weights.items() if w)
    sources = ", ".join(f"`{spec}`" for spec in cfg.data.train_files())
    model = "a tiny random Qwen2 built offline (`model.tiny`)" if cfg.model.tiny else f"`{cfg.model.name_or_path}`"
    lines = [
        "---",
        "library_name: peft",
        "tags: [rust, grpo, rust-grpo]",
        "---",
        "",
        f"# {out.name}: a GRPO run of rust-grpo",
        "",
        f"- base model: {model}"
        + (f", SFT cold start of {cfg.model.warm_start_steps} steps" if cfg.model.warm_start_steps else "")
        + (f", RFT on its verified answers ({cfg.rft.samples} samples a problem)" if cfg.rft.samples else ""),
        f"- training problems: {sources}; rewards from sandboxed builds, clippy and tests",
        f"- reward weights: {weights}",
        f"- GRPO: {len(steps)} logged steps, {cfg.train.num_generations} completions a prompt, "
        f"learning rate {cfg.train.learning_rate:g}, "
        + (f"LoRA r{cfg.lora.r}/alpha{cfg.lora.alpha}" if cfg.lora.enabled else "all weights"),
        "- the adapter is in `final/`; the whole config in `config.json`; every logged value in `metrics.jsonl`",
        "",
        "Training-time rates (completions sampled during training, mean of the first and last quarter of",
        "the steps; held-out rates come from `rust-grpo eval`):",
        "",
        "| rate | first steps | last steps |",
        "|---|---|---|",
        *(f"| {name} | {_mean(head, key)} | {_mean(tail, key)} |" for name, key in SHOWN.items()),
        "",
        f"Evaluate: `rust-grpo eval --model {_adapter_base(out)} --adapter {out / 'final'} --config {out / 'config.json'}`",
        "",
    ]
    return "\n".join(lines)


def write_run_card(cfg: RunConfig, out: Path) -> Path:
    path = Path(out) / "README.md"
    write_text(path, run_card(cfg, Path(out)))
    return path
