"""``reward-sandbox serve``: grading as an HTTP service, for trainers on other machines or containers.

POST /v1/grade   {"jobs": [...]} -> {"results": [...]} (same records as the CLI, input order)
GET  /healthz    liveness and the isolation level in force
GET  /metrics    Prometheus text: responses by status code, dropped connections, jobs by status,
                 queue depth, grading seconds

Bounded against hostile clients: at most ``max_batch`` jobs per request and ``max_queue`` jobs
waiting (then 503); a body of at most ``max_request_mb``, counted as it streams in, so a chunked
body without Content-Length is cut off too (413); a request must arrive within ``read_timeout_s``
its answers must be read within ``read_timeout_s`` too, at most ``max_pipelined`` requests are
answered ahead of the client's reading, and at most ``max_connections`` are open (see :mod:`.httpguard`). A malformed request gets a 4xx
with the reason, a bad record inside a good batch an ``invalid_input`` result. Every error body,
404 and 405 included, is ``{"error": "..."}``. A bearer token,
from the environment or a file (never the command line), guards /v1/grade and /metrics; the server
refuses to start without one on a non-loopback address. There are no /docs or /openapi.json.
SIGTERM/SIGINT stop accepting work, let running batches finish, then exit.
"""

import argparse
import asyncio
import contextlib
import dataclasses
import hmac
import ipaddress
import json
import logging
import re
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..grader import Grader
from ..settings import open_grader, settings_from_args
from .auth import TokenError, read_token_file, token_from_env

log = logging.getLogger("reward_sandbox")


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """The service's limits; each one bounds what a client (hostile or just broken) can cost it."""

    max_batch: int = 512  # jobs in one request (then 413)
    max_queue: int = 4096  # jobs waiting over all requests (then 503)
    max_request_mb: float = 32.0  # request body, counted while it streams in (then 413)
    read_timeout_s: float = 30.0  # a request must arrive in full within this (else the connection is dropped)
    max_connections: int = 256  # open connections; idle ones are evicted first, then 503
    keep_alive_s: int = 5  # an idle keep-alive connection is closed after this
    backlog: int = 128  # kernel accept queue, and most sockets asyncio accepts in one loop turn
    max_pipelined: int = 32  # requests answered back to back while the client sends ahead without reading
    max_inflight_mb: float = 128.0  # request bodies held over all connections at once (then 503)
    max_per_ip: int = 64  # open connections from one client address (0: no limit)


class ServiceState:
    """Counters shared by the endpoints (guarded: grading runs in worker threads)."""

    def __init__(self, grader: Grader, max_queue: int, max_inflight: int = 128 << 20) -> None:
        from .httpguard import Drops

        self.grader = grader
        self.max_queue = max_queue
        self.max_inflight = max_inflight
        self.lock = threading.Lock()
        self.queued = 0
        self.inflight = 0  # request body bytes held now, over all connections
        self.requests = Counter[str]()
        self.responses = Counter[int]()
        self.statuses = Counter[str]()
        self.grading_seconds = 0.0
        self.drops = Drops()

    def try_reserve(self, n: int) -> bool:
        with self.lock:
            if self.queued + n > self.max_queue:
                return False
            self.queued += n
            return True

    def take_bytes(self, n: int) -> bool:
        with self.lock:
            if self.inflight + n > self.max_inflight:
                return False
            self.inflight += n
            return True

    def give_bytes(self, n: int) -> None:
        with self.lock:
            self.inflight -= n

    def release(self, n: int, results: list[Any], seconds: float) -> None:
        with self.lock:
            self.queued -= n
            self.grading_seconds += seconds
            self.statuses.update(r.status.value for r in results)

    def count(self, outcome: str) -> None:
        with self.lock:
            self.requests[outcome] += 1

    def responded(self, code: int) -> None:
        with self.lock:
            self.responses[code] += 1

    def prometheus(self) -> str:
        drops = self.drops.snapshot()
        with self.lock:
            lines = ["# TYPE reward_sandbox_http_responses_total counter"]
            lines += [
                f'reward_sandbox_http_responses_total{{code="{k}"}} {v}' for k, v in sorted(self.responses.items())
            ]
            lines += ["# TYPE reward_sandbox_connections_dropped_total counter"]
            lines += [f'reward_sandbox_connections_dropped_total{{reason="{k}"}} {v}' for k, v in sorted(drops.items())]
            lines += ["# TYPE reward_sandbox_requests_total counter"]
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


