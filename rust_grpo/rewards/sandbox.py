"""The run's ``[reward]`` section as the sandbox's :class:`reward_sandbox.Settings`.

The fields the two share are mapped by name; ``timeout_s`` is not among them: it reaches the
sandbox on every job (``RewardContext.from_config``), the one route that a reward server honours too.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from reward_sandbox import GraderLike, Settings, open_grader
from reward_sandbox.cliargs import split_urls

if TYPE_CHECKING:
    from ..config import RewardConfig


def sandbox_settings(reward: RewardConfig) -> Settings:
    """Where and how to grade: a local pool, or the ``server_url`` servers (validated at load time)."""
    shared = {f.name for f in dataclasses.fields(Settings)}
    return Settings(
        **{f.name: getattr(reward, f.name) for f in dataclasses.fields(reward) if f.name in shared},
        server_urls=split_urls(reward.server_url),
    )


def open_run_grader(reward: RewardConfig) -> GraderLike:
    """The grader a run's rewards use (close it, or use it as a context manager)."""
    return open_grader(sandbox_settings(reward))
