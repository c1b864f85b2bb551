from pathlib import Path

import pytest

from rust_grpo.config import ConfigError, RewardConfig, load_config
from rust_grpo.problems.schema import DataError
from rust_grpo.problems.selection import run_format, training_problems

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert cfg.train.num_generations >= 2


def test_presets_say_what_they_claim():
    oxen = load_config("configs/oxen-1.5b.toml")
    assert oxen.model.name_or_path == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert (oxen.lora.r, oxen.lora.alpha, oxen.lora.target_modules) == (16, 64, "all-linear")
    assert (oxen.train.num_generations, oxen.train.learning_rate, oxen.train.beta, oxen.train.loss_type) == (
        4,
        5e-6,
        0.04,
        "grpo",
    )
    modern = load_config("configs/modern-1.5b.toml")
    assert modern.vllm.enabled and modern.vllm.mode == "colocate"
    assert modern.train.epsilon_high > modern.train.epsilon and modern.train.loss_type == "dapo"
    assert modern.train.num_generations > oxen.train.num_generations
    assert load_config("configs/tiny-cpu.toml").model.tiny


def test_overrides_are_typed_toml_values():
    cfg = load_config(
        "configs/tiny-cpu.toml", ["train.learning_rate=1e-5", "train.output_dir=/tmp/x", "reward.weights={build=3}"]
    )
    assert cfg.train.learning_rate == 1e-5
    assert cfg.train.output_dir == "/tmp/x"
    assert cfg.reward.weights["build"] == 3.0 and cfg.reward.weights["format"] == 0.5
    assert cfg.reward.weights["gated_build"] == 1.0  # the preset's, kept: a table override is merged


def test_a_table_override_changes_only_the_keys_it_names():
    """`--set 'reward.weights={hidden_tests=2}'` on a preset keeps the preset's other weights; it once
    replaced the table, so format, clippy and own_tests fell back to the code's defaults unseen."""
    preset = load_config("configs/smollm-cpu.toml")
    cfg = load_config("configs/smollm-cpu.toml", ["reward.weights={hidden_tests=2.0,build_using_args=1}"])
    assert cfg.reward.weights == {**preset.reward.weights, "hidden_tests": 2.0, "build_using_args": 1.0}
    assert cfg.reward.weights["own_tests"] == 0.0 != RewardConfig().weights["own_tests"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.lr=1"], "unknown key train.lr"),
        (["nope.x=1"], "unknown section [nope]"),
        (["train.max_steps=many"], "train.max_steps must be int"),
        (["train.num_generations=3"], "must be divisible by train.num_generations (3)"),
        (["train.num_generations=1"], "num_generations must be >= 2"),
        (["reward.weights={speed=1}"], "unknown reward(s) ['speed']"),
        (["vllm.mode=remote"], "vllm.mode must be colocate or server"),
        (["reward.isolation=none"], "reward.isolation must be"),
        (["reward.timeout_s=400"], "reward.timeout_s: the test timeout must be in (0, 300]"),
        (["train.max_steps=-3"], "train.max_steps must be a positive number of steps, or -1"),
        (["train.learning_rate=-1"], "train.learning_rate must be positive"),
        (["train.learnig_rate=1"], "did you mean learning_rate?"),
        (["trl.max_grad_nrm=0.1"], "not a GRPOConfig field of TRL (did you mean max_grad_norm?)"),
        (["trl.learning_rate=0.1"], "use train.learning_rate"),
        (["reward.timeout_s=0"], "reward.timeout_s"),
        (["reward.workers=-1"], "reward.workers must be 0"),
        (["learning_rate=1"], "use section.key=value"),
        (['data.offer_crates=["regex", "tokio"]'], "data.offer_crates: crate(s) tokio not in the available set"),
        (['data.offer_crates="everything"'], "crate(s) everything not in the available set"),
    ],
)
def test_bad_configs_fail_with_the_key_and_the_fix(overrides, message):
    with pytest.raises(ConfigError) as info:
        load_config("configs/tiny-cpu.toml", overrides)
    assert message in str(info.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[train\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(bad)


def test_offered_crates_reach_the_training_and_eval_prompts(tmp_path):
    from reward_sandbox.compile.crateset import CURATED
    from rust_grpo.config import load_run_config
    from rust_grpo.problems.schema import Problem, to_training_rows

    def asked(fmt):
        (row,) = to_training_rows([Problem(id="p", prompt="Add two numbers.")], fmt)
        return row["prompt"][1]["content"]

    cfg = load_config("configs/tiny-cpu.toml", ['data.offer_crates="all"'])
    note = f"You may use these crates (already available, no Cargo.toml needed): {', '.join(CURATED)}."
    assert note in asked(run_format(cfg.data))  # what `rust-grpo train` builds its rows with
    (tmp_path / "config.json").write_text(cfg.to_json())
    # `rust-grpo eval --config RUN/config.json` asks with the run's format: the very same prompt
    assert asked(run_format(load_run_config(str(tmp_path / "config.json")).data)) == asked(run_format(cfg.data))
    picked = run_format(load_config("configs/tiny-cpu.toml", ['data.offer_crates=["serde-json", "regex"]']).data)
    assert picked.crates == ("regex", "serde_json") and "regex, serde_json. No other crate" in asked(picked)
    assert "crate" not in asked(run_format(load_config("configs/tiny-cpu.toml").data))  # the default: std only


def test_training_problems_from_several_files_with_unique_ids(tmp_path):
    cfg = load_config("configs/smollm-cpu.toml")
    assert cfg.data.train == ["data/train.jsonl", "data/basics-train.jsonl"]
    ids = [p.id for p in training_problems(cfg.data)]
    assert len(ids) == len(set(ids)) and {"add_two", "sum_of_evens"} <= set(ids)  # a basics and a core problem
    assert all(len(p.solution) <= 250 for p in training_problems(cfg.data))  # the length cap holds for every file
    capped = training_problems(load_config("configs/smollm-cpu.toml", ["data.max_rows=5", "data.shuffle_seed=1"]).data)
    assert len(capped) == 5 and [p.id for p in capped] != ids[:5]  # shuffled across the files, then capped
    twice = load_config(
        "configs/smollm-cpu.toml", ['data.train=["data/basics-train.jsonl", "data/basics-train.jsonl"]']
    )
    with pytest.raises(DataError, match="add_two"):
        training_problems(twice.data)
    with pytest.raises(ConfigError, match=r"data\.train names no training problems"):
        load_config("configs/smollm-cpu.toml", ["data.train=[]"])


def test_the_configuration_reference_page_is_generated_from_the_fields_help():
    from .conftest import ROOT, run_script

    proc = run_script("scripts/config_reference.py", "--check")
    assert proc.returncode == 0, proc.stderr
    page = (ROOT / "docs" / "config.md").read_text()
    assert "| `cpu_dtype` |" in page and "| `timeout_s` |" in page and "[trl]" in page
