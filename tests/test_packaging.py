"""What a user gets from a wheel: the presets, the shipped data and the sandbox runner's source."""

import subprocess
import sys
import zipfile

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.slow


def test_the_wheel_ships_presets_data_and_the_runner(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("rust_grpo-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("rust_grpo/configs/tiny-cpu.toml", "rust_grpo/configs/oxen-1.5b.toml", "rust_grpo/data/demo.jsonl",
                 "rust_grpo/data/eval.jsonl", "reward_sandbox/isolation/runner.c", "rust_grpo/__init__.py"):  # fmt: skip
        assert name in names, name


def test_presets_and_their_data_load_from_any_directory(tmp_path):
    code = (
        "from rust_grpo import load_config, load_problems\n"
        "cfg = load_config('tiny-cpu')\n"
        "print(len(load_problems(cfg.data.train)), len(load_problems('data/eval.jsonl')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["8", "41"]
