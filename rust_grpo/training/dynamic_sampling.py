"""DAPO's dynamic sampling: refill a generation batch with groups that carry a learning signal.

A group whose completions all earn the same reward has zero advantage everywhere: it costs a full
forward and backward pass and teaches nothing. On a small model most groups are like that (all
sixteen completions fail to build). Dynamic sampling draws more prompts, generates and grades their
groups, and keeps drawing until the batch holds as many groups *with* reward variance as it has
room for, or until ``train.dynamic_sampling_rounds`` extra rounds are spent; whatever room is left
is filled with the first draw's flat groups, masked out of the loss. The optimiser step then
always sees a full batch of signal when the policy produces any.

This module holds the tensor bookkeeping (which groups to keep, how to merge TRL's scored batches
of different padded lengths); ``trainer.py`` holds the loop. Advantages are those of each group's
own round: with ``scale_rewards = "group"`` (the default) that is exactly what one large draw gives.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

# How TRL pads each per-row tensor of a scored generation batch (prompt side left, completion side right).
PROMPT_KEYS: dict[str, str | float] = {"prompt_ids": "pad", "prompt_mask": 0}
COMPLETION_KEYS: dict[str, str | float] = {
    "completion_ids": "pad",
    "completion_mask": 0,
    "old_per_token_logps": 0.0,
    "ref_per_token_logps": 0.0,
    "sampling_per_token_logps": 0.0,
    "importance_sampling_ratio": 0.0,
    "tool_mask": 1,
}
ROW_KEYS = {"advantages"}
SCALAR_KEYS = {"num_items_in_batch"}


def flat_groups(advantages: torch.Tensor, group_size: int, atol: float = 1e-6) -> torch.Tensor:
    """One boolean per group: True where every advantage in it is zero (all rewards equal)."""
    if advantages.numel() % group_size:
        raise ValueError(f"{advantages.numel()} advantages do not split into groups of {group_size}")
    return advantages.detach().view(-1, group_size).abs().amax(dim=1) <= atol


def check_mergeable(output: dict[str, Any]) -> None:
    """Refuse scored batches that hold something this module cannot re-pad (images, multimodal)."""
    unknown = set(output) - set(PROMPT_KEYS) - set(COMPLETION_KEYS) - ROW_KEYS - SCALAR_KEYS
    if unknown:
        raise ValueError(
            f"train.dynamic_sampling cannot merge generation batches holding {sorted(unknown)} "
            "(multimodal inputs are not supported): turn it off for this run"
        )


def _pad_to(t: torch.Tensor, width: int, value: float, left: bool) -> torch.Tensor:
    missing = width - t.size(1)
    if missing <= 0:
        return t
    pad = torch.full((t.size(0), missing), value, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


def take_rows(parts: Sequence[tuple[dict[str, Any], list[int]]], pad_token_id: int) -> dict[str, Any]:
    """One scored batch made of the given rows of several, re-padded to common widths (prompts on the
    left, completions on the right, as TRL pads them). ``num_items_in_batch`` is left for the caller."""
    for output, _ in parts:
        check_mergeable(output)
    merged: dict[str, Any] = {}
    keys = [k for k in parts[0][0] if k not in SCALAR_KEYS]
    for key in keys:
        pieces = [output[key][torch.tensor(rows, dtype=torch.long)] for output, rows in parts if rows]
        if key in ROW_KEYS or pieces[0].dim() == 1:
            merged[key] = torch.cat(pieces)
            continue
        left = key in PROMPT_KEYS
        value = (PROMPT_KEYS if left else COMPLETION_KEYS)[key]
        fill = float(pad_token_id) if isinstance(value, str) else value
        width = max(p.size(1) for p in pieces)
        merged[key] = torch.cat([_pad_to(p, width, fill, left) for p in pieces])
    return merged


def group_rows(groups: Sequence[int], group_size: int) -> list[int]:
    """The row indices of the given groups, groups contiguous as TRL lays them out."""
    return [g * group_size + i for g in groups for i in range(group_size)]


def prompt_stream(size: int, seed: int) -> Iterator[int]:
    """Dataset indices for the extra draws: every row once per pass, each pass shuffled anew."""
    import random

    rng = random.Random(seed)
    while True:
        order = list(range(size))
        rng.shuffle(order)
        yield from order
