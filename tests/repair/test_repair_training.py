"""Repair episodes in GRPO training: the real Qwen2.5 tokenizer's masks, real TRL steps on the tiny model."""

from __future__ import annotations

import json

import pytest

from rust_grpo.config import RepairConfig, RewardConfig, load_config
from rust_grpo.problems.schema import DataError, Problem, chat_prompt
from rust_grpo.problems.selection import run_format
from rust_grpo.repair.episodes import run_episodes
from rust_grpo.repair.rollout import RepairBonus, RepairRollout, TokenPolicy, turn_metrics
from rust_grpo.rewards.context import RewardContext

from .test_repair import COMPILE_ERROR, PROBLEM, RIGHT

pytestmark = [pytest.mark.cargo]


@pytest.fixture(scope="module")
def tokenizer():
    from rust_grpo.training.tiny import build_qwen25_tokenizer

    return build_qwen25_tokenizer()


def scripted_generator(tokenizer, script, eos, logprobs=False, truncate_first=False):
    """Stands in for the trainer's generator: the same fixed answer for every episode at each turn."""
    calls = []

    def generate(inputs, n):
        calls.append((inputs, n))
        ids = tokenizer(script[len(calls) - 1], add_special_tokens=False)["input_ids"]
        ids = ids if truncate_first and len(calls) == 1 else [*ids, eos]
        return [list(ids) for _ in inputs], ([[-0.5] * len(ids) for _ in inputs] if logprobs else None)

    return generate, calls


def test_the_loss_mask_covers_the_models_answers_and_not_the_feedback(grader, tokenizer):
    chat = chat_prompt(PROBLEM)
    prompt = list(
        tokenizer.apply_chat_template(chat, tokenize=True, add_generation_prompt=True, return_dict=True)["input_ids"]
    )
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    generate, calls = scripted_generator(tokenizer, [COMPILE_ERROR, RIGHT], eos, logprobs=True)
    policy = TokenPolicy(tokenizer, [prompt, prompt], generate, 2, [eos])
    (episode, _) = run_episodes(policy, [PROBLEM] * 2, RewardContext(grader), RewardConfig().weights, max_turns=2)
    told = episode.turns[0].feedback
    assert told is not None and "error[E0425]" in told and [n for _, n in calls] == [2, 1]

    ids, mask = policy.completion_ids[0], policy.masks[0]
    assert len(ids) == len(mask) and policy.logprobs is not None and len(policy.logprobs[0]) == len(ids)
    model_tokens = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    feedback_tokens = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    assert model_tokens == f"{COMPILE_ERROR}<|im_end|>{RIGHT}<|im_end|>"
    assert feedback_tokens == f"\n<|im_start|>user\n{told}<|im_end|>\n<|im_start|>assistant\n"
    assert all(lp == 0.0 for lp, m in zip(policy.logprobs[0], mask) if not m)
    assert all(lp == -0.5 for lp, m in zip(policy.logprobs[0], mask) if m)
    # The episode is token for token the conversation the chat template renders, and what turn 2 saw.
    conversation = [
        *chat,
        {"role": "assistant", "content": COMPILE_ERROR},
        {"role": "user", "content": told},
        {"role": "assistant", "content": RIGHT},
    ]
    rendered = tokenizer.apply_chat_template(conversation, tokenize=False)
    assert tokenizer.decode(prompt + ids) == rendered.rstrip("\n")
    second_input = calls[1][0][0]
    assert (
        second_input == prompt + ids[: len(second_input) - len(prompt)]
        and mask[len(second_input) - len(prompt) - 1] == 0
    )


def test_a_truncated_answer_is_closed_by_a_masked_end_of_turn(grader, tokenizer):
    prompt = [1, 2, 3]
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    generate, _ = scripted_generator(tokenizer, [COMPILE_ERROR[:40], RIGHT], eos, truncate_first=True)
    policy = TokenPolicy(tokenizer, [prompt], generate, 1, [eos])
    run_episodes(policy, [PROBLEM], RewardContext(grader), {}, max_turns=2)
    first = len(tokenizer(COMPILE_ERROR[:40], add_special_tokens=False)["input_ids"])
    assert policy.completion_ids[0][first] == eos and policy.masks[0][first] == 0
    assert policy.logprobs is None  # the HF path has none


def test_the_rollout_finds_each_prompts_problem_and_refuses_ambiguous_prompts(grader):
    twin = Problem(id="twin", prompt=PROBLEM.prompt, tests="")
    with pytest.raises(DataError, match="'add' and 'twin' have the same prompt"):
        RepairRollout(RewardContext(grader), [PROBLEM, twin], [chat_prompt(PROBLEM)] * 2, {}, RepairConfig())
    rollout = RepairRollout(RewardContext(grader), [PROBLEM], [chat_prompt(PROBLEM)], {}, RepairConfig())
    assert rollout.problem_for(chat_prompt(PROBLEM)) is PROBLEM
    with pytest.raises(DataError, match="not in the training set"):
        rollout.problem_for([{"role": "user", "content": "other"}])


