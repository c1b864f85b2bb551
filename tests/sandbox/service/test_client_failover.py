"""Rewards across machines: two real ``reward-sandbox serve`` processes on loopback, one killed
(SIGKILL, mid-batch); the client re-sends its share to the other, so no result is lost and none is
wrongly failed. Also: the URL forms ``reward.server_url`` accepts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from reward_sandbox import Status
from reward_sandbox.cliargs import split_urls
from reward_sandbox.service.client import RemoteGrader, RemoteGraderError, expand_url
from rust_grpo.config import RewardConfig

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from rust_grpo.rewards.sandbox import sandbox_settings

from ...conftest import ROOT
from ...serving import free_port, serving

pytestmark = [pytest.mark.cargo, pytest.mark.slow]

TOKEN = "failover-s3cret"


def healthz(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
            return json.loads(response.read())
    except OSError:
        return None


class ServerProcess:
    """A real ``reward-sandbox serve`` in its own process group (so a kill takes its sandboxes too)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "REWARD_SANDBOX_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "reward_sandbox.cli", "serve", "--port", str(self.port)]
        self.proc = subprocess.Popen(
            [*command, "--workers", "1", "--no-cache"],
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while healthz(self.url) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"server did not start: {self.proc.stderr.read().decode() if self.proc.stderr else ''}"
                )
            time.sleep(0.1)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        if self.proc.stderr:
            self.proc.stderr.close()


@pytest.fixture
def two_servers() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    servers = [ServerProcess(), ServerProcess()]
    yield servers[0], servers[1]
    for server in servers:
        server.kill()


def slow_jobs(n: int) -> list[dict]:
    """Distinct programs (no cache hit) whose test sleeps ~1 s: a share takes seconds on one worker."""
    return [
        {
            "id": f"job-{i}",
            "source": f"pub fn f() -> u32 {{ {i} }}",
            "tests": f"#[test]\nfn t() {{ std::thread::sleep(std::time::Duration::from_millis({1000 + i})); "
            f"assert_eq!(f(), {i}); }}",
        }
        for i in range(n)
    ]


def test_a_server_killed_mid_batch_loses_no_result(two_servers):
    import threading

    a, b = two_servers
    client = RemoteGrader([a.url, b.url], token=TOKEN, retries=1, backoff_s=0.1, timeout_s=120)

    def kill_b_once_it_is_grading() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            health = healthz(b.url)
            if health and health["queued"] > 0:
                b.kill()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_b_once_it_is_grading)
    killer.start()
    results = client.grade(slow_jobs(6))
    killer.join()
    assert b.proc.returncode == -signal.SIGKILL  # it really died mid-run
    assert [r.id for r in results] == [f"job-{i}" for i in range(6)]
    assert [r.status for r in results] == [Status.OK] * 6  # none lost, none blamed on the program
    health = {h["url"]: h for h in client.health()}
    assert health[b.url]["healthy"] is False and health[b.url]["failures"] >= 1
    assert health[a.url]["healthy"] is True and health[a.url]["jobs_ok"] == 6

    # the dead server stays out (cooldown): the next batch goes to the live one alone
    again = client.grade([{"id": "x", "source": "pub fn g() -> u8 { 2 }"}, {"id": "y", "source": "pub fn g( {"}])
    assert [r.status for r in again] == [Status.OK, Status.COMPILE_ERROR]

    a.kill()  # nobody left: the batch fails as a whole (rewards None), never as the programs' fault
    with pytest.raises(RemoteGraderError, match="failed after 2 tries"):
        client.grade([{"id": "z", "source": "pub fn g() -> u8 { 3 }"}])
    client.close()


def test_server_url_forms():
    assert split_urls("http://a:1, http://b:2/") == ("http://a:1", "http://b:2")
    assert split_urls(["http://a:1", "http://b:2"]) == ("http://a:1", "http://b:2")
    assert sandbox_settings(RewardConfig(server_url="http://a:1,http://b:2")).server_urls == (
        "http://a:1",
        "http://b:2",
    )
    assert sandbox_settings(RewardConfig(server_url=["http://a:1"])).server_urls == ("http://a:1",)
    assert sandbox_settings(RewardConfig()).server_urls == ()
    assert expand_url("http://127.0.0.1:8808") == ["http://127.0.0.1:8808"]
    assert expand_url("https://example.invalid:8808") == ["https://example.invalid:8808"]


def test_compose_rewards_service_can_be_scaled():
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    rewards = compose["services"]["rewards"]
    assert "container_name" not in rewards and "ports" not in rewards  # both would break --scale
    assert "--workers" in rewards["command"]
    assert compose["services"]["trainer"]["depends_on"]["rewards"]["condition"] == "service_healthy"


def test_cli_spreads_over_servers_and_reports_their_health(tmp_path, capsys, monkeypatch):
    from reward_sandbox.cli import main

    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(
        "".join(json.dumps({"id": f"j{i}", "source": f"pub fn f() -> u8 {{ {i} }}"}) + "\n" for i in range(4))
    )
    monkeypatch.setenv("REWARD_SANDBOX_TOKEN", TOKEN)
    with serving(TOKEN) as running:
        live, dead = running.url, f"http://127.0.0.1:{free_port()}"
        assert main(["run", "-i", str(jobs), "-o", str(tmp_path / "out.jsonl"), "--server", f"{live},{dead}"]) == 0
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in out] == [(f"j{i}", "ok") for i in range(4)]
    err = capsys.readouterr().err
    assert f"{live}: up, 4 jobs graded" in err and f"{dead}: down (" in err
