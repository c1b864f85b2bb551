"""``reward-sandbox serve`` as a user meets it: bad options, a busy port, error bodies, a wrong token.

Each bad value is refused while the command line is parsed (one error line, exit 2, nothing printed
about serving); the real server runs as a subprocess or on loopback in this process.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from reward_sandbox.cli import main as sandbox_main
from reward_sandbox.service.client import RemoteGrader, RequestRejected
from reward_sandbox.service.server import ServerOptions

from ...conftest import ROOT
from ...serving import serving

BAD_OPTIONS = [
    (["--port", "99999"], "--port: 99999 is above 65535"),
    (["--port", "-1"], "--port: -1 is below 0"),
    (["--port", "http"], "--port: 'http' is not an integer"),
    (["--max-batch", "-1"], "--max-batch: -1 is below 1"),
    (["--max-batch", "0"], "--max-batch: 0 is below 1"),
    (["--max-queue", "0"], "--max-queue: 0 is below 1"),
    (["--max-request-mb", "0"], "--max-request-mb: 0 is outside (0, 4096]"),
    (["--max-request-mb", "nan"], "--max-request-mb: nan is outside (0, 4096]"),
    (["--read-timeout-s", "-1"], "--read-timeout-s: -1 is outside (0, 3600]"),
    (["--max-connections", "0"], "--max-connections: 0 is below 1"),
    (["--max-connections-per-ip", "-1"], "--max-connections-per-ip: -1 is below 0"),
    (["--max-inflight-mb", "inf"], "--max-inflight-mb: inf is outside (0, 65536]"),
    (["--workers", "-3"], "--workers/-j: -3 is below 0"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_every_numeric_serve_option_is_checked_while_parsing(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        sandbox_main(["serve", *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err == f"reward-sandbox serve: error: argument {message} (see reward-sandbox serve --help)\n"
    assert "serving on" not in err and "Traceback" not in err


def test_a_queue_smaller_than_a_batch_is_refused(capsys):
    assert sandbox_main(["serve", "--max-batch", "8", "--max-queue", "4"]) == 2
    err = capsys.readouterr().err
    assert err == "reward-sandbox: --max-queue 4 is below --max-batch 8: a full batch could never be queued\n"


def test_a_port_in_use_is_one_line_before_anything_starts(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert sandbox_main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err == f"reward-sandbox: cannot serve on 127.0.0.1:{port}: Address already in use\n"


def test_an_address_this_machine_lacks_is_one_line(capsys, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o600)
    assert sandbox_main(["serve", "--host", "192.0.2.1", "--port", "0", "--token-file", str(token)]) == 2
    assert capsys.readouterr().err.startswith("reward-sandbox: cannot serve on 192.0.2.1:0: ")


@pytest.mark.cargo
def test_serve_on_any_free_port_grades_with_a_token_and_stops_on_sigterm(tmp_path):
    """The real command: binds, prints where, answers /healthz and one graded job, exits 0 on SIGTERM."""
    env = {**os.environ, "REWARD_SANDBOX_TOKEN": "t0ken", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "reward_sandbox.cli", "serve", "--port", "0", "--workers", "1", "--no-cache"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"serving on http://127\.0\.0\.1:(\d+) ", line)
        assert found, line
        url = f"http://127.0.0.1:{found.group(1)}"
        deadline = time.monotonic() + 30
        while True:
            try:
                health = json.loads(urllib.request.urlopen(f"{url}/healthz", timeout=5).read())
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, "no /healthz within 30 s"
                time.sleep(0.1)
        assert health["status"] == "ok" and health["workers"] == 1
        with RemoteGrader(url, token="t0ken", retries=0) as client:
            [result] = client.grade([{"id": "one", "source": "pub fn f() -> u8 { 1 }"}])
        assert (result.id, result.status.value) == ("one", "ok")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in rest, rest


@pytest.mark.cargo
def test_a_wrong_token_is_named_a_configuration_error_not_an_outage(caplog):
    job = [{"id": "a", "source": "pub fn f() -> u8 { 1 }"}]
    with serving("right") as one, serving("other") as two:
        with RemoteGrader(one.url, token="wrong", retries=1, backoff_s=0.01) as client:
            with pytest.raises(RequestRejected, match=r"refused our token .*configuration error.*REWARD_SANDBOX_TOKEN"):
                client.grade(job)
            [health] = client.health()
        assert health["healthy"] and health["unauthorized"] and health["failures"] == 1
        # two servers, one with another token: the work is done by the other, and the log says why
        caplog.clear()
        with RemoteGrader([one.url, two.url], token="right", retries=0) as client:
            for _ in range(2):
                assert [r.status.value for r in client.grade(job * 4)] == ["ok"] * 4
            refused = client.health()[1]
        assert refused["unauthorized"] and refused["healthy"]
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert [line for line in lines if "is down" in line] == []
    assert (
        len([line for line in lines if two.url in line and "configuration error" in line]) == 1
    )  # once, not per batch


@pytest.mark.cargo
def test_no_token_is_said_so():
    with (
        serving("right", ServerOptions(max_batch=2, max_queue=4)) as served,
        RemoteGrader(served.url, token_env="REWARD_SANDBOX_TEST_NO_SUCH_TOKEN", retries=0) as client,
        pytest.raises(RequestRejected, match=r"no bearer token is set.*\$REWARD_SANDBOX_TEST_NO_SUCH_TOKEN"),
    ):
        client.grade([{"id": "a"}])
