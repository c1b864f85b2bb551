"""The reward components as TRL reward functions, all reading one :class:`~.context.RewardContext`.

TRL calls each with the batch's prompts, completions and dataset columns; the ``id`` column names
each row's problem (``RewardContext.lookup``), so the first call grades the batch and the others
read the memo.
"""

from __future__ import annotations

from typing import Any

from .context import RewardContext
from .functions import REWARD_NAMES, REWARDS, reward_value
from .verdict import batch_metrics


class RewardFunction:
    """A TRL reward function for one component; picklable, with a readable ``__name__``."""

    def __init__(self, name: str, context: RewardContext, log_rates: bool = False) -> None:
        if name not in REWARDS:
            raise ValueError(f"unknown reward {name!r}; known: {', '.join(REWARD_NAMES)}")
        self.__name__ = name
        self.context = context
        self.log_rates = log_rates

    def __call__(
        self, prompts: list[Any], completions: list[Any], completion_ids: list[Any] | None = None, **columns: Any
    ) -> list[float | None]:
        state = columns.get("trainer_state")
        step = getattr(state, "global_step", 0) if state is not None else 0
        # With repair episodes (repair/rollout.py) the completion holds every turn; the reward is the final answer's.
        texts = columns.get("repair_final") or completions
        evaluations = self.context.evaluate(texts, self.context.lookup(columns["id"]), step)
        if self.log_rates and callable(columns.get("log_metric")):
            for name, value in batch_metrics(evaluations).items():
                columns["log_metric"](name, value)
            health = getattr(self.context.grader, "health", None)  # reward servers (RemoteGrader)
            if callable(health):
                columns["log_metric"]("sandbox/servers_up", float(sum(s["healthy"] for s in health())))
        return [reward_value(self.__name__, e) for e in evaluations]


def build_reward_functions(
    context: RewardContext, weights: dict[str, float]
) -> tuple[list[RewardFunction], list[float]]:
    """All components in a fixed order with their weights (weight 0 = logged diagnostic)."""
    funcs = [RewardFunction(name, context, log_rates=(i == 0)) for i, name in enumerate(REWARD_NAMES)]
    return funcs, [float(weights.get(name, 0.0)) for name in REWARD_NAMES]
