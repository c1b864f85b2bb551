"""transformers `generate` as the eval path runs it: it stops where vLLM and TRL stop."""

import json
import shutil

import pytest

from rust_grpo.evaluation.sampling import SamplingSettings, end_tokens, generate_hf, load_hf
from rust_grpo.problems.schema import load_problems
from rust_grpo.problems.selection import run_format
from rust_grpo.training.train import resolve_model_path

from .test_train import tiny_config

pytestmark = [pytest.mark.train, pytest.mark.slow]


def test_answers_end_at_the_tokenizers_end_token_when_the_generation_config_names_another(tmp_path):
    """A checkpoint whose generation config names another end token than its tokenizer (SmolLM2 read
    by transformers 5.17 was one) answers exactly as before: generation stops at the tokenizer's end
    too, instead of running on to the token budget."""
    cfg = tiny_config(tmp_path, "model.warm_start_steps=200", "model.warm_start_tests=false")  # short answers
    problems = load_problems(cfg.data.train, max_rows=2)
    model = resolve_model_path(cfg.model, problems, run_format(cfg.data))
    other = tmp_path / "other-end"
    shutil.copytree(model, other)
    gen = json.loads((other / "generation_config.json").read_text())
    vocab = json.loads((other / "config.json").read_text())["vocab_size"]
    gen["eos_token_id"] = vocab - 1  # a token the model never writes, not the tokenizer's <|im_end|>
    (other / "generation_config.json").write_text(json.dumps(gen))
    greedy = SamplingSettings(samples=1, max_new_tokens=160, temperature=0.0, top_p=1.0, dtype="float32")
    want = [c.text for c in generate_hf(model, problems, greedy, run_format(cfg.data))]
    got = [c.text for c in generate_hf(str(other), problems, greedy, run_format(cfg.data))]
    assert got == want and all("```" in t for t in want), (got, want)
    # the tiny model repeats its end token once past it (skipped when decoded), so the texts alone
    # would agree without the fix too: the ends that generate is given are checked as well
    reloaded, tokenizer, _ = load_hf(str(other))
    assert end_tokens(reloaded, tokenizer) == sorted({tokenizer.eos_token_id, vocab - 1})
