"""Difficulty filtering before training (as open-r1 and DAPO users do): a prompt the policy always
solves, or never does, gives every completion of its group the same reward, hence no advantage and
no learning signal. Sample k answers per prompt, keep those whose hidden-test pass rate lies in
[min_pass, max_pass]."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class DifficultySplit:
    kept: list[str] = field(default_factory=list)
    never: list[str] = field(default_factory=list)  # below min_pass
    always: list[str] = field(default_factory=list)  # above max_pass
    rates: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        total = len(self.kept) + len(self.never) + len(self.always)
        return (
            f"kept {len(self.kept)}/{total} prompts; dropped {len(self.never)} solved too rarely and "
            f"{len(self.always)} solved too often"
        )


def split_by_difficulty(records: list[dict[str, Any]], min_pass: float, max_pass: float) -> DifficultySplit:
    """Split problems by the share of their scored samples (``score_completions`` records) that pass."""
    if not 0 <= min_pass <= max_pass <= 1:
        raise ValueError(f"need 0 <= min_pass <= max_pass <= 1, got {min_pass}, {max_pass}")
    by_problem: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        if not r.get("unknown_problem"):
            by_problem[r["problem_id"]].append(bool(r["hidden_pass"]))
    split = DifficultySplit()
    for pid, passes in by_problem.items():
        rate = sum(passes) / len(passes)
        split.rates[pid] = rate
        (split.never if rate < min_pass else split.always if rate > max_pass else split.kept).append(pid)
    return split
