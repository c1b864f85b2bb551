"""A short supervised warm start for the tiny demo model.

A random model never writes a ```rust block, so every reward is 0 and GRPO has nothing to
compare. A few hundred supervised steps on reference answers in the expected format
(``<think>`` then one ```rust block with the code and its tests) give the policy a format
to start from; GRPO then does the rest with real sandboxed rewards. Used by ``make demo`` and
the learning benchmark, never for real models.
"""

from __future__ import annotations

import logging
import math
import random
from pathlib import Path

from .answer_format import THINK, AnswerFormat
from .data import Problem, chat_prompt

log = logging.getLogger("rust_grpo")


def reference_answer(problem: Problem, fmt: AnswerFormat = THINK) -> str:
    """The answer a good policy would give, in ``fmt``: brief reasoning, then code with its own tests."""
    tests = "\n".join("    " + line if line else "" for line in problem.tests.strip().splitlines())
    code = f"{problem.solution.rstrip()}\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n{tests}\n}}"
    return fmt.render(f"Implement {problem.signature.splitlines()[0] if problem.signature else problem.id}.", code)


def warm_start(
    model_dir: Path,
    problems: list[Problem],
    fmt: AnswerFormat,
    out_dir: Path,
    steps: int = 300,
    lr: float = 3e-3,
    batch_size: int = 4,
    seed: int = 0,
) -> Path:
    """Fine-tune ``model_dir`` on reference answers; the loss covers answer tokens only."""
    import torch
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if (out_dir / "config.json").exists():
        return out_dir
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    examples = []
    for p in problems:
        prompt = tokenizer.apply_chat_template(chat_prompt(p, fmt), tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(reference_answer(p, fmt) + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        examples.append((prompt_ids, answer_ids))
    # A full 151k-way softmax per token costs ~1.4 s a step on two cores. A sampled softmax is
    # enough here: the answers' own tokens plus fresh random negatives each step, the negatives'
    # logits corrected by log(V / k) so that the result estimates the full log-partition.
    answer_vocab = torch.tensor(sorted({t for _, answer in examples for t in answer}))
    vocab_size = model.config.vocab_size
    negatives = 2048
    correction = math.log(vocab_size / negatives)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _step in tqdm(range(steps), desc="warm start", unit="step"):
        batch = rng.sample(examples, min(batch_size, len(examples)))
        width = max(len(a) + len(b) for a, b in batch)
        ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        targets = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (prompt_ids, answer_ids) in enumerate(batch):
            seq = prompt_ids + answer_ids
            ids[i, : len(seq)] = torch.tensor(seq)
            targets[i, len(prompt_ids) - 1 : len(seq) - 1] = torch.tensor(answer_ids)  # position t predicts t+1
            mask[i, : len(seq)] = 1
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        keep = targets != -100
        sampled = torch.randint(0, vocab_size, (negatives,))
        candidates = torch.cat([answer_vocab, sampled])
        logits = hidden[keep] @ model.lm_head.weight[candidates].T
        logits[:, len(answer_vocab) :] += correction
        remap = torch.full((vocab_size,), -1)
        remap[answer_vocab] = torch.arange(len(answer_vocab))
        loss = torch.nn.functional.cross_entropy(logits, remap[targets[keep]])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    log.info("warm start: loss %.2f -> %.2f over %d steps", losses[0], sum(losses[-10:]) / min(10, len(losses)), steps)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
