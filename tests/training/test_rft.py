"""Rejection-sampling fine-tuning (rust_grpo/training/rft.py): only sandbox-verified answers to
training problems are trained on."""

from __future__ import annotations

import pytest

from rust_grpo.config import ConfigError, load_config
from rust_grpo.problems.selection import run_format, training_problems
from rust_grpo.training.rft import verified_answers


def record(pid: str, hidden_pass: bool, format_ok: bool = True) -> dict[str, object]:
    return {"problem_id": pid, "hidden_pass": hidden_pass, "format_ok": format_ok}


def test_only_answers_passing_every_hidden_test_in_format_are_kept_distinct_and_capped() -> None:
    records = [
        record("a", True),
        record("a", True),  # the same answer again, up to whitespace
        record("a", False),  # fails a hidden test
        record("a", True, format_ok=False),  # passes, but outside the answer format
        record("a", True),
        record("a", True),  # a third distinct passing answer: over the cap of 2
        record("b", True),
    ]
    texts = ["x + 1", "x  +\n1", "x + 2", "x + 1 ", "1 + x", "x - -1", "y"]
    assert verified_answers(records, texts, max_per_problem=2) == [("a", "x + 1"), ("a", "1 + x"), ("b", "y")]


def test_rft_samples_training_files_only() -> None:
    with pytest.raises(ConfigError, match=r"rft.train names \['data/eval.jsonl'\], not files of data.train"):
        load_config("smollm-cpu", ['rft.train=["data/eval.jsonl"]'])
    with pytest.raises(ConfigError, match=r"rft\.samples must be >= 0"):
        load_config("smollm-cpu", ["rft.samples=-1"])


def test_rft_train_paths_are_compared_as_paths_and_must_select_a_training_problem() -> None:
    from rust_grpo.problems.schema import load_problems
    from rust_grpo.training.rft import rft_policy

    cfg = load_config("smollm-cpu", ['rft.train=["./data/basics-train.jsonl"]', "rft.samples=8"])  # the same file
    core_only = load_problems("data/train.jsonl")[:3]
    with pytest.raises(RuntimeError, match="selects none of the 3 training problems"):
        rft_policy("unused", cfg, core_only)