class Refused(Exception):
    """A request answered with a 4xx/5xx and a reason."""

    def __init__(self, code: int, message: str, outcome: str) -> None:
        super().__init__(message)
        self.code, self.message, self.outcome = code, message, outcome


class HugeNumber(str):
    """A JSON integer too long for ``int()`` (over 4,000 digits), kept as its text: the record that
    holds it is judged on its own (a number field holding it is ``invalid_input``), never the batch."""


def _parse_int(text: str) -> int | HugeNumber:
    return int(text) if len(text) <= 4000 else HugeNumber(text)


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string literal, escapes included


def parse_jobs(body: bytes, max_batch: int) -> list[Any]:
    """The ``jobs`` list of a request body. Only the envelope is checked here; each record is
    checked by the grader, so one bad record is one ``invalid_input`` result.

    Before parsing, the body's structure outside its strings is counted: a small body of tiny
    values (``{},{},...``, ``[],[],...``) would cost ~20x its size once parsed, so more than 16
    objects and arrays, or 64 values, per allowed job is refused (413) without parsing it."""
    skeleton = _STRING.sub(b"", body)
    containers = skeleton.count(b"{") + skeleton.count(b"[")
    if containers > 16 * max_batch + 16 or skeleton.count(b",") > 64 * max_batch + 64:
        raise Refused(413, f"too many JSON objects, arrays or values for at most {max_batch} jobs", "too_large")
    try:
        payload = json.loads(body, parse_int=_parse_int)
    except RecursionError:
        raise Refused(400, 'expected {"jobs": [...]}: JSON nested too deeply', "bad_request") from None
    except ValueError as exc:  # bad JSON or bad UTF-8
        raise Refused(400, f'expected {{"jobs": [...]}}: not JSON ({exc})', "bad_request") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("jobs"), list):
        raise Refused(400, 'expected {"jobs": [...]}: a JSON object with a "jobs" list', "bad_request")
    jobs: list[Any] = payload["jobs"]
    if len(jobs) > max_batch:
        raise Refused(413, f"{len(jobs)} jobs in one request; at most {max_batch}", "too_large")
    return jobs


