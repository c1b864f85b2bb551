"""Real TRL GRPO steps on the tiny offline Qwen2 with real sandboxed rewards; resume; vLLM wiring."""

import json
from pathlib import Path

import pytest

from rust_grpo.config import load_config
from rust_grpo.problems.selection import run_format
from rust_grpo.training.train import build_trainer, grpo_args, latest_checkpoint, train

pytestmark = [pytest.mark.train, pytest.mark.slow, pytest.mark.cargo]


def tiny_config(tmp_path, *extra):
    return load_config(
        "configs/tiny-cpu.toml",
        [
            f'train.output_dir="{tmp_path / "run"}"',
            "model.warm_start_steps=0",
            "train.max_steps=2",
            "train.max_completion_length=12",
            "train.save_steps=2",
            'train.report_to=["tensorboard"]',
            "data.max_rows=2",
            *extra,
        ],
    )


def test_grpo_steps_write_metrics_samples_checkpoints_and_plots_then_resume(tmp_path):
    cfg = tiny_config(tmp_path)
    final = train(cfg)
    run = tmp_path / "run"
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "reward" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for key in (
        "rewards/format/mean",
        "rewards/build/mean",
        "rewards/hidden_tests/mean",
        "rates/build",
        "sandbox/seconds",
        "sandbox/timeouts",
        "time/reward_share",
        "entropy",
        "completions/mean_length",
    ):
        assert key in steps[0], key
    assert (final / "adapter_config.json").exists()
    assert latest_checkpoint(run).endswith("checkpoint-2")
    assert (run / "training_curves.png").stat().st_size > 10_000
    assert list(run.glob("runs/*/events.out.tfevents.*")), "TensorBoard logs"
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and set(samples[0]["rewards"]) >= {"format", "build", "own_tests"}
    assert json.loads((run / "config.json").read_text())["train"]["max_steps"] == 2

    resumed = tiny_config(tmp_path, "train.max_steps=3")
    train(resumed, resume=True)
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in steps if "reward" in r] == [1, 2, 3]  # continued, not restarted


def test_a_cpu_step_under_bf16_autocast_runs_and_keeps_float32_weights(tmp_path):
    """The SmolLM2 preset trains with bf16 autocast on the CPU (half the forward/backward time on
    AVX512-BF16): a real step runs, and the weights it saves stay float32 (autocast, not a cast)."""
    from safetensors.torch import load_file

    cfg = tiny_config(tmp_path, "train.bf16=true", "train.max_steps=1")
    final = train(cfg)
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in steps if "reward" in r] == [1]
    weights = load_file(str(final / "adapter_model.safetensors"))
    assert weights and {str(t.dtype) for t in weights.values()} == {"torch.float32"}


def test_a_kl_term_with_lora_needs_no_second_model(tmp_path):
    """The SmolLM2 preset pays a KL term (beta 0.04) to the cold start. With LoRA the reference is the
    policy with its adapter off, so the trainer holds one model in memory, and every step logs the KL."""
    cfg = tiny_config(tmp_path, "train.beta=0.04")
    trainer, _ = build_trainer(cfg, reward_funcs=[lambda completions, **_: [float(i) for i in range(len(completions))]])
    assert trainer.beta == 0.04 and trainer.ref_model is None
    trainer.train()
    kls = [log["kl"] for log in trainer.state.log_history if "kl" in log]
    assert len(kls) == 2 and all(k >= 0 for k in kls)


def test_warm_started_tiny_policy_writes_code_that_the_sandbox_grades(tmp_path):
    cfg = tiny_config(tmp_path, "model.warm_start_steps=200", "train.max_completion_length=224", "train.max_steps=1")
    train(cfg)
    (step,) = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if '"reward"' in line
    ]
    assert step["rates/format"] > 0 and step["sandbox/seconds"] > 0  # real cargo rewards were computed
    assert step["reward"] > 0


