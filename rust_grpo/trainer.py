"""TRL's GRPOTrainer with one addition: groups whose rewards are all equal can be left out of the loss.

A group in which every completion earns the same reward (all fail to build, or all pass) has zero
advantage everywhere, so it teaches nothing; with token-normalised losses (dapo, bnpo, cispo) its
tokens still count in the denominator and dilute the groups that do carry signal. DAPO's dynamic
sampling drops such groups. Here they are masked out of the loss and of its token count (the batch
shrinks rather than being refilled by resampling), and every generation batch logs how many groups
were skipped: ``skip/zero_variance_groups`` and ``skip/frac_completions``.
"""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer


def zero_variance_rows(advantages: torch.Tensor, group_size: int, atol: float = 1e-6) -> torch.Tensor:
    """A boolean per completion: True where its whole group's advantages are zero.

    ``advantages`` is the whole generation batch (every process), groups contiguous, as TRL lays
    them out. Zero advantage everywhere in a group is exactly "all rewards equal" (unscorable
    completions already carry advantage 0 and do not break a group's tie).
    """
    if advantages.numel() % group_size:
        raise ValueError(f"{advantages.numel()} advantages do not split into groups of {group_size}")
    groups = advantages.detach().view(-1, group_size)
    flat = groups.abs().amax(dim=1) <= atol
    return flat.repeat_interleave(group_size)


class RustGRPOTrainer(GRPOTrainer):  # type: ignore[misc]  # TRL is untyped here (Any)
    """GRPOTrainer that can skip zero-variance groups (``train.skip_zero_variance_groups``)."""

    def __init__(self, *args: Any, skip_zero_variance_groups: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.skip_zero_variance_groups = skip_zero_variance_groups

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        if not self.skip_zero_variance_groups or mode != "train":
            return output
        local = output["advantages"]
        everyone = self.accelerator.gather(local)  # process order == TRL's process slices
        skip_all = zero_variance_rows(everyone, self.num_generations)
        index = self.accelerator.process_index
        skip = skip_all[index * local.numel() : (index + 1) * local.numel()].to(local.device)
        keep = (~skip).unsqueeze(1).to(output["completion_mask"].dtype)
        output["completion_mask"] = output["completion_mask"] * keep
        loss_mask = output["completion_mask"]
        if "tool_mask" in output:
            output["tool_mask"] = output["tool_mask"] * keep
            loss_mask = loss_mask * output["tool_mask"]
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        self._metrics[mode]["skip/zero_variance_groups"].append(float(skip_all.sum().item()) / self.num_generations)
        self._metrics[mode]["skip/frac_completions"].append(skip_all.float().mean().item())
        return output
