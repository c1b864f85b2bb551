"""rust_grpo: teach code models to write correct Rust with GRPO and sandboxed cargo rewards.

The public API, importable without torch (training modules load it when used)::

    from rust_grpo import load_config, load_problems, score_completions
    cfg = load_config("configs/tiny-cpu.toml", ["train.max_steps=2"])

See ARCHITECTURE.md for how a dataset row becomes a reward.
"""

from .config import ConfigError, RunConfig, load_config
from .evaluation.scoring import Completion, score_completions, summarize
from .problems.parsing import ParsedCompletion, parse_completion
from .problems.schema import DataError, Problem, load_problems
from .rewards.context import RewardContext
from .rewards.functions import REWARD_NAMES
from .rewards.trl_rewards import build_reward_functions
from .rewards.verdict import Evaluation

__all__ = [
    "REWARD_NAMES",
    "Completion",
    "ConfigError",
    "DataError",
    "Evaluation",
    "ParsedCompletion",
    "Problem",
    "RewardContext",
    "RunConfig",
    "build_reward_functions",
    "load_config",
    "load_problems",
    "parse_completion",
    "score_completions",
    "summarize",
]
__version__ = "0.1.0"
