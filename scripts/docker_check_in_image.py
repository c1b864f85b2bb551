"""What ``make docker-check`` runs inside the built CPU image (copied in by scripts/docker_check.sh).

``no-torch``: the CPU image must not carry torch (score does not need it).
``score DATA OUT``: ``rust-grpo score`` on three problems' reference solutions plus one wrong
answer, into OUT, with the PNG report (matplotlib).
``serve CMD_JSON``: the image's default command, exactly as configured: without a token it must
stop with one line and exit 2; with one it must listen on every address, answer /healthz and
grade a job for the token's holder (a 401 without it), and exit 0 on SIGTERM.
Standard library and the image's own packages only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

TOKEN = "docker-check-token"
JOB = {
    "id": "ok",
    "source": "pub fn add(a: i32, b: i32) -> i32 { a + b }",
    "tests": "#[test]\nfn t() { assert_eq!(add(2, 2), 4); }",
}


def check_no_torch() -> None:
    found = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
    assert not found, "torch is installed in the CPU image"
    print("no torch in the image")


def check_score(data: Path, out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="score-check-"))
    problems = [json.loads(line) for line in data.read_text().splitlines()[:3]]
    completions = [{"problem_id": p["id"], "code": p["solution"]} for p in problems]
    completions.append({"problem_id": problems[0]["id"], "code": "pub fn nothing() {}", "sample": 1})
    (work / "completions.jsonl").write_text("".join(json.dumps(c) + "\n" for c in completions))
    dataset = work / "problems.jsonl"
    dataset.write_text("".join(json.dumps(p) + "\n" for p in problems))
    proc = subprocess.run(
        ["rust-grpo", "score", str(work / "completions.jsonl"), "--dataset", str(dataset), "--out", str(out), "-q"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(proc.stdout + proc.stderr, end="")
    assert proc.returncode == 0, proc.returncode
    png = (out / "report.png").read_bytes()
    assert png.startswith(b"\x89PNG"), "report.png is not a PNG"
    report = json.loads((out / "report.json").read_text())
    assert report["samples"] == 4 and report["rates"]["hidden_tests"] == 0.75, report["rates"]
    print(f"score ok: report.png {len(png)} bytes, hidden-test rate {report['rates']['hidden_tests']:.2f}")


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def check_serve(cmd: list[str]) -> None:
    bare = {k: v for k, v in os.environ.items() if not k.startswith("REWARD_SANDBOX_TOKEN")}
    refused = subprocess.run(cmd, env=bare, capture_output=True, text=True, timeout=120)
    print(f"default command without a token: exit {refused.returncode}: {refused.stderr.strip()}")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    server = subprocess.Popen(cmd, env={**bare, "REWARD_SANDBOX_TOKEN": TOKEN}, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        banner = ""  # after the fallback warning where bubblewrap is refused (as in buildah's chroot)
        while "serving on" not in banner and (line := server.stderr.readline()):
            banner = line.strip()
            print(banner)
        assert "serving on http://0.0.0.0:8808" in banner, banner
        deadline = time.monotonic() + 60
        while True:
            try:
                status, body = get("http://127.0.0.1:8808/healthz")
                break
            except OSError:
                assert time.monotonic() < deadline, "no /healthz within 60 s"
                time.sleep(0.2)
        print("/healthz:", status, body.decode())
        assert status == 200 and json.loads(body)["status"] == "ok"
        status, body = get("http://127.0.0.1:8808/metrics")
        assert status == 401 and "error" in json.loads(body), (status, body)
        from reward_sandbox.service.client import RemoteGrader

        with RemoteGrader("http://127.0.0.1:8808", token=TOKEN, retries=0) as client:
            [result] = client.grade([JOB])
        print("graded over HTTP:", result.id, result.status.value, f"(isolation {result.isolation})")
        assert result.status.value == "ok", result
    finally:
        server.send_signal(signal.SIGTERM)
        _, rest = server.communicate(timeout=300)
    assert server.returncode == 0 and "Traceback" not in rest, (server.returncode, rest)
    print("serve ok: stopped by SIGTERM, exit 0")


if __name__ == "__main__":
    if sys.argv[1:] == ["no-torch"]:
        check_no_torch()
    elif sys.argv[1:2] == ["score"] and len(sys.argv) == 4:
        check_score(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1:2] == ["serve"] and len(sys.argv) == 3:
        check_serve(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: docker_check_in_image.py no-torch | score DATA OUT | serve CMD_JSON")
