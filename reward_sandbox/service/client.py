"""A client for one or many ``reward-sandbox serve`` instances, with the ``grade(items)`` shape of :class:`Grader`.

Standard library only. A batch is split into shares, one per healthy server, sent in
parallel and put back together in input order. A server that fails (unreachable, reset, 5xx, a
redirect, an answer that is malformed, too big, too slow, or whose ids do not match the jobs sent,
a 400/413) is marked down for ``cooldown_s`` (doubling with each failure in a row) and its share
is re-split over the others at once (a 413 share is halved first); it gets work again only after
its /healthz answers. A 401 is not an outage but a wrong or missing token: said once as such, the
server sits out ``cooldown_s`` without being marked down;
when every server is down the client waits (backoff) and tries them all again, ``retries`` times.
A transport failure is never a verdict: what no server could grade comes back as ``sandbox_error``
(the trainer's rewards for it are None, unknown), and when nothing at all could be graded the
call raises, as before. A hostname that resolves to several addresses (``docker compose up
--scale rewards=N``) counts as one server per address.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import ipaddress
import json
import logging
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..cliargs import split_urls
from ..jobs import InvalidJob, Job
from ..results import Result, invalid_result
from ..status import Status
from .auth import token_from_env

log = logging.getLogger("reward_sandbox")


class RemoteGraderError(RuntimeError):
    """No reward server could grade a batch (unreachable, refused, or bad answers)."""


class RequestRejected(RemoteGraderError):
    """Every server refused the request itself (400/401/413): retrying would not help (for a 401 the
    message names the token setting to fix)."""


def expand_url(url: str) -> list[str]:
    """One URL per address an ``http`` hostname resolves to (compose replicas share one DNS name);
    the URL unchanged for IP literals, https (certificates name the host) or a failed lookup."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        ipaddress.ip_address(host)
        return [url]
    except ValueError:
        pass
    if parts.scheme != "http" or not host or host == "localhost":
        return [url]
    port = parts.port or 80
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return [url]
    addresses = sorted({str(info[4][0]) for info in infos})
    if len(addresses) < 2:
        return [url]
    netlocs = [f"[{a}]:{port}" if ":" in a else f"{a}:{port}" for a in addresses]
    return [urlunsplit((parts.scheme, n, parts.path, parts.query, parts.fragment)) for n in netlocs]


@dataclass
class ServerHealth:
    """What the client knows about one server (see :meth:`RemoteGrader.health`)."""

    url: str
    healthy: bool = True
    down_until: float = 0.0
    batches_ok: int = 0
    jobs_ok: int = 0
    failures: int = 0
    failed_in_a_row: int = 0
    last_error: str = ""
    unauthorized: bool = False  # it refused our bearer token: a configuration error, not an outage


@dataclass
class _Failure:
    """Why one share failed on one server. ``rejected``: the server refused the request itself
    (400/401/403/413); ``too_large``: 413, worth re-sending in smaller pieces."""

    reason: str
    rejected: bool = False
    too_large: bool = False


class BadAnswer(ValueError):
    """A server's answer that cannot be trusted: not JSON, wrong schema, wrong ids or count, too big, a redirect."""


def expected_ids(records: Sequence[Any]) -> list[str | None]:
    """The id a server must give each record's result (None: a record without a usable id, which
    the server names by its position)."""
    ids: list[str | None] = []
    for record in records:
        value = record.get("id") if isinstance(record, dict) else None
        ids.append(str(value) if isinstance(value, (str, int)) and str(value) else None)
    return ids


def parse_answer(data: bytes, records: Sequence[Any]) -> list[Result]:
    """The results of one server's answer, checked against the records sent: one result per
    record, in order, each with that record's id. A server that reorders, drops, invents or
    mangles results is not believed (its verdicts would land on the wrong jobs)."""
    try:
        payload = json.loads(data)
        if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
            raise BadAnswer('not a JSON object with a "results" list')
        results = [Result.from_dict(r) for r in payload["results"]]
    except BadAnswer:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as exc:  # untrusted text
        raise BadAnswer(f"malformed answer ({type(exc).__name__}: {str(exc)[:200]})") from None
    if len(results) != len(records):
        raise BadAnswer(f"{len(results)} results for {len(records)} jobs")
    for k, (want, result) in enumerate(zip(expected_ids(records), results)):
        if want is not None and result.id != want:
            raise BadAnswer(f"result {k} has id {result.id[:80]!r}, the job sent there is {want[:80]!r}")
    return results


