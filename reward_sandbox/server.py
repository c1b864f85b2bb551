"""``reward-sandbox serve``: grading as an HTTP service, for trainers on other machines or containers.

POST /v1/grade   {"jobs": [...]} -> {"results": [...]} (same records as the CLI, input order)
GET  /healthz    liveness and the isolation level in force
GET  /metrics    Prometheus text: requests, jobs by status, queue depth, grading seconds

Bounded: at most ``max_batch`` jobs per request, ``max_queue`` jobs waiting (then 503), and
``max_request_mb`` per body (then 413). A bearer token is required on /v1/grade and /metrics
when one is set, and the server refuses to start without one on a non-loopback address.
SIGTERM/SIGINT stop accepting work, let running batches finish, then exit.
"""

import argparse
import asyncio
import hmac
import ipaddress
import json
import logging
import os
import sys
import threading
import time
from collections import Counter
from typing import Any

from .pool import Grader
from .settings import open_grader, settings_from_args

log = logging.getLogger("reward_sandbox")


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ServiceState:
    """Counters shared by the endpoints (guarded: grading runs in worker threads)."""

    def __init__(self, grader: Grader, max_queue: int) -> None:
        self.grader = grader
        self.max_queue = max_queue
        self.lock = threading.Lock()
        self.queued = 0
        self.requests = Counter[str]()
        self.statuses = Counter[str]()
        self.grading_seconds = 0.0

    def try_reserve(self, n: int) -> bool:
        with self.lock:
            if self.queued + n > self.max_queue:
                return False
            self.queued += n
            return True

    def release(self, n: int, results: list[Any], seconds: float) -> None:
        with self.lock:
            self.queued -= n
            self.grading_seconds += seconds
            self.statuses.update(r.status.value for r in results)

    def prometheus(self) -> str:
        with self.lock:
            lines = ["# TYPE reward_sandbox_requests_total counter"]
            lines += [f'reward_sandbox_requests_total{{outcome="{k}"}} {v}' for k, v in sorted(self.requests.items())]
            lines += ["# TYPE reward_sandbox_jobs_total counter"]
            lines += [f'reward_sandbox_jobs_total{{status="{k}"}} {v}' for k, v in sorted(self.statuses.items())]
            lines += [
                "# TYPE reward_sandbox_queue_depth gauge",
                f"reward_sandbox_queue_depth {self.queued}",
                "# TYPE reward_sandbox_grading_seconds_total counter",
                f"reward_sandbox_grading_seconds_total {self.grading_seconds:.3f}",
            ]
        return "\n".join(lines) + "\n"


def create_app(
    grader: Grader, token: str | None, max_batch: int = 512, max_queue: int = 4096, max_request_mb: float = 32.0
) -> Any:
    """The FastAPI application (importable for tests and for other ASGI servers)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse, Response

    app = FastAPI(title="reward-sandbox", version="1")
    state = ServiceState(grader, max_queue)
    app.state.service = state
    limit = int(max_request_mb * 1024 * 1024)

    def authorized(request: Request) -> bool:
        if not token:
            return True
        header = request.headers.get("authorization", "")
        return header.startswith("Bearer ") and hmac.compare_digest(header[7:], token)

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "isolation": grader.level, "workers": grader.workers, "queued": state.queued}

    @app.get("/metrics")
    def metrics(request: Request) -> Any:
        if not authorized(request):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        return PlainTextResponse(state.prometheus())

    @app.post("/v1/grade")
    async def grade(request: Request) -> Any:
        def refuse(code: int, message: str, outcome: str) -> Any:
            state.requests[outcome] += 1
            return JSONResponse({"error": message}, status_code=code)

        if not authorized(request):
            return refuse(401, "missing or wrong bearer token", "unauthorized")
        if int(request.headers.get("content-length") or 0) > limit:
            return refuse(413, f"request larger than {max_request_mb:g} MB", "too_large")
        body = await request.body()
        if len(body) > limit:
            return refuse(413, f"request larger than {max_request_mb:g} MB", "too_large")
        try:
            payload = json.loads(body)
            jobs = payload["jobs"]
            if not isinstance(jobs, list):
                raise TypeError("jobs must be a list")
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            return refuse(400, f'expected {{"jobs": [...]}}: {exc}', "bad_request")
        if len(jobs) > max_batch:
            return refuse(413, f"{len(jobs)} jobs in one request; at most {max_batch}", "too_large")
        if not state.try_reserve(len(jobs)):
            return refuse(503, "queue full, retry later", "busy")
        start = time.monotonic()
        results: list[Any] = []
        try:
            results = await asyncio.to_thread(grader.grade, jobs)
        finally:
            state.release(len(jobs), results, time.monotonic() - start)
        state.requests["ok"] += 1
        # ASCII-escaped JSON: a lone surrogate echoed back from a bad record cannot break the whole answer
        answer = json.dumps({"results": [r.to_dict() for r in results], "isolation": grader.level})
        return Response(answer, media_type="application/json")

    return app


def serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        print("reward-sandbox serve needs the serve extra: pip install 'rust-grpo[serve]'", file=sys.stderr)
        return 2
    token = args.token or os.environ.get("REWARD_SANDBOX_TOKEN") or None
    if not is_loopback(args.host) and not token:
        print(
            f"reward-sandbox: refusing to serve on {args.host} without a bearer token "
            "(set --token or REWARD_SANDBOX_TOKEN, or bind 127.0.0.1)",
            file=sys.stderr,
        )
        return 2
    grader = open_grader(settings_from_args(args))
    assert isinstance(grader, Grader)
    app = create_app(grader, token, args.max_batch, args.max_queue, args.max_request_mb)
    print(
        f"reward-sandbox: serving on http://{args.host}:{args.port} (isolation={grader.level}, workers={grader.workers},"
        f" auth={'bearer' if token else 'none'})",
        file=sys.stderr,
    )
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=300)
    finally:
        grader.close()  # running batches finish first
    return 0