def test_turn_metrics_and_the_bonus_reward():
    turns = [[(0.5, False), (3.0, True)], [(4.0, True)], [(0.0, False), (None, False)]]
    m = turn_metrics(turns, 2)
    assert m["repair/pass_turn0"] == pytest.approx(1 / 3) and m["repair/pass_turn1"] == pytest.approx(2 / 3)
    assert m["repair/reward_turn1"] == pytest.approx(3.5) and m["repair/repaired"] == pytest.approx(1 / 3)
    logged = {}
    rewards = RepairBonus(2)(
        [], ["a", "b", "c"], repair_bonus=[0.2, 0.0, None], repair_turns=turns, log_metric=logged.__setitem__
    )
    assert rewards == [0.2, 0.0, None] and logged["repair/turns"] == pytest.approx(5 / 3)


@pytest.mark.slow
@pytest.mark.train
def test_two_step_grpo_with_two_turn_repair_episodes(tmp_path):
    """`rust-grpo train --config configs/tiny-cpu.toml --set repair.enabled=true --set repair.max_turns=2`, small."""
    from rust_grpo.training.train import build_trainer, train

    cfg = load_config(
        "configs/tiny-cpu.toml",
        [
            f'train.output_dir="{tmp_path / "run"}"',
            "model.warm_start_steps=0",
            "train.max_steps=2",
            "train.max_completion_length=16",
            "train.save_steps=2",
            "data.max_rows=2",
            "repair.enabled=true",
            "repair.max_turns=2",
        ],
    )
    train(cfg)
    run = tmp_path / "run"
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [s for s in steps if "loss" in s]
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["repair/turns"] == 2.0 for s in steps)  # a random model never passes: every episode is repaired once
    assert "repair/pass_turn1" in steps[0] and "rewards/repair_bonus/mean" in steps[0]
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and all(len(s["turns"]) == 2 for s in samples)
    first, second = samples[0]["turns"]
    assert first["feedback"].startswith("Your answer did not pass.") and second["feedback"] is None
    assert set(first["rewards"]) >= {"format", "build"} and samples[0]["completion"] == second["completion"]
    # The loss saw both answers but not the feedback: TRL's completion holds all three, the mask only the answers.
    trainer, _ = build_trainer(cfg)
    batch = trainer._generate_and_score_completions([dict(row) for row in trainer.train_dataset.select([0, 0, 0, 0])])
    mask, tool_mask = batch["completion_mask"], batch["tool_mask"]
    assert (tool_mask * mask).sum() < mask.sum() and ((1 - tool_mask) * mask).sum() > 0


@pytest.mark.slow
@pytest.mark.train
def test_eval_with_repair_turns_reports_pass_at_1_after_each_turn(tmp_path):
    import subprocess
    import sys

    from rust_grpo.problems.schema import load_problems
    from rust_grpo.training.train import resolve_model_path

    cfg = load_config("configs/tiny-cpu.toml", ["model.warm_start_steps=200"])
    model = resolve_model_path(cfg.model, load_problems(cfg.data.train), run_format(cfg.data))
    out = tmp_path / "eval"
    command = [sys.executable, "-m", "rust_grpo.cli", "eval", "--model", str(model), "--dataset", cfg.data.train]
    command += ["--samples", "2", "--limit", "3", "--max-new-tokens", "224", "--repair-turns", "2", "--out", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "hidden-test pass@1 after turn 0" in proc.stdout
    report = json.loads((out / "report.json").read_text())
    per_turn = report["repair"]["per_turn"]
    assert [t["turn"] for t in per_turn] == [0, 1] and report["meta"]["repair_turns"] == 2
    assert per_turn[1]["pass@1"] >= per_turn[0]["pass@1"] and per_turn[0]["episodes_answering"] == 6
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 6
    for r in records:
        first = r["turns"][0]
        assert (first["feedback"] is None) == (first["passed"] or len(r["turns"]) == 1)
        assert len(r["turns"]) == (1 if first["passed"] else 2) and r["turns"][-1]["completion"]
    assert per_turn[1]["episodes_answering"] == sum(len(r["turns"]) == 2 for r in records)
    assert "After each turn" in (out / "report.md").read_text() and (out / "report.png").stat().st_size > 10_000
    completions = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert all(c["completion"] == c["turns"][-1]["completion"] for c in completions)
    bad = subprocess.run([*command[:-2], "--repair-turns", "0"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "argument --repair-turns: 0 is below 1" in bad.stderr


def test_lockstep_generation_asks_for_every_episode_every_turn(grader, tokenizer):
    """Several processes gather prompts for vLLM: each must generate alike, even with no episode left."""
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    generate, calls = scripted_generator(tokenizer, [COMPILE_ERROR, RIGHT, RIGHT], eos)
    policy = TokenPolicy(tokenizer, [[1], [2]], generate, 2, [eos], lockstep=True)
    episodes = run_episodes(policy, [PROBLEM] * 2, RewardContext(grader), {}, max_turns=3, lockstep=True)
    assert [len(inputs) for inputs, _ in calls] == [2, 2, 2]  # three turns asked for both episodes
    assert [len(e.turns) for e in episodes] == [2, 2] and all(e.final.passed for e in episodes)
    assert policy.masks[0].count(0) > 0 and len(policy.completion_ids[0]) == len(policy.masks[0])
