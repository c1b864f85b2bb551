"""Trainer callbacks: per-step metrics to JSONL, with the share of step time spent in rewards."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..rewards.context import RewardContext
from ..rewards.functions import reward_values


class MetricsJsonlCallback(TrainerCallback):
    """Appends every log event (TRL's reward means and our rates) as one JSON line."""

    def __init__(self, path: Path, context: RewardContext | None = None) -> None:
        self.path = Path(path)
        self.context = context
        self._last_time = time.monotonic()
        self._last_sandbox = context.sandbox_seconds if context else 0.0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._last_time = time.monotonic()
        self._last_sandbox = self.context.sandbox_seconds if self.context else 0.0

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs or not state.is_world_process_zero:  # every rank logs the same (gathered) values: write once
            return
        record: dict[str, Any] = {"step": state.global_step, "epoch": state.epoch}
        for key, value in logs.items():
            if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
                record[key] = value
        if self.context is not None and "loss" in logs:
            now = time.monotonic()
            wall = now - self._last_time
            sandbox = self.context.sandbox_seconds - self._last_sandbox
            record["time/wall_s"] = wall
            record["time/reward_s"] = sandbox
            record["time/reward_share"] = sandbox / wall if wall > 0 else 0.0
            self._last_time, self._last_sandbox = now, self.context.sandbox_seconds
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


STEP_LINE_RATES = {
    "format": "rates/format",
    "build": "rates/build",
    "hidden": "rates/hidden_tests_pass",
    "canary": "train/canary_pass_rate",  # only on steps that drew canary rows
}


class StepLineCallback(TrainerCallback):
    """One line per training step on stderr (step, reward, the rates a user watches, time), in place
    of the raw dict of every logged value that transformers prints; all values are in metrics.jsonl."""

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs or not state.is_world_process_zero or "reward" not in logs:
            return

        def number(key: str) -> float | None:  # transformers logs NaN (no graded completion) as None
            value = logs.get(key)
            return float(value) if isinstance(value, (int, float)) and not math.isnan(value) else None

        rates = " ".join(f"{name} {v:4.0%}" for name, key in STEP_LINE_RATES.items() if (v := number(key)) is not None)
        seconds = f" {t:5.1f}s" if (t := number("step_time")) is not None else ""
        reward = number("reward")
        print(
            f"step {state.global_step}/{state.max_steps}: reward "
            + (f"{reward:6.3f}" if reward is not None else "   n/a")
            + f"  {rates}{seconds}",
            file=sys.stderr,
            flush=True,
        )


class SamplesCallback(TrainerCallback):
    """Writes a few graded completions of every N-th step to ``samples.jsonl``, with their rewards."""

    def __init__(
        self, path: Path, context: RewardContext, every: int = 1, per_step: int = 4, repair: Any = None
    ) -> None:
        self.path = Path(path)
        self.context = context
        self.every = every
        self.per_step = per_step
        self.repair = repair  # a RepairRollout: write whole episodes, every turn with its rewards and feedback

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        batches = list(self.context.graded)
        self.context.graded.clear()
        if not state.is_world_process_zero:  # under N ranks the main one writes its own samples
            return
        if self.repair is not None:
            self._write_episodes()
            return
        if not self.every or not batches or batches[0].step % self.every:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        written = 0
        with open(self.path, "a", encoding="utf-8") as fh:
            for batch in batches:
                for text, sample_id, e in zip(batch.texts, batch.ids, batch.evaluations):
                    if written == self.per_step:
                        return
                    record = {
                        "step": batch.step,
                        "id": sample_id,
                        "completion": text,
                        "status": e.result.status.value if e.result else "no_code",
                        "rewards": reward_values(e),
                    }
                    fh.write(json.dumps(record) + "\n")
                    written += 1

    def _write_episodes(self) -> None:
        episodes = list(self.repair.recent)
        self.repair.recent.clear()
        if not self.every or not episodes or episodes[0][0] % self.every:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            for step, sample_id, episode in episodes[: self.per_step]:
                final = episode.final.to_dict()
                record = {
                    "step": step,
                    "id": sample_id,
                    "completion": final["completion"],
                    "status": final["status"],
                    "rewards": final["rewards"],
                    "turns": episode.to_dicts(),
                }
                fh.write(json.dumps(record) + "\n")


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


class RecordOutputsCallback(TrainerCallback):
    """Adds the run's files to its folder's manifest (``outdir.record_outputs``) at every step, log and
    checkpoint, so a run killed outright still leaves a list that a later ``--overwrite`` deletes by
    (a file missing from it is kept, never deleted). Added last, it runs after the callbacks that write."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = Path(output_dir)

    def _record(self, state: Any) -> None:
        if state.is_world_process_zero:
            from ..outdir import record_outputs

            record_outputs(self.output_dir)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._record(state)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._record(state)

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._record(state)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._record(state)
