"""Training across processes: ``accelerate launch`` with the shipped DDP config runs ``rust-grpo
train`` unchanged on 2 CPU ranks (gloo), real GRPO steps of the tiny preset, grading on a real
reward server. Metrics and samples are written once (by rank 0), a checkpoint is saved, and each
completion is graded once, not once per rank."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reward_sandbox import Grader
from reward_sandbox.cache import ResultCache
from reward_sandbox.grader import default_workers

from ..conftest import ROOT, TEST_LIMITS

ACCELERATE_CONFIGS = ROOT / "configs" / "accelerate"


@pytest.mark.cargo
def test_sandbox_workers_are_divided_among_the_ranks_of_a_node(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert default_workers() == cores
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert default_workers() == max(1, cores // 2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(cores * 4))  # more ranks than cores: still one each
    assert default_workers() == 1
    with Grader(cache=ResultCache(), limits=TEST_LIMITS) as grader:
        assert grader.workers == 1


def test_the_accelerate_configs_load_with_the_engine_they_name():
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import load_config_from_file

    expected = {"ddp": "MULTI_GPU", "deepspeed-zero2": "DEEPSPEED", "deepspeed-zero3": "DEEPSPEED", "fsdp": "FSDP"}
    for name, engine in expected.items():
        config = load_config_from_file(str(ACCELERATE_CONFIGS / f"{name}.yaml"))
        assert config.distributed_type.value == engine, name
    zero = {n: load_config_from_file(str(ACCELERATE_CONFIGS / f"deepspeed-zero{n}.yaml")) for n in (2, 3)}
    assert [zero[n].deepspeed_config["zero_stage"] for n in (2, 3)] == [2, 3]


@pytest.mark.slow
@pytest.mark.train
@pytest.mark.cargo
def test_two_ranks_train_with_metrics_and_samples_written_once(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("uvicorn")
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or shutil.which("accelerate")
    if accelerate is None:
        pytest.skip("accelerate CLI not installed")
    from reward_sandbox.service.server import ServerOptions

    from ..serving import serving

    run = tmp_path / "run"
    overrides = [
        f"train.output_dir={run}",
        "model.warm_start_steps=200",  # the same warm start as tests/training/test_train.py (cached once for both)
        "data.max_rows=2",
        "train.max_steps=2",
        "train.max_completion_length=224",
        "train.save_steps=2",
        "train.report_to=[]",
        "reward.server_url=URL",  # set below, once the server runs
    ]
    command = [accelerate, "launch", "--config_file", str(ACCELERATE_CONFIGS / "ddp.yaml"), "--num_processes", "2"]
    command += ["--mixed_precision", "no", "-m", "rust_grpo.cli", "train", "--config", "configs/tiny-cpu.toml"]
    command += [arg for override in overrides for arg in ("--set", override)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    with serving(None, ServerOptions(read_timeout_s=60)) as running:
        command[command.index("reward.server_url=URL")] = f"reward.server_url={running.url}"
        server = running.server
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.count("final model:") == 2  # both ranks ran to the end

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "reward" in r]
    assert [r["step"] for r in steps] == [1, 2]  # one line per step, not one per rank
    assert all(r["sandbox/servers_up"] == 1 for r in steps)  # the reward server's health, per step
    assert (run / "checkpoint-2").is_dir() and (run / "final" / "adapter_config.json").exists()
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    per_step = {s["step"]: 0 for s in samples}
    for s in samples:
        per_step[s["step"]] += 1
    assert per_step and max(per_step.values()) <= 4  # samples_per_step of one rank, not of two

    # Each completion graded once: 2 steps x 2 ranks x 4 completions = 16 programs at most, plus the
    # wrong-version gradings (TRL averages that count over the 2 ranks, hence x 2).
    service = server.config.app.service
    sent = sum(service.statuses.values())
    mutants = round(sum(r["sandbox/mutant_gradings"] for r in steps) * 2)
    assert 0 < sent - mutants <= 16, (sent, mutants)
