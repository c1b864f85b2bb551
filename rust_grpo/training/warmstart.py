"""A short supervised warm start (cold start) on reference answers.

A random model never writes a ```rust block, so every reward is 0 and GRPO has nothing to
compare. A few hundred supervised steps on reference answers in the expected format
(``<think>`` then one ```rust block with the code and its tests) give the policy a format
to start from; GRPO then does the rest with real sandboxed rewards. Used by ``make demo`` (the
tiny model) and, as a brief SFT cold start before GRPO (as DeepSeek-R1 does), for small pretrained
models such as SmolLM2-135M in ``configs/smollm-cpu.toml`` and the learning benchmark.
"""

from __future__ import annotations

import logging
import math
import random
from pathlib import Path

from ..problems.answer_format import THINK, AnswerFormat
from ..problems.schema import Problem, chat_prompt

log = logging.getLogger("rust_grpo")


def reference_answer(problem: Problem, fmt: AnswerFormat = THINK, with_tests: bool = True) -> str:
    """The answer a good policy would give, in ``fmt``: brief reasoning, then code with its own tests
    (or, without ``with_tests``, the code alone: a third of the tokens, for slow CPU generation)."""
    tests = "\n".join("    " + line if line else "" for line in problem.tests.strip().splitlines())
    code = problem.solution.rstrip()
    if with_tests:
        code += f"\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n{tests}\n}}"
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
    negatives: int = 2048,
    with_tests: bool = True,
    answers: list[str] | None = None,
) -> Path:
    """Fine-tune ``model_dir`` (all weights) on reference answers, or on ``answers`` (one per problem,
    already in ``fmt``: the verified samples of rejection-sampling fine-tuning); the loss covers answer
    tokens only. ``negatives`` > 0 uses a sampled softmax (see below); 0 the exact one."""
    import torch
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .interrupt import raise_if_interrupted

    if (out_dir / "config.json").exists():
        return out_dir
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if answers is not None and len(answers) != len(problems):
        raise ValueError(f"{len(answers)} answers for {len(problems)} problems")
    texts = answers if answers is not None else [reference_answer(p, fmt, with_tests) for p in problems]
    examples = []
    for p, text in zip(problems, texts):
        prompt = tokenizer.apply_chat_template(chat_prompt(p, fmt), tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(text + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        examples.append((prompt_ids, answer_ids))
    # A full 151k-way softmax per token costs ~1.4 s a step on two cores. A sampled softmax is
    # enough here: the answers' own tokens plus fresh random negatives each step, the negatives'
    # logits corrected by log(V / k) so that the result estimates the full log-partition.
    answer_vocab = torch.tensor(sorted({t for _, answer in examples for t in answer}))
    vocab_size = model.config.vocab_size
    correction = math.log(vocab_size / max(negatives, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _step in tqdm(range(steps), desc="warm start", unit="step"):
        raise_if_interrupted()  # a Ctrl-C Python dropped: stop here, cache nothing half-trained
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
        if negatives <= 0:
            loss = torch.nn.functional.cross_entropy(model.lm_head(hidden[keep]), targets[keep])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            continue
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


def cold_start_policy(
    base: str, problems: list[Problem], fmt: AnswerFormat, steps: int, lr: float, with_tests: bool = True
) -> Path:
    """``base`` after ``steps`` supervised steps on ``problems``' reference answers (exact softmax),
    cached by content (base, answers, format, steps, lr) so training and every evaluation share it."""
    import hashlib
    import json

    from ..models import default_cache_dir

    key = [[p.id, p.solution, p.tests] for p in problems] + [base, fmt.name, fmt.system_prompt, steps, lr, with_tests]
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:12]
    out = default_cache_dir() / f"cold-start-{Path(base).name}-{digest}"
    if (out / "config.json").exists():
        log.info("reusing the cold-started model in %s", out)
        return out
    log.info("cold start: %d supervised steps on %d reference answers (cached in %s)", steps, len(problems), out)
    return warm_start(Path(base), problems, fmt, out, steps=steps, lr=lr, negatives=0, with_tests=with_tests)