class CountedApp:
    """Wraps the routes: counts every response by status code; an unexpected error becomes one log
    line and a 500 (its traceback only at debug level), never a traceback per request."""

    def __init__(self, inner: Any, service: ServiceState) -> None:
        self.inner = inner
        self.state = inner.state
        self.service = service

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        service = self.service
        started = False

        async def counting_send(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                service.responded(int(message["status"]))
            await send(message)

        try:
            await self.inner(scope, receive, counting_send)
        except Exception as exc:
            log.error(
                "reward server: %s %s failed: %s: %s", scope.get("method"), scope.get("path"), type(exc).__name__, exc
            )
            log.debug("traceback", exc_info=True)
            if not started:
                service.responded(500)


def create_app(
    grader: Grader,
    token: str | None,
    max_batch: int = 512,
    max_queue: int = 4096,
    max_request_mb: float = 32.0,
    max_inflight_mb: float = 128.0,
) -> CountedApp:
    """The ASGI application (importable for tests and for other ASGI servers); ``app.state.service``
    holds the counters."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse, Response
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.requests import ClientDisconnect

    async def http_error(_request: Request, exc: Exception) -> Response:
        """Starlette's 404/405 (``{"detail": ...}``) in the shape of every other error of ours."""
        code = getattr(exc, "status_code", 500)
        headers = getattr(exc, "headers", None)
        return JSONResponse({"error": str(getattr(exc, "detail", "error"))}, status_code=code, headers=headers)

    async def internal_error(_request: Request, _exc: Exception) -> Response:
        """A bug of ours: the same shape, no details (CountedApp logs them)."""
        return JSONResponse({"error": "internal server error"}, status_code=500)

    api = FastAPI(
        title="reward-sandbox",
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        exception_handlers={StarletteHTTPException: http_error, Exception: internal_error},
    )
    state = ServiceState(grader, max_queue, int(max_inflight_mb * 1024 * 1024))
    limit = int(max_request_mb * 1024 * 1024)
    # JSON is parsed here, off the event loop, so /healthz and other connections keep being served
    parser = ThreadPoolExecutor(max_workers=2, thread_name_prefix="reward-parse")

    def authorized(request: Request) -> bool:
        if not token:
            return True
        header = request.headers.get("authorization", "")
        return header.startswith("Bearer ") and hmac.compare_digest(header[7:].encode(), token.encode())

    @api.get("/healthz")
    async def healthz() -> dict[str, Any]:  # on the event loop: a probe never queues behind worker threads
        return {"status": "ok", "isolation": grader.level, "workers": grader.workers, "queued": state.queued}

    @api.get("/metrics")
    def metrics(request: Request) -> Any:
        if not authorized(request):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        return PlainTextResponse(state.prometheus())

    def refuse_unreadable_body(request: Request) -> None:
        """A body we would misread is refused before it is read (415): another media type than JSON
        (a form post, text), or an encoding we do not decode (``content-encoding: gzip`` would be
        parsed as if it were JSON and fail with a misleading message). No content type is taken as JSON."""
        media = request.headers.get("content-type", "application/json").split(";", 1)[0].strip().lower()
        if media not in ("application/json", ""):
            raise Refused(415, f"content-type {media!r}: send the jobs as application/json", "bad_request")
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", ""):
            raise Refused(415, f"content-encoding {encoding!r}: send the body uncompressed", "bad_request")

    async def read_body(request: Request, held: list[int]) -> bytes:
        """The body, refused as soon as it passes the limit (chunked or not), or when the bodies of
        all requests together would pass the in-flight budget (503). ``held[0]``: bytes taken from
        the budget, for the caller to give back."""
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            raise Refused(413, f"request larger than {max_request_mb:g} MB", "too_large")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Refused(413, f"request larger than {max_request_mb:g} MB", "too_large")
            if not state.take_bytes(len(chunk)):
                raise Refused(503, "too many request bytes in flight, retry later", "busy")
            held[0] += len(chunk)
            chunks.append(chunk)
        return b"".join(chunks)

    @api.post("/v1/grade")
    async def grade(request: Request) -> Any:
        held = [0]
        try:
            if not authorized(request):
                raise Refused(401, "missing or wrong bearer token", "unauthorized")
            refuse_unreadable_body(request)
            body = await read_body(request, held)
            jobs = await asyncio.get_running_loop().run_in_executor(parser, parse_jobs, body, max_batch)
            del body
            if not state.try_reserve(len(jobs)):
                raise Refused(503, "queue full, retry later", "busy")
        except Refused as exc:
            state.count(exc.outcome)
            # the rest of a refused body is not read: close the connection rather than drain it
            return JSONResponse({"error": exc.message}, status_code=exc.code, headers={"connection": "close"})
        except ClientDisconnect:
            state.count("client_gone")
            return Response(status_code=499)  # nobody reads it; counted as the client's
        finally:
            state.give_bytes(held[0])  # the parsed jobs are bounded by max_batch from here on
        start = time.monotonic()
        results: list[Any] = []
        try:
            results = await asyncio.to_thread(grader.grade, jobs)
        finally:
            state.release(len(jobs), results, time.monotonic() - start)
        state.count("ok")
        # ASCII-escaped JSON: a lone surrogate echoed back from a bad record cannot break the whole answer
        answer = json.dumps({"results": [r.to_dict() for r in results], "isolation": grader.level})
        return Response(answer, media_type="application/json")

    api.state.service = state
    return CountedApp(api, state)


def make_server(
    grader: Grader, token: str | None, options: ServerOptions, host: str = "127.0.0.1", port: int = 8808
) -> Any:
    """A ``uvicorn.Server`` for the app with the connection guards of :mod:`.httpguard` (``.run()`` it)."""
    import uvicorn

    from .httpguard import guarded_protocol

    app = create_app(
        grader, token, options.max_batch, options.max_queue, options.max_request_mb, options.max_inflight_mb
    )
    service = app.service
    protocol = guarded_protocol(
        options.read_timeout_s,
        options.max_connections,
        service.drops,
        service.responded,
        options.max_pipelined,
        options.max_per_ip,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_keep_alive=options.keep_alive_s,
        backlog=options.backlog,
        timeout_graceful_shutdown=300,
        h11_max_incomplete_event_size=16 * 1024,  # request line + headers
    )

    class Server(uvicorn.Server):  # type: ignore[misc]  # uvicorn.* is untyped here
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            """uvicorn's, less its re-raising of SIGTERM/SIGINT after the graceful shutdown: that
            killed the process before ``serve`` closed the grader, and a clean `docker stop` read as
            death by signal (exit 143). Running batches still finish first."""
            with super().capture_signals():
                try:
                    yield
                finally:
                    getattr(self, "_captured_signals", []).clear()

    return Server(config)


def fit_to_file_limit(options: ServerOptions, workers: int) -> ServerOptions:
    """``options`` with the connection cap and accept backlog lowered to what the open-file limit
    can hold next to the grader's own files (the soft limit is first raised to the hard one). Past
    the limit ``accept`` fails and nobody, /healthz included, gets in; under the cap, idle
    connections are evicted instead. asyncio accepts up to ``backlog`` sockets per loop turn before
    the cap sees them, so two turns' worth is kept free too."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        target = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, target), hard))
            soft = max(soft, target)
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return options
    backlog = min(options.backlog, max(8, soft // 8))
    reserve = 64 + 16 * workers + 2 * backlog  # listening socket, logs, each worker's sandbox pipes, accepts in flight
    cap = max(8, min(options.max_connections, soft - reserve))
    return dataclasses.replace(options, max_connections=cap, backlog=backlog)


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (``port`` 0: any free one), made before the grader starts and
    before "serving on" is printed, so that a port in use or an address this machine does not have
    is one line and exit 2 instead of uvicorn's error after the banner. uvicorn listens on it."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"cannot resolve the host {host!r} ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is no conflict
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def server_token(args: argparse.Namespace) -> str | None:
    """The token from ``--token-file``, else $REWARD_SANDBOX_TOKEN or $REWARD_SANDBOX_TOKEN_FILE."""
    if getattr(args, "token_file", None):
        return read_token_file(args.token_file)
    return token_from_env("REWARD_SANDBOX_TOKEN")


def serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        print("reward-sandbox serve needs the serve extra: pip install 'rust-grpo[serve]'", file=sys.stderr)
        return 2
    if getattr(args, "token", None):
        print(
            "reward-sandbox: --token is not accepted (every local user sees it in `ps`); "
            "set REWARD_SANDBOX_TOKEN, REWARD_SANDBOX_TOKEN_FILE or --token-file PATH",
            file=sys.stderr,
        )
        return 2
    try:
        token = server_token(args)
    except TokenError as exc:
        print(f"reward-sandbox: {exc}", file=sys.stderr)
        return 2
    if not is_loopback(args.host) and not token:
        print(
            f"reward-sandbox: refusing to serve on {args.host} without a bearer token "
            "(set REWARD_SANDBOX_TOKEN, REWARD_SANDBOX_TOKEN_FILE or --token-file, or bind 127.0.0.1)",
            file=sys.stderr,
        )
        return 2
    options = ServerOptions(
        max_batch=args.max_batch,
        max_queue=args.max_queue,
        max_request_mb=args.max_request_mb,
        read_timeout_s=getattr(args, "read_timeout_s", ServerOptions.read_timeout_s),
        max_connections=getattr(args, "max_connections", ServerOptions.max_connections),
        max_inflight_mb=getattr(args, "max_inflight_mb", ServerOptions.max_inflight_mb),
        max_per_ip=getattr(args, "max_connections_per_ip", ServerOptions.max_per_ip),
    )
    if options.max_queue < options.max_batch:
        print(
            f"reward-sandbox: --max-queue {options.max_queue} is below --max-batch {options.max_batch}:"
            " a full batch could never be queued",
            file=sys.stderr,
        )
        return 2
    try:
        sock = listen_socket(args.host, args.port)
    except OSError as exc:
        print(f"reward-sandbox: cannot serve on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        grader = open_grader(settings_from_args(args))
    except BaseException:
        sock.close()
        raise
    assert isinstance(grader, Grader)
    fitted = fit_to_file_limit(options, grader.workers)
    if fitted.max_connections < options.max_connections:
        print(
            f"reward-sandbox: at most {fitted.max_connections} connections (the open-file limit, `ulimit -n`,"
            f" leaves no room for {options.max_connections})",
            file=sys.stderr,
        )
    options = fitted
    port = int(sock.getsockname()[1])
    server = make_server(grader, token, options, args.host, port)
    where = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"reward-sandbox: serving on http://{where}:{port} (isolation={grader.level}, workers={grader.workers},"
        f" auth={'bearer' if token else 'none'})",
        file=sys.stderr,
    )
    try:
        server.run(sockets=[sock])
    finally:
        grader.close()  # running batches finish first
        sock.close()
    return 0