def test_vllm_settings_reach_trl(tmp_path):
    colocate = tiny_config(
        tmp_path,
        "vllm.enabled=true",
        "vllm.mode=colocate",
        "vllm.gpu_memory_utilization=0.5",
        "vllm.enable_sleep_mode=true",
    )
    args = grpo_args(colocate, [1.0] * 7)
    assert args.use_vllm and args.vllm_mode == "colocate"
    assert args.vllm_gpu_memory_utilization == 0.5 and args.vllm_enable_sleep_mode
    server = tiny_config(
        tmp_path, "vllm.enabled=true", "vllm.mode=server", 'vllm.server_base_url="http://gpu-box:8000"'
    )
    args = grpo_args(server, [1.0] * 7)
    assert args.use_vllm and args.vllm_mode == "server" and args.vllm_server_base_url == "http://gpu-box:8000"
    hostport = grpo_args(
        tiny_config(tmp_path, "vllm.enabled=true", "vllm.mode=server", "vllm.server_port=9001"), [1.0] * 7
    )
    assert (hostport.vllm_server_host, hostport.vllm_server_port) == ("127.0.0.1", 9001)
    assert not grpo_args(tiny_config(tmp_path), [1.0] * 7).use_vllm


def test_grpo_config_mapping_follows_the_preset(tmp_path):
    cfg = load_config(
        "configs/modern-1.5b.toml", [f'train.output_dir="{tmp_path}"', "vllm.enabled=false", "train.bf16=false"]
    )
    args = grpo_args(cfg, [0.5, 0.25, 0.5, 1.0, 0.5, 1.0, 2.0])
    assert (args.loss_type, args.epsilon_high, args.beta, args.num_generations) == ("dapo", 0.28, 0.0, 8)
    assert args.mask_truncated_completions and args.reward_weights == [0.5, 0.25, 0.5, 1.0, 0.5, 1.0, 2.0]


def test_vllm_without_vllm_installed_fails_with_a_clear_message(tmp_path):
    pytest.importorskip("trl")
    try:
        import vllm  # noqa: F401

        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    with pytest.raises(RuntimeError, match=r"vllm\.enabled needs vLLM: `make setup` installs its CPU build"):
        build_trainer(tiny_config(tmp_path, "vllm.enabled=true"))


def test_vllm_server_mode_on_the_cpu_is_refused_with_the_reason(tmp_path):
    pytest.importorskip("vllm")
    with pytest.raises(RuntimeError, match=r"vllm\.mode=server needs a CUDA GPU .* over NCCL"):
        build_trainer(tiny_config(tmp_path, "vllm.enabled=true", "vllm.mode=server"))


def test_eval_samples_k_per_problem_and_reports_pass_at_k(tmp_path):
    import subprocess
    import sys

    from rust_grpo.problems.schema import load_problems
    from rust_grpo.training.train import resolve_model_path

    cfg = tiny_config(tmp_path, "model.warm_start_steps=200")
    problems = load_problems(cfg.data.train, max_rows=2)
    model = resolve_model_path(cfg.model, problems, cfg.data.system_prompt)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rust_grpo.cli",
            "eval",
            "--model",
            model,
            "--dataset",
            cfg.data.train,
            "--samples",
            "2",
            "--limit",
            "2",
            "--tier",
            f"basics={Path(__file__).resolve().parents[2] / 'data' / 'basics-eval.jsonl'}",
            "--max-new-tokens",
            "224",
            "--backend",
            "hf",
            "--out",
            str(tmp_path / "eval"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert report["samples"] == 8 and report["problems"] == 4 and set(report["hidden"]) == {"pass@1", "pass@2"}
    stem = Path(cfg.data.train).stem
    assert list(report["tiers"]) == [stem, "basics"]  # --limit applies to each file
    assert all(
        t["problems"] == 2 and t["samples"] == 4 and set(t["pass_at_k"]) == {"1", "2"} for t in report["tiers"].values()
    )
    assert "| basics | 2 | 4 |" in (tmp_path / "eval" / "report.md").read_text()
    assert "basics: 2 problems" in proc.stdout
    assert report["meta"]["backend"] == "hf" and (tmp_path / "eval" / "completions.jsonl").exists()
    assert report["rates"]["format"] > 0  # the warm-started policy answers in the expected format


def test_a_sandbox_fault_leaves_completions_unscored_and_the_step_still_runs(tmp_path):
    """A dead reward server: every reward of every graded completion is None, TRL gives those
    completions no advantage instead of scoring them like broken code, and training goes on."""
    cfg = tiny_config(
        tmp_path,
        "model.warm_start_steps=200",
        "train.max_completion_length=224",
        "train.max_steps=1",
        'reward.server_url="http://127.0.0.1:9"',
        "reward.server_retries=0",
    )
    train(cfg)
    (step,) = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if '"loss"' in line
    ]
    assert step["step"] == 1  # the step ran
    assert step["sandbox/unknown"] > 0  # completions with code could not be graded...
    assert step["rates/build"] == 0  # ...and none of them is counted as built or failed
    samples = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    unknown = [s for s in samples if s["status"] == "sandbox_error"]
    assert unknown and all(v is None for s in unknown for v in s["rewards"].values())


