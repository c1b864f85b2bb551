"""TRL's colocated vLLM engine on the CPU: what TRL 1.16 needs beside its own code to run there.

TRL builds the engine in the training process (``vllm_mode="colocate"``) and, after each optimiser
step, sends it the policy's weights (LoRA merged in) one parameter at a time through the model's
``load_weights``. Two things differ on the CPU build of vLLM:

- **Weight sync.** After loading a checkpoint, the CPU build repacks linear layers for its kernels,
  replacing their parameters with plain tensors that have no ``weight_loader``; TRL's per-parameter
  ``load_weights`` then fails (``'Parameter' object has no attribute 'weight_loader'``). The model
  runner's ``reload_weights(weights_iterator=..., is_checkpoint_format=True)`` takes the same
  checkpoint-format weights, undoes the repacking, loads every layer and repacks again: one call for
  the whole model (~1 s for SmolLM2-135M on 2 cores), fed by TRL's own iterator, which merges the
  adapter while it is read and unmerges it after.
- **Engine arguments.** TRL passes a fixed set of arguments to ``vllm.LLM``; the CPU engine also
  needs eager mode (torch.compile costs 50-80 s per start) and a precision: the trainer's (bfloat16
  under ``train.bf16``, else float32) unless ``vllm.cpu_dtype`` names one. :func:`cpu_engine_arguments` adds
  them for the one call TRL makes while the trainer is built.

Server mode and sleep mode are refused on the CPU: TRL streams weights to a ``trl vllm-serve``
process over NCCL, which needs CUDA, and the CPU build has no sleep mode.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..vllm_engine import engine_kwargs, prepare_environment


def cpu_engine_bf16(cpu_dtype: str, train_bf16: bool) -> bool:
    """Whether the colocated CPU engine samples in bfloat16: as ``vllm.cpu_dtype`` says, or with ``auto``
    the trainer's own precision (``train.bf16``)."""
    return train_bf16 if cpu_dtype == "auto" else cpu_dtype == "bfloat16"


@contextmanager
def cpu_engine_arguments(seed: int, bf16: bool) -> Iterator[None]:
    """While the trainer is built, TRL's ``vllm.LLM(...)`` call also gets :func:`engine_kwargs`, and
    ``seed`` is added to the engine seed TRL passes (its process index): the CPU worker reseeds
    Python's, NumPy's and torch's generators with that seed, so without it every ``train.seed``
    would sample alike. The variables TRL sets for vLLM (RANK, WORLD_SIZE, MASTER_PORT, ...) are
    put back afterwards, so a later engine or trainer in this process is not taken for a launch."""
    prepare_environment()
    from trl.generation import vllm_generation

    original = vllm_generation.LLM

    def engine(*args: Any, **kwargs: Any) -> Any:
        kwargs["seed"] = seed + int(kwargs.get("seed") or 0)
        return original(*args, **{**kwargs, **engine_kwargs(bf16)})

    saved = dict(os.environ)
    vllm_generation.LLM = engine
    try:
        yield
    finally:
        vllm_generation.LLM = original
        os.environ.clear()
        os.environ.update(saved)


def reload_policy_weights(generation: Any) -> None:
    """Send the policy's current weights (adapter merged) to the colocated CPU engine, whole."""
    runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
    runner.reload_weights(weights_iterator=generation._iter_named_params(), is_checkpoint_format=True)
    generation.llm.reset_prefix_cache()  # cached prefixes hold the old weights' keys and values