class RemoteGrader:
    """``grade(items)`` over HTTP. ``timeout_s`` bounds a whole request (connect, send, wait,
    read), not each socket operation, so a server that trickles its answer cannot hold a batch;
    an answer is read up to ``max_response_mb``. Redirects are failures (the token must not follow
    them to another host, nor verdicts come from one) and no proxy from the environment is used."""

    def __init__(
        self,
        url: str | Sequence[str],
        token: str | None = None,
        token_env: str = "REWARD_SANDBOX_TOKEN",
        timeout_s: float = 300.0,
        retries: int = 2,
        backoff_s: float = 1.0,
        cooldown_s: float = 30.0,
        resolve: bool = True,
        max_response_mb: float = 256.0,
    ) -> None:
        urls = split_urls(url)
        if not urls:
            raise ValueError("no reward server URL given")
        for given in urls:
            if urlsplit(given).scheme not in ("http", "https"):
                raise ValueError(f"reward server URL {given!r}: expected http:// or https://")
        if resolve:
            urls = tuple(dict.fromkeys(u for given in urls for u in expand_url(given)))
        self.servers = [ServerHealth(u) for u in urls]
        self.url = ", ".join(urls)
        self.token = token or token_from_env(token_env)
        self.token_env = token_env
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.cooldown_s = cooldown_s
        self.max_response = int(max_response_mb * 1024 * 1024)
        self.level = "remote"
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=min(4 * len(self.servers), 64), thread_name_prefix="reward-client")

    def health(self) -> list[dict[str, Any]]:
        """Per server: healthy, batches and jobs graded, failures, the last error."""
        with self._lock:
            return [asdict(s) for s in self.servers]

    def _request(self, url: str, method: str, path: str, body: bytes | None, timeout_s: float) -> tuple[int, bytes]:
        """Status and body of one request, all of it within ``timeout_s`` (a timer shuts the socket
        down, which wakes a blocked read). http.client follows no redirect and uses no proxy."""
        parts = urlsplit(url)
        connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        connection = connection_class(parts.hostname or "", parts.port, timeout=timeout_s)
        expired = threading.Event()

        def cut() -> None:
            expired.set()
            sock = connection.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(timeout_s, cut)
        timer.daemon = True
        timer.start()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            connection.request(method, parts.path + path, body=body, headers=headers)
            response = connection.getresponse()
            declared = response.getheader("content-length")
            if declared is not None and declared.strip().isdigit() and int(declared) > self.max_response:
                raise BadAnswer(f"answer of {declared} bytes, more than {self.max_response}")
            data = response.read(self.max_response + 1)
            if expired.is_set():
                raise TimeoutError(f"no complete answer within {timeout_s:g} s")
            if len(data) > self.max_response:
                raise BadAnswer(f"answer larger than {self.max_response} bytes")
            return response.status, data
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set():
                raise TimeoutError(f"no complete answer within {timeout_s:g} s") from None
            raise exc
        finally:
            timer.cancel()
            connection.close()

    def grade(self, items: Sequence[Job | dict[str, Any] | InvalidJob]) -> list[Result]:
        """Results in input order; records that already failed to parse are answered here as
        ``invalid_input`` and not sent."""
        sent = [i for i in items if not isinstance(i, InvalidJob)]
        graded = iter(self._grade_remote(sent) if sent else [])
        return [
            invalid_result(i.job_id or f"#{n}", str(i)) if isinstance(i, InvalidJob) else next(graded)
            for n, i in enumerate(items)
        ]

    def _probe(self, server: ServerHealth) -> bool:
        """A server that failed gets real work again only once its /healthz answers."""
        try:
            status, data = self._request(server.url, "GET", "/healthz", None, min(self.timeout_s, 10.0))
            if status != 200 or json.loads(data).get("status") != "ok":
                raise BadAnswer(f"/healthz answered {status}")
        except (BadAnswer, OSError, http.client.HTTPException, ValueError, AttributeError) as exc:
            self._failed(server, f"health probe: {type(exc).__name__}: {exc}")
            return False
        return True

    def _usable(self, candidates: list[ServerHealth]) -> list[ServerHealth]:
        """``candidates`` that are healthy, or were down and now pass a health probe (in parallel)."""
        with self._lock:
            unsure = [s for s in candidates if not s.healthy]
        passed = dict(zip([s.url for s in unsure], self._pool.map(self._probe, unsure)))
        return [s for s in candidates if passed.get(s.url, True)]

    def _grade_remote(self, items: Sequence[Job | dict[str, Any]]) -> list[Result]:
        records = [i.to_dict() if isinstance(i, Job) else i for i in items]
        results: list[Result | None] = [None] * len(records)
        pending = list(range(len(records)))
        attempt, last, first = 0, "no server tried", True
        piece = max(1, len(records))  # most jobs in one request; halved when a server answers 413
        rejected: dict[str, str] = {}  # servers that refused this batch's requests, and why
        while pending:
            now = time.monotonic()
            with self._lock:
                open_ = [s for s in self.servers if s.url not in rejected]
                alive = [s for s in open_ if s.down_until <= now]
            if not alive and first:  # all cooling down from earlier batches: try them now, no wait
                alive = open_
            elif not alive:
                if attempt >= self.retries:
                    break
                attempt += 1
                log.warning("reward server %s failed (%s); retry %d/%d", self.url, last, attempt, self.retries)
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
                alive = open_  # every server gets another chance
            first = False
            alive = self._usable(alive)
            if not alive:
                continue
            shares = [pending[k :: len(alive)] for k in range(len(alive))]
            tasks = [
                (server, share[i : i + piece])
                for server, share in zip(alive, shares)
                for i in range(0, len(share), piece)
            ]
            outcomes = list(
                self._pool.map(self._send, [t[0] for t in tasks], [[records[i] for i in t[1]] for t in tasks])
            )
            pending = []
            for (server, share), outcome in zip(tasks, outcomes):
                if isinstance(outcome, _Failure):
                    last = outcome.reason
                    pending.extend(share)
                    if outcome.too_large and len(share) > 1:
                        piece = min(piece, len(share) // 2)
                    elif outcome.rejected:
                        rejected[server.url] = outcome.reason
                else:
                    for position, result in zip(share, outcome):
                        if expected_ids([records[position]])[0] is None:  # named by its place in the share
                            result = dataclasses.replace(result, id=f"#{position}")
                        results[position] = result
            if pending and len(rejected) == len(self.servers):
                raise RequestRejected("; ".join(f"reward server {r}" for r in rejected.values()))
            pending.sort()
        if pending and len(pending) == len(records):
            raise RemoteGraderError(f"reward server {self.url} failed after {attempt + 1} tries: {last}")
        for position in pending:  # graded nowhere: unknown, never the program's fault
            record = records[position]
            job_id = str(record.get("id", f"#{position}")) if isinstance(record, dict) else f"#{position}"
            results[position] = Result(id=job_id, status=Status.SANDBOX_ERROR, reason=f"no reward server: {last}")
        return [r for r in results if r is not None]

    def _send(self, server: ServerHealth, records: list[Any]) -> list[Result] | _Failure:
        """One share to one server: its results, or why it failed (the server is then marked down,
        except for a 413 on a share that can still be split)."""
        try:
            status, data = self._request(
                server.url, "POST", "/v1/grade", json.dumps({"jobs": records}).encode(), self.timeout_s
            )
            if status == 413 and len(records) > 1:
                return _Failure(f"{server.url}: HTTP 413 for {len(records)} jobs", too_large=True)
            if status in (401, 403):
                return _Failure(self._unauthorized(server, status, data), rejected=True)
            if status in (400, 413):  # the server refuses the request itself; another may not
                reason = self._failed(server, f"HTTP {status}: {data[:200].decode(errors='replace')}")
                return _Failure(reason, rejected=True)
            if status != 200:
                raise BadAnswer(f"HTTP {status}" + (" (redirects are not followed)" if 300 <= status < 400 else ""))
            results = parse_answer(data, records)
        except (BadAnswer, OSError, http.client.HTTPException) as exc:
            return _Failure(self._failed(server, f"{type(exc).__name__}: {exc}"))
        with self._lock:
            if not server.healthy:
                log.warning("reward server %s is back", server.url)
            server.healthy, server.down_until, server.failed_in_a_row = True, 0.0, 0
            server.unauthorized = False
            server.batches_ok += 1
            server.jobs_ok += len(results)
        return results

    def _unauthorized(self, server: ServerHealth, status: int, data: bytes) -> str:
        """A server that refuses our token is up and answering, so it is not marked down (that log
        line sent people looking for an outage): the error names the configuration to fix, is
        logged once per server, and the server sits out ``cooldown_s`` before it is asked again."""
        given = "no bearer token is set" if not self.token else "the bearer token given does not match the server's"
        error = (
            f"HTTP {status}, refused our token ({given}): a configuration error, not an outage; "
            f"set ${self.token_env} (or ${self.token_env}_FILE) to the server's token"
        )
        with self._lock:
            if not server.unauthorized:
                log.error("reward server %s: %s", server.url, error)
            server.unauthorized = True
            server.down_until = time.monotonic() + self.cooldown_s
            server.failures += 1
            server.last_error = f"{error} ({data[:200].decode(errors='replace')})"
        return f"{server.url}: {error}"

    def _failed(self, server: ServerHealth, error: str) -> str:
        """Mark ``server`` down; each failure in a row doubles its cooldown (up to 16x)."""
        with self._lock:
            if server.healthy:
                log.warning("reward server %s is down (%s); its share goes to the others", server.url, error)
            server.healthy = False
            server.failed_in_a_row += 1
            server.down_until = time.monotonic() + self.cooldown_s * 2 ** min(server.failed_in_a_row - 1, 4)
            server.failures += 1
            server.last_error = error
        return f"{server.url}: {error}"

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    def __enter__(self) -> RemoteGrader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