def test_any_grpo_config_field_passes_through_the_trl_table(tmp_path):
    cfg = tiny_config(
        tmp_path, "trl.max_grad_norm=0.1", "trl.adam_beta2=0.99", 'trl.importance_sampling_level="sequence"'
    )
    args = grpo_args(cfg, [1.0] * 7)
    assert (args.max_grad_norm, args.adam_beta2, args.importance_sampling_level) == (0.1, 0.99, "sequence")


def test_eval_takes_the_runs_prompt(tmp_path):
    from rust_grpo.config import load_run_config as run_config

    cfg = tiny_config(tmp_path, 'data.system_prompt="You write Rust. SYS-MARK"')
    (tmp_path / "config.json").write_text(cfg.to_json())
    assert run_config(str(tmp_path / "config.json")).data.system_prompt.endswith("SYS-MARK")
    assert run_config("oxen-1.5b").model.name_or_path == load_config("configs/oxen-1.5b.toml").model.name_or_path


def test_the_oxen_preset_is_oxens_run():
    """Published values of the Oxen.ai run (their train.py and blog post, 2025)."""
    from rust_grpo.problems.answer_format import OXEN
    from rust_grpo.rewards.functions import REWARD_NAMES
    from rust_grpo.training.train import peft_config

    cfg = load_config("oxen-1.5b", ["train.bf16=false"])
    weights = [cfg.reward.weights.get(name, 0.0) for name in REWARD_NAMES]
    args = grpo_args(cfg, weights)
    assert cfg.model.name_or_path == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert (args.learning_rate, args.lr_scheduler_type, args.num_train_epochs) == (5e-6, "cosine", 1.0)
    assert (args.adam_beta1, args.adam_beta2, args.weight_decay, args.max_grad_norm) == (0.9, 0.99, 0.1, 0.1)
    assert (args.warmup_steps, args.max_completion_length, args.num_generations) == (0.1, 786, 4)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps, args.beta) == (1, 4, 0.04)
    lora = peft_config(cfg.lora)
    assert (lora.r, lora.lora_alpha, lora.lora_dropout, lora.target_modules) == (16, 64, 0.05, "all-linear")
    assert dict(zip(REWARD_NAMES, args.reward_weights)) == {
        "format": 0.0, "code_block": 0.0, "tests_present": 0.0, "build": 1.0, "clippy": 1.0, "own_tests": 2.0,
        "hidden_tests": 0.0, "non_empty": 1.0, "test_block": 0.5, "asserts": 1.0, "gated_build": 0.0,
        "all_hidden": 0.0, "build_using_args": 0.0,
    }  # fmt: skip
    fmt = run_format(cfg.data)
    assert fmt is OXEN and "///" in fmt.system_prompt and "<think>" not in fmt.system_prompt