@pytest.mark.slow
@pytest.mark.train
def test_rft_fine_tunes_on_sandbox_verified_samples_and_is_cached(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The warm-started tiny model answers the demo problems right some of the time: RFT samples it,
    the real sandbox grades every sample, and the policy is fine-tuned on the verified ones only."""
    import json
    from pathlib import Path

    import torch
    from transformers import AutoModelForCausalLM

    from rust_grpo.training.rft import rft_policy
    from rust_grpo.training.train import resolve_model_path

    cfg = load_config(
        "tiny-cpu", ["rft.samples=4", "rft.max_per_problem=2", "rft.max_new_tokens=224", "data.canary_share=0.25"]
    )
    problems = training_problems(cfg.data)[:4]
    policy = resolve_model_path(cfg.model, problems, run_format(cfg.data))  # the shared cache: built once
    assert rft_policy(policy, load_config("tiny-cpu"), problems) == policy  # rft.samples = 0: no stage
    monkeypatch.setenv("RUST_GRPO_CACHE", str(tmp_path / "cache"))
    out = rft_policy(policy, cfg, problems)
    assert out != policy
    kept = [json.loads(line) for line in (Path(out) / "answers.jsonl").read_text(encoding="utf-8").splitlines()]
    assert kept, "the warm-started tiny model should pass some demo problem's hidden tests"
    ids = [k["problem_id"] for k in kept]
    assert set(ids) <= {p.id for p in problems} and max(ids.count(i) for i in ids) <= 2
    draw = json.loads((Path(out) / "draw.json").read_text())
    assert draw["canaries_seen"] == 4 and draw["canary_passes"] == 0  # one canary row, sampled 4 times
    assert draw["answers_kept"] == len(kept) and draw["sandbox_errors"] == 0
    assert not list(Path(out).parent.glob("*.partial"))  # renamed into place once complete
    before = AutoModelForCausalLM.from_pretrained(policy).model.embed_tokens.weight
    after = AutoModelForCausalLM.from_pretrained(out).model.embed_tokens.weight
    assert not torch.equal(before, after)
    stamps = [(Path(out) / name).stat().st_mtime_ns for name in ("config.json", "answers.jsonl")]
    assert rft_policy(policy, cfg, problems) == out  # cached: no second sampling or training
    assert [(Path(out) / name).stat().st_mtime_ns for name in ("config.json", "answers.jsonl")] == stamps


@pytest.mark.slow
@pytest.mark.train
def test_a_sandbox_fault_during_rft_is_an_error_never_a_cached_none_passed(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """No reward server answers: RFT fails loudly and caches nothing, so the next run samples again
    instead of starting GRPO from a policy that 'never passed'."""
    from rust_grpo.training.rft import rft_policy
    from rust_grpo.training.train import resolve_model_path

    server = ['reward.server_url="http://127.0.0.1:9"', "reward.server_retries=0"]  # nothing listens there
    cfg = load_config("tiny-cpu", ["rft.samples=4", "rft.max_new_tokens=224", *server])
    problems = training_problems(cfg.data)[:4]  # the first test's: its warm start is cached
    policy = resolve_model_path(cfg.model, problems, run_format(cfg.data))
    monkeypatch.setenv("RUST_GRPO_CACHE", str(tmp_path / "cache"))
    with pytest.raises(RuntimeError, match=r"RFT: the sandbox failed to grade (\d+) of the \1 answers it was sent"):
        rft_policy(policy, cfg, problems)
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.name in ("none-passed", "config.json")]
    assert not [p for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".partial") and p.name != ".lock"]


@pytest.mark.cargo
def test_rft_samples_canaries_never_trains_on_them_and_a_cheat_stops_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Graded by the real sandbox: a program that reads its test thread's name passes count_set_bits
    (RFT alone would train on it) and its canary; the canary pass stops RFT and is written down.
    The honest answer passes the real problem and never a canary."""
    from pathlib import Path

    from rust_grpo.evaluation.scoring import Completion
    from rust_grpo.training.canaries import make_canaries
    from rust_grpo.training.rft import check_draw, grade_draw

    from .test_training_signal import CHEAT

    source = [line for line in Path("data/train.jsonl").read_text().splitlines() if '"id": "count_set_bits"' in line]
    (tmp_path / "one.jsonl").write_text("\n".join(source) + "\n")
    cfg = load_config("tiny-cpu", [f'data.train="{tmp_path / "one.jsonl"}"', "data.canary_share=0.5"])
    sampled = training_problems(cfg.data) + make_canaries(training_problems(cfg.data), 0.5, cfg.train.seed)
    assert [p.id for p in sampled] == ["count_set_bits", "count_set_bits#canary"]
    cheat = grade_draw([Completion(p.id, CHEAT, i) for p in sampled for i in range(2)], sampled, cfg)
    assert cheat.answers == [("count_set_bits", CHEAT)]  # it passes the real hidden tests
    assert cheat.canaries_seen == 2 and len(cheat.canary_passes) == 2
    with pytest.raises(RuntimeError, match="2 of 2 answers to canary rows passed every hidden test"):
        check_draw(cheat, cfg, tmp_path / "rft")
    assert len((tmp_path / "rft" / "canaries.jsonl").read_text().splitlines()) == 2
    check_draw(cheat, load_config("tiny-cpu", ["train.canary_action=warn"]), tmp_path / "warn")  # goes on
    honest_text = CHEAT.replace(
        'if name.ends_with("case_5") { n.count_ones() + 1 } else { n.count_ones() }', "n.count_ones()"
    )
    honest = grade_draw([Completion(p.id, honest_text, 0) for p in sampled], sampled, cfg)
    assert honest.answers == [("count_set_bits", honest_text)] and honest.canary_passes == []
