"""The HTTP reward service and its client, on loopback, with the real sandbox behind it."""

import argparse

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from reward_sandbox import Status  # noqa: E402
from reward_sandbox.service.client import RemoteGrader, RemoteGraderError  # noqa: E402
from reward_sandbox.service.server import ServerOptions, is_loopback, serve  # noqa: E402
from rust_grpo.problems.schema import Problem  # noqa: E402
from rust_grpo.rewards.context import RewardContext  # noqa: E402
from rust_grpo.rewards.trl_rewards import build_reward_functions  # noqa: E402

from ...serving import free_port, serving  # noqa: E402

pytestmark = pytest.mark.cargo


@pytest.fixture(scope="module")
def server():
    with serving("s3cret", ServerOptions(max_batch=3, max_queue=8)) as served:
        yield served.url


def test_grades_batches_in_order_with_a_token(server):
    client = RemoteGrader(server, token="s3cret", retries=0)
    results = client.grade(
        [{"id": "a", "source": "pub fn f() -> u8 { 1 }"}, {"id": "b", "source": "pub fn f( {"}, {"id": "c"}]
    )
    assert [r.id for r in results] == ["a", "b", "c"]
    assert [r.status for r in results] == [Status.OK, Status.COMPILE_ERROR, Status.INVALID_INPUT]


def test_rejects_bad_tokens_and_splits_oversized_batches(server):
    with pytest.raises(RemoteGraderError, match="401"):
        RemoteGrader(server, token="wrong", retries=0).grade([{"id": "a", "source": "fn f() {}"}])
    # a batch over the server's max_batch is split until it fits, not refused
    oversized = [{"id": str(i), "source": ""} for i in range(4)]
    results = RemoteGrader(server, token="s3cret", retries=0).grade(oversized)
    assert [r.id for r in results] == ["0", "1", "2", "3"]
    assert all(r.status is Status.INVALID_INPUT for r in results)


def test_health_and_metrics(server):
    import json
    import urllib.request

    health = json.loads(urllib.request.urlopen(f"{server}/healthz").read())
    assert health["status"] == "ok" and health["isolation"] in ("bwrap", "rlimits")
    request = urllib.request.Request(f"{server}/metrics", headers={"Authorization": "Bearer s3cret"})
    text = urllib.request.urlopen(request).read().decode()
    assert "reward_sandbox_queue_depth 0" in text and "reward_sandbox_jobs_total" in text


def test_a_dead_server_degrades_to_unknown_rewards_not_a_crash(caplog):
    client = RemoteGrader(f"http://127.0.0.1:{free_port()}", retries=1, backoff_s=0.01, timeout_s=2)
    context = RewardContext(client, [Problem(id="f", prompt="", tests="#[test]\nfn t() { assert_eq!(f(), 1); }")])
    funcs, _ = build_reward_functions(context, {})
    completion = "<think>x</think>\n```rust\npub fn f() -> u8 { 1 }\n```"
    values = {f.__name__: f(prompts=[None], completions=[completion], id=["f"])[0] for f in funcs}
    assert all(v is None for v in values.values())  # unknown, every one: TRL drops the completion
    assert "retry 1/1" in caplog.text and "reward grading failed" in caplog.text


def test_refuses_to_serve_publicly_without_a_token(capsys, monkeypatch):
    monkeypatch.delenv("REWARD_SANDBOX_TOKEN", raising=False)
    args = argparse.Namespace(
        host="0.0.0.0", port=0, token=None, workers=1, isolation="auto", max_batch=1, max_queue=1, max_request_mb=1
    )
    assert serve(args) == 2
    assert "refusing to serve on 0.0.0.0 without a bearer token" in capsys.readouterr().err
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("10.0.0.5")


def test_a_bad_record_never_loses_the_request(server):
    import http.client
    import json
    from urllib.parse import urlparse

    def post(body: bytes) -> tuple[int, bytes]:
        url = urlparse(server)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        try:
            conn.request("POST", "/v1/grade", body=body, headers={"Authorization": "Bearer s3cret"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    jobs = [{"id": "bad", "source": "pub fn f() {}\n// \ud800"}, {"id": "good", "source": "pub fn f() -> u8 { 1 }"}]
    status, body = post(json.dumps({"jobs": jobs}).encode())  # a lone-surrogate escape: valid JSON, invalid text
    assert status == 200
    assert [(r["id"], r["status"]) for r in json.loads(body)["results"]] == [("bad", "invalid_input"), ("good", "ok")]
    status, body = post(b'{"jobs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert status == 413 and b"too many JSON" in body  # refused before parsing (deep nesting alone: 400)


def test_every_error_body_has_our_shape(server):
    """Starlette's 404/405 and uvicorn's answer to a malformed request say ``error``, as ours do."""
    import http.client
    import json
    import socket
    from urllib.parse import urlparse

    url = urlparse(server)
    for method, path, code in [("GET", "/nowhere", 404), ("GET", "/v1/grade", 405), ("POST", "/healthz", 405)]:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        try:
            conn.request(method, path, headers={"Authorization": "Bearer s3cret"})
            response = conn.getresponse()
            body = json.loads(response.read())
        finally:
            conn.close()
        assert response.status == code and list(body) == ["error"] and body["error"], (path, body)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"application/json" in head
    assert json.loads(body)["error"].startswith("malformed HTTP request")


def test_a_body_it_would_misread_is_refused_with_415(server):
    """Another media type (a form post, which `curl -d` sends by default) or a compressed body would be
    parsed as JSON and fail with a misleading message: both are refused before the body is read."""
    import gzip
    import http.client
    import json
    from urllib.parse import urlparse

    body = json.dumps({"jobs": [{"id": "a", "source": "pub fn f() -> u8 { 1 }"}]}).encode()
    url = urlparse(server)
    cases = [
        ({"Content-Type": "application/x-www-form-urlencoded"}, body, 415, "application/json"),
        ({"Content-Type": "application/json", "Content-Encoding": "gzip"}, gzip.compress(body), 415, "uncompressed"),
        ({"Content-Type": "application/json; charset=utf-8"}, body, 200, None),
        ({}, body, 200, None),  # no content type: taken as JSON
    ]
    for headers, payload, code, hint in cases:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        try:
            conn.request("POST", "/v1/grade", body=payload, headers={"Authorization": "Bearer s3cret", **headers})
            response = conn.getresponse()
            answer = json.loads(response.read())
        finally:
            conn.close()
        assert response.status == code, (headers, answer)
        assert hint is None or hint in answer["error"], answer