def test_the_demo_compares_the_same_problems_before_and_after(tmp_path, capsys):
    """`make demo` in small: its summary scores one fixed set of problems before and after GRPO."""
    from rust_grpo.demo import run_demo

    result = run_demo(tmp_path / "demo", steps=1, samples=1)
    before, after = result["before"], result["after"]
    assert before["n"] == after["n"] == 8 and set(before) == {"n", "format", "build", "hidden tests"}
    captured = capsys.readouterr()
    assert "the same 8 problems x 1 samples" in captured.out and "too few and too noisy" in captured.out
    summary = (tmp_path / "demo" / "summary.md").read_text()
    assert "| build |" in summary and summary in captured.out  # the printed table is saved
    card = (tmp_path / "demo" / "README.md").read_text()
    assert "GRPO run of rust-grpo" in card and "[None]" not in card and "data/demo.jsonl" in card
    assert "--model <base>" not in card and "tiny-warm-" in card  # the adapter's own base, from the cache
    steps = [line for line in captured.err.splitlines() if line.startswith("step ")]
    assert steps == [steps[0]] and steps[0].startswith("step 1/1: reward")  # one line a step, no raw dicts
    assert "{'loss'" not in captured.err and "FutureWarning" not in captured.err


def test_zero_variance_groups_are_left_out_of_the_loss_and_counted(tmp_path):
    """A group whose rewards are all equal leaves the loss and its token count; the other group stays."""
    import torch

    from rust_grpo.training.trainer import zero_variance_rows

    cfg = tiny_config(
        tmp_path, "train.skip_zero_variance_groups=true", "train.per_device_train_batch_size=8", "train.max_steps=1"
    )
    first = None

    def tie_on_the_first_problem(completions, id, **_):
        return [1.0 if pid == first else float(i) for i, pid in enumerate(id)]

    trainer, _ = build_trainer(cfg, reward_funcs=[tie_on_the_first_problem])
    rows = [trainer.train_dataset[0]] * 4 + [trainer.train_dataset[1]] * 4
    first = rows[0]["id"]
    trainer.model.train()
    out = trainer._generate_and_score_completions(rows)
    kept = out["completion_mask"].sum(dim=1)
    assert kept[:4].tolist() == [0, 0, 0, 0] and all(n > 0 for n in kept[4:].tolist())
    assert int(out["num_items_in_batch"]) == int(kept.sum())
    metrics = trainer._metrics["train"]
    assert metrics["skip/zero_variance_groups"] == [1.0] and metrics["skip/frac_completions"] == [0.5]

    assert zero_variance_rows(torch.tensor([0.0, 0.0, 1.0, -1.0]), 2).tolist() == [
        True,
        True,
        False,
        False,
    ]


@pytest.mark.usefixtures("foreground")  # tests/conftest.py: the run starts as from a terminal
def test_ctrl_c_during_training_exits_130_with_how_to_resume(tmp_path):
    """A real SIGINT to a real `rust-grpo train`: one line saying how to continue, exit 130, no traceback."""
    import signal
    import subprocess
    import sys

    command = [sys.executable, "-m", "rust_grpo.cli", "train", "--config", "tiny-cpu"]
    for override in (
        f'train.output_dir="{tmp_path / "run"}"',
        "model.warm_start_steps=0",
        "train.max_steps=50",
        "train.max_completion_length=12",
        "data.max_rows=2",
    ):
        command += ["--set", override]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        before = []
        for line in proc.stderr:
            before.append(line)
            if "step 1/" in line:  # anywhere in the line, not only at its start
                break
        else:
            pytest.fail("the run ended without logging step 1:\n" + "".join(before[-20:]))
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        assert proc.wait(timeout=120) == 130, rest[-3000:]
    assert "interrupted; continue from the last checkpoint with --resume" in rest
    assert "Traceback" not in rest
