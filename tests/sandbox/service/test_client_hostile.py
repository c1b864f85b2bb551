"""The multi-server client against lying and broken servers: a real reward server on loopback next
to a real HTTP server that lies in one way per test (its mode is the URL path). The client must
never take a liar's verdicts, never lose the honest server's share, and never hang or balloon.

The jobs have no ``source``: the real server answers each one ``invalid_input`` at once (no cargo
run), while the liar says ``ok``, so a verdict that came from the liar is visible.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from reward_sandbox import Result, Status
from reward_sandbox.service.client import RemoteGrader, RequestRejected
from reward_sandbox.service.server import ServerOptions

from ...serving import free_port, serving

pytestmark = pytest.mark.cargo

TOKEN = "client-hostile-s3cret"
JOBS = [{"id": f"job{k}"} for k in range(6)]


@pytest.fixture(scope="module")
def honest() -> Iterator[str]:
    with serving(TOKEN, ServerOptions(max_batch=2, read_timeout_s=5), workers=1) as served:
        yield served.url


@dataclass
class Liar:
    url: str
    seen: list[str] = field(default_factory=list)  # "METHOD path authorization" per request


def lie(handler: BaseHTTPRequestHandler, mode: str, ids: list[str]) -> None:
    def reply(code: int, body: bytes, headers: tuple[tuple[str, str], ...] = ()) -> None:
        handler.send_response(code)
        for key, value in headers:
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def ok(id_: str) -> dict:
        return Result(id=id_, status=Status.OK).to_dict()

    if mode == "reverse":
        reply(200, json.dumps({"results": [ok(i) for i in ids][::-1]}).encode())
    elif mode == "wrongids":
        reply(200, json.dumps({"results": [ok("bogus") for _ in ids]}).encode())
    elif mode == "fewer":
        reply(200, json.dumps({"results": [ok(i) for i in ids][:-1]}).encode())
    elif mode == "deep":
        reply(200, b"[" * 200_000)
    elif mode == "schema":
        reply(
            200, json.dumps({"results": [{**ok(i), "tests": {**ok(i)["tests"], "hidden": []}} for i in ids]}).encode()
        )
    elif mode == "redirect":
        port = handler.server.server_address[1]
        reply(307, b"", (("Location", f"http://127.0.0.1:{port}/capture/v1/grade"),))
    elif mode in ("400", "401", "413", "500"):
        reply(int(mode), b'{"error": "no"}')
    elif mode == "trickle":
        body = json.dumps({"results": [ok(i) for i in ids]}).encode()
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for byte in body:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.5)
    elif mode == "huge":  # declared
        handler.send_response(200)
        handler.send_header("Content-Length", str(400 << 20))
        handler.end_headers()
        handler.wfile.write(b" " * (1 << 20))
    elif mode == "endless":  # undeclared, until the client hangs up
        handler.send_response(200)
        handler.send_header("Connection", "close")
        handler.end_headers()
        for _ in range(64):
            handler.wfile.write(b" " * (1 << 20))
    else:
        reply(200, json.dumps({"results": [ok(i) for i in ids]}).encode())


@pytest.fixture(scope="module")
def liar() -> Iterator[Liar]:
    port = free_port()
    state = Liar(f"http://127.0.0.1:{port}")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            state.seen.append(f"GET {self.path} {self.headers.get('Authorization')}")
            body = b'{"status": "down"}' if self.path.startswith("/500") else b'{"status": "ok"}'
            self.send_response(500 if self.path.startswith("/500") else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            state.seen.append(f"POST {self.path} {self.headers.get('Authorization')}")
            jobs = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["jobs"]
            with contextlib.suppress(OSError):  # the client hung up, as it should
                lie(self, self.path.split("/")[1], [str(j.get("id")) for j in jobs])

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def client(honest: str, liar: Liar, mode: str, **kwargs: object) -> RemoteGrader:
    options: dict = {"token": TOKEN, "timeout_s": 10, "retries": 1, "backoff_s": 0.05, "resolve": False}
    return RemoteGrader([honest, f"{liar.url}/{mode}"], **(options | kwargs))


def assert_honest_verdicts(results: list) -> None:
    """Every job answered by the real server (invalid_input: no source), none by the liar."""
    assert [r.id for r in results] == [j["id"] for j in JOBS]
    assert all(r.status is Status.INVALID_INPUT for r in results), [r.status for r in results]


def liar_health(grader: RemoteGrader) -> dict:
    return grader.health()[1]


@pytest.mark.parametrize("mode", ["reverse", "wrongids", "fewer"])
def test_results_with_other_ids_or_counts_are_not_believed(honest, liar, mode):
    with client(honest, liar, mode) as grader:
        assert_honest_verdicts(grader.grade(JOBS))
        health = liar_health(grader)
    assert not health["healthy"] and ("id" in health["last_error"] or "results for" in health["last_error"])


@pytest.mark.parametrize(("mode", "error"), [("deep", "RecursionError"), ("schema", "AttributeError")])
def test_malformed_answers_fail_over_instead_of_escaping(honest, liar, mode, error):
    with client(honest, liar, mode) as grader:
        assert_honest_verdicts(grader.grade(JOBS))
        assert error in liar_health(grader)["last_error"]


def test_redirects_are_failures_and_neither_token_nor_verdicts_follow_them(honest, liar, monkeypatch):
    proxy = socket.socket()  # a proxy from the environment that nobody may use
    proxy.bind(("127.0.0.1", 0))
    proxy.listen(8)
    proxy.setblocking(False)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.getsockname()[1]}")
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.getsockname()[1]}")
    liar.seen.clear()
    try:
        with client(honest, liar, "redirect") as grader:
            assert_honest_verdicts(grader.grade(JOBS))
            assert "307" in liar_health(grader)["last_error"]
        with pytest.raises(BlockingIOError):
            proxy.accept()  # nobody connected through it
    finally:
        proxy.close()
    assert not any("/capture" in line for line in liar.seen)


@pytest.mark.parametrize("code", ["400", "401", "413"])
def test_one_server_refusing_the_request_loses_nothing(honest, liar, code):
    with client(honest, liar, code) as grader:
        assert_honest_verdicts(grader.grade(JOBS))
        health = liar_health(grader)
    if code == "401":  # it refused our token: a configuration error, said as such, not an outage
        assert health["healthy"] and health["unauthorized"] and "configuration error" in health["last_error"]
    else:
        assert not health["healthy"]


def test_a_413_share_is_split_and_only_all_servers_refusing_raises(honest, liar):
    # the real server takes at most 2 jobs per request: 6 jobs are halved until they fit
    with RemoteGrader(honest, token=TOKEN, retries=0, resolve=False) as grader:
        assert_honest_verdicts(grader.grade(JOBS))
    with RemoteGrader(honest, token="wrong", retries=0, resolve=False) as grader, pytest.raises(RequestRejected):
        grader.grade(JOBS)


def test_a_trickling_server_is_cut_off_by_a_deadline_for_the_whole_request(honest, liar):
    start = time.monotonic()
    with client(honest, liar, "trickle", timeout_s=1.5) as grader:
        assert_honest_verdicts(grader.grade(JOBS))
        assert "within 1.5 s" in liar_health(grader)["last_error"]
    assert time.monotonic() - start < 10  # 1.5 s for the liar, then the real server


@pytest.mark.parametrize("mode", ["huge", "endless"])
def test_an_oversized_answer_is_not_read_in_full(honest, liar, mode):
    with client(honest, liar, mode, max_response_mb=1) as grader:
        assert_honest_verdicts(grader.grade(JOBS))
        assert "bytes" in liar_health(grader)["last_error"]


def test_a_failed_server_gets_work_again_only_after_its_health_probe(honest, liar):
    liar.seen.clear()
    with client(honest, liar, "500", cooldown_s=0.2) as grader:
        assert_honest_verdicts(grader.grade(JOBS))
        time.sleep(0.3)  # its cooldown has passed
        assert_honest_verdicts(grader.grade(JOBS))
        health = liar_health(grader)
    posts = [line for line in liar.seen if line.startswith("POST")]
    probes = [line for line in liar.seen if line.startswith("GET /500/healthz")]
    assert len(posts) == 1 and len(probes) == 1  # the probe failed: no second batch share
    assert health["failed_in_a_row"] == 2 and health["down_until"] - time.monotonic() > 0.2  # cooldown doubled
