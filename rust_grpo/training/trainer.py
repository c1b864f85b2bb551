"""TRL's GRPOTrainer with what rust-grpo adds around each scored generation batch.

- **Zero-variance groups out of the loss** (``train.skip_zero_variance_groups``). A group in which
  every completion earns the same reward has zero advantage everywhere, so it teaches nothing;
  with token-normalised losses (dapo, bnpo, cispo) its tokens still count in the denominator and
  dilute the groups that do carry signal. Such groups are masked out of the loss and of its token
  count (the batch shrinks), counted as ``skip/zero_variance_groups`` and ``skip/frac_completions``.
- **Dynamic sampling** (``train.dynamic_sampling``, see ``dynamic_sampling.py``): instead of
  shrinking, the batch is refilled with freshly drawn groups that carry signal, within a bound.
- **Canaries** (``data.canary_share``, see ``canaries.py``): rows no honest program passes; their
  rewards become unknown, they leave the loss, and their pass rate is logged apart.
- **Completion tokens only**: on the CPU, TRL's fused LM head scores only the labelled positions
  (``cpu_logprobs.py``), as it does on CUDA.
- **Rates without canaries**: the ``rates/*`` metrics (and ``rates/argless_builds``) are logged here,
  from the reward context's grading of the batch, with canary rows left out.

Every run logs ``dynamic/zero_variance_share_sampled``, the share of the first draw's groups with
no reward variance, so runs with and without dynamic sampling compare on the same number.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import torch
from trl import GRPOTrainer

from ..rewards.context import RewardContext
from ..rewards.verdict import batch_metrics
from .canaries import CANARY_COLUMN, CanaryWatch, canary_record, flagged, passes_canary
from .dynamic_sampling import flat_groups, group_rows, prompt_stream, take_rows

log = logging.getLogger("rust_grpo")


def zero_variance_rows(advantages: torch.Tensor, group_size: int, atol: float = 1e-6) -> torch.Tensor:
    """A boolean per completion: True where its whole group's advantages are zero.

    ``advantages`` is the whole generation batch (every process), groups contiguous, as TRL lays
    them out. Zero advantage everywhere in a group is exactly "all rewards equal" (unscorable
    completions already carry advantage 0 and do not break a group's tie).
    """
    return flat_groups(advantages, group_size, atol).repeat_interleave(group_size)


class RustGRPOTrainer(GRPOTrainer):  # type: ignore[misc]  # TRL is untyped here (Any)
    """GRPOTrainer with zero-variance skipping, dynamic sampling, canaries and canary-free rates."""

    def __init__(
        self,
        *args: Any,
        skip_zero_variance_groups: bool = False,
        dynamic_sampling_rounds: int = 0,
        reward_context: RewardContext | None = None,
        canary_watch: CanaryWatch | None = None,
        vllm_cpu_dtype: str = "auto",
        **kwargs: Any,
    ) -> None:
        from ..vllm_engine import on_cpu
        from .cpu_logprobs import score_labelled_positions_only

        score_labelled_positions_only()
        colocated_on_cpu = kwargs["args"].use_vllm and kwargs["args"].vllm_mode == "colocate" and on_cpu()
        if colocated_on_cpu:
            from .vllm_colocate import cpu_engine_arguments, cpu_engine_bf16, reload_policy_weights

            bf16 = cpu_engine_bf16(vllm_cpu_dtype, bool(kwargs["args"].bf16))
            with cpu_engine_arguments(kwargs["args"].seed, bf16):
                super().__init__(*args, **kwargs)
            self.vllm_generation.sync_weights = functools.partial(reload_policy_weights, self.vllm_generation)
        else:
            super().__init__(*args, **kwargs)
        self.skip_zero_variance_groups = skip_zero_variance_groups
        self.dynamic_sampling_rounds = dynamic_sampling_rounds
        self.reward_context = reward_context
        self.canary_watch = canary_watch
        if dynamic_sampling_rounds and self.accelerator.num_processes > 1:
            raise ValueError(
                "train.dynamic_sampling runs on one process only (groups may span processes): "
                "turn it off, or use train.skip_zero_variance_groups"
            )
        self._extra_prompts = (
            prompt_stream(len(self.train_dataset), self.args.seed + 1) if dynamic_sampling_rounds else None
        )

    # --- rewards: canaries become unknown, rates are logged without them -----------------------

    def _calculate_rewards(self, inputs: list[dict[str, Any]], prompts: Any, completions: Any, ids: Any) -> Any:
        rewards = super()._calculate_rewards(inputs, prompts, completions, ids)
        canary = [bool(x.get(CANARY_COLUMN)) for x in inputs]
        if self.reward_context is not None:
            self._log_batch(inputs, completions, canary)
        local = torch.tensor(canary, dtype=torch.uint8, device=rewards.device)
        everyone = self.accelerator.gather(local).bool()  # rewards are gathered too, in process order
        rewards[everyone] = torch.nan  # unknown: no advantage, and out of TRL's reward means
        return rewards

    def _log_batch(self, inputs: list[dict[str, Any]], completions: Any, canary: list[bool]) -> None:
        """Rates of the non-canary rows (the grading is the reward functions' own, memoised), the share
        of builds whose asked function ignores its arguments, and the canary counts."""
        context = self.reward_context
        assert context is not None
        columns = {key: [x.get(key) for x in inputs] for key in inputs[0] if key not in ("prompt", "completion")}
        texts = columns.get("repair_final") or completions
        evaluations = context.evaluate(texts, context.lookup(columns["id"]))
        normal = [i for i, c in enumerate(canary) if not c]
        if normal:
            for name, value in batch_metrics([evaluations[i] for i in normal]).items():
                self._log_metric(name, value)
            builds = [i for i in normal if evaluations[i].builds]
            if builds:
                argless = sum(evaluations[i].argless for i in builds)
                self._log_metric("rates/argless_builds", argless / len(builds))
        health = getattr(context.grader, "health", None)  # reward servers (RemoteGrader)
        if callable(health):
            self._log_metric("sandbox/servers_up", float(sum(s["healthy"] for s in health())))
        if self.canary_watch is not None:
            self._watch_canaries(inputs, texts, evaluations, canary)

    def _watch_canaries(
        self, inputs: list[dict[str, Any]], texts: Any, evaluations: list[Any], canary: list[bool]
    ) -> None:
        from trl.trainer.grpo_trainer import gather_object  # accelerate's, as TRL imports it

        watch = self.canary_watch
        assert watch is not None
        rows = [i for i, c in enumerate(canary) if c]
        passed = [i for i in rows if passes_canary(evaluations[i])]
        local = torch.tensor(
            [len(rows), len(passed), sum(flagged(evaluations[i]) for i in rows)], device=self.accelerator.device
        )
        seen, n_passed, n_flagged = (int(v) for v in self.accelerator.gather(local).view(-1, 3).sum(dim=0).tolist())
        step = self.state.global_step
        records = [canary_record(step, str(inputs[i].get("id")), str(texts[i]), evaluations[i]) for i in passed]
        records = gather_object(records)
        if self.accelerator.is_main_process:
            watch.write(records)
        watch.add(seen, n_passed, n_flagged)
        if seen:  # straight into the step's metrics: already summed over processes
            self._metrics["train"]["train/canary_pass_rate"].append(n_passed / seen)
            self._metrics["train"]["canary/flagged_rate"].append(n_flagged / seen)
        self._metrics["train"]["canary/completions"].append(float(seen))

    # --- the scored generation batch: flat groups, dynamic sampling, canaries out of the loss ----

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return output
        canary = [bool(x.get(CANARY_COLUMN)) for x in inputs]
        flat = self._flat_rows(output["advantages"])
        g = self.num_generations
        # per group of the whole batch (every process): groups may span processes
        local = torch.tensor([[f, c] for f, c in zip(flat, canary)], dtype=torch.uint8, device=self.accelerator.device)
        groups = self.accelerator.gather(local).view(-1, g, 2)[:, 0, :].bool().tolist()
        signal = [not f and not c for f, c in groups]
        normal_groups = sum(not c for _, c in groups)
        if normal_groups:
            zero = normal_groups - sum(signal)
            self._metrics["train"]["dynamic/zero_variance_share_sampled"].append(zero / normal_groups)
        if self.dynamic_sampling_rounds:
            output, drop = self._refill(output, signal)
        else:
            drop = [c or (self.skip_zero_variance_groups and f) for c, f in zip(canary, flat)]
            if self.skip_zero_variance_groups:
                skipped = sum(f and not c for f, c in groups)
                self._metrics["train"]["skip/zero_variance_groups"].append(float(skipped))
                self._metrics["train"]["skip/frac_completions"].append(skipped / len(groups))
        return self._mask_rows(output, drop)

    def _flat_rows(self, local: torch.Tensor) -> list[bool]:
        """This process's rows whose whole group (over every process) has zero advantage."""
        everyone = self.accelerator.gather(local)  # process order == TRL's process slices
        rows = zero_variance_rows(everyone, self.num_generations)
        index = self.accelerator.process_index
        return rows[index * local.numel() : (index + 1) * local.numel()].tolist()

    def _mask_rows(self, output: dict[str, Any], drop: list[bool]) -> dict[str, Any]:
        """``output`` with the dropped rows out of the loss and of its token count."""
        keep = torch.tensor([not d for d in drop], device=output["completion_mask"].device)
        keep = keep.unsqueeze(1).to(output["completion_mask"].dtype)
        output["completion_mask"] = output["completion_mask"] * keep
        loss_mask = output["completion_mask"]
        if "tool_mask" in output:
            output["tool_mask"] = output["tool_mask"] * keep
            loss_mask = loss_mask * output["tool_mask"]
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return output

    def _refill(self, first: dict[str, Any], signal: list[bool]) -> tuple[dict[str, Any], list[bool]]:
        """Draw, generate and score more groups until the batch holds as many with reward variance as
        it has groups (or the rounds run out); fill what is left with the first draw's other groups,
        which leave the loss. Returns the merged batch and the rows to drop."""
        g, wanted = self.num_generations, len(signal)
        batches = [first]
        kept = [(0, k) for k, s in enumerate(signal) if s]
        rounds = 0
        while len(kept) < wanted and rounds < self.dynamic_sampling_rounds:
            rounds += 1
            assert self._extra_prompts is not None
            rows = [dict(self.train_dataset[next(self._extra_prompts)]) for _ in range(wanted)]
            more = [dict(row) for row in rows for _ in range(g)]
            scored = super()._generate_and_score_completions(more)
            flat = self._flat_rows(scored["advantages"])
            batches.append(scored)
            kept += [(rounds, k) for k, row in enumerate(rows) if not flat[k * g] and not row.get(CANARY_COLUMN)]
        chosen = kept[:wanted]
        fillers = [(0, k) for k, s in enumerate(signal) if not s][: wanted - len(chosen)]
        selected = chosen + fillers
        parts: list[tuple[dict[str, Any], list[int]]] = []
        drop: list[bool] = []
        for i, batch in enumerate(batches):  # merged rows come batch by batch
            groups = [(b, k) for b, k in selected if b == i]
            parts.append((batch, group_rows([k for _, k in groups], g)))
            drop += [(b, k) in fillers for b, k in groups for _ in range(g)]
        merged = take_rows(parts, self.processing_class.pad_token_id)
        metrics = self._metrics["train"]
        metrics["dynamic/prompts_drawn"].append(float(wanted * (rounds + 1)))
        metrics["dynamic/groups_kept"].append(float(len(chosen)))
        metrics["dynamic/zero_variance_share"].append(len(fillers) / wanted)
        metrics["dynamic/rounds"].append(float(rounds))
        return merged, drop
