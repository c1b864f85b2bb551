"""A client for one or many ``reward-sandbox serve`` instances, with the ``grade(items)`` shape of :class:`Grader`.

Standard library only. A batch is split into shares, one per healthy server, sent in
parallel and put back together in input order. A server that fails (unreachable, reset, 5xx, a
wrong answer) is marked down for ``cooldown_s`` and its share is re-split over the others at once;
when every server is down the client waits (backoff) and tries them all again, ``retries`` times.
A transport failure is never a verdict: what no server could grade comes back as ``sandbox_error``
(the trainer's rewards for it are None, unknown), and when nothing at all could be graded the
call raises, as before. A hostname that resolves to several addresses (``docker compose up
--scale rewards=N``) counts as one server per address.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .auth import token_from_env
from .jobs import InvalidJob, Job
from .results import Result, invalid_result
from .status import Status

log = logging.getLogger("reward_sandbox")

_TRANSPORT = (urllib.error.URLError, OSError, http.client.HTTPException, ValueError, KeyError, TypeError)


class RemoteGraderError(RuntimeError):
    """No reward server could grade a batch (unreachable, refused, or bad answers)."""


class RequestRejected(RemoteGraderError):
    """A server refused the request itself (400/401/413): every server would, so it is not retried."""


def split_urls(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"http://a:8808, http://b:8808"`` or a list of URLs -> a tuple of URLs without trailing slashes."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    return tuple(p.strip().rstrip("/") for p in parts if p.strip())


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
    last_error: str = ""


class RemoteGrader:
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
    ) -> None:
        urls = split_urls(url)
        if not urls:
            raise ValueError("no reward server URL given")
        if resolve:
            urls = tuple(dict.fromkeys(u for given in urls for u in expand_url(given)))
        self.servers = [ServerHealth(u) for u in urls]
        self.url = ", ".join(urls)
        self.token = token or token_from_env(token_env)
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.cooldown_s = cooldown_s
        self.level = "remote"
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=min(len(self.servers), 64), thread_name_prefix="reward-client")

    def health(self) -> list[dict[str, Any]]:
        """Per server: healthy, batches and jobs graded, failures, the last error."""
        with self._lock:
            return [asdict(s) for s in self.servers]

    def _post(self, url: str, body: bytes) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{url}/v1/grade", data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            payload = json.loads(response.read())
        if not isinstance(payload, dict):
            raise ValueError("the reward server did not answer with a JSON object")
        return payload

    def grade(self, items: Sequence[Job | dict[str, Any] | InvalidJob]) -> list[Result]:
        """Results in input order; records that already failed to parse are answered here as
        ``invalid_input`` and not sent."""
        sent = [i for i in items if not isinstance(i, InvalidJob)]
        graded = iter(self._grade_remote(sent) if sent else [])
        return [
            invalid_result(i.job_id or f"#{n}", str(i)) if isinstance(i, InvalidJob) else next(graded)
            for n, i in enumerate(items)
        ]

    def _alive(self) -> list[ServerHealth]:
        now = time.monotonic()
        with self._lock:
            return [s for s in self.servers if s.down_until <= now]

    def _grade_remote(self, items: Sequence[Job | dict[str, Any]]) -> list[Result]:
        records = [i.to_dict() if isinstance(i, Job) else i for i in items]
        results: list[Result | None] = [None] * len(records)
        pending = list(range(len(records)))
        attempt, last, first = 0, "no server tried", True
        while pending:
            alive = self._alive()
            if not alive and first:  # all cooling down from earlier batches: try them now, no wait
                alive = list(self.servers)
            elif not alive:
                if attempt >= self.retries:
                    break
                attempt += 1
                log.warning("reward server %s failed (%s); retry %d/%d", self.url, last, attempt, self.retries)
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
                alive = list(self.servers)  # every server gets another chance
            first = False
            shares = [pending[k :: len(alive)] for k in range(len(alive))]
            shares = [share for share in shares if share]
            outcomes = list(self._pool.map(self._send, alive[: len(shares)], [[records[i] for i in s] for s in shares]))
            pending = []
            for share, outcome in zip(shares, outcomes):
                if isinstance(outcome, RequestRejected):
                    raise outcome
                if isinstance(outcome, str):
                    last = outcome
                    pending.extend(share)
                else:
                    for position, result in zip(share, outcome):
                        results[position] = result
            pending.sort()
        if pending and len(pending) == len(records):
            raise RemoteGraderError(f"reward server {self.url} failed after {attempt + 1} tries: {last}")
        for position in pending:  # graded nowhere: unknown, never the program's fault
            record = records[position]
            job_id = str(record.get("id", f"#{position}")) if isinstance(record, dict) else f"#{position}"
            results[position] = Result(id=job_id, status=Status.SANDBOX_ERROR, reason=f"no reward server: {last}")
        return [r for r in results if r is not None]

    def _send(self, server: ServerHealth, records: list[Any]) -> list[Result] | str | RequestRejected:
        """One share to one server: its results, or why it failed (the server is then marked down)."""
        try:
            payload = self._post(server.url, json.dumps({"jobs": records}).encode())
            results = [Result.from_dict(r) for r in payload["results"]]
            if len(results) != len(records):
                raise ValueError(f"{len(results)} results for {len(records)} jobs")
        except urllib.error.HTTPError as exc:
            exc.close()  # it holds the response's socket
            if exc.code in (400, 401, 413):  # our request is wrong: every server would say so
                return RequestRejected(f"reward server {server.url} refused the batch: {exc}")
            return self._failed(server, f"{exc}")
        except _TRANSPORT as exc:
            return self._failed(server, f"{type(exc).__name__}: {exc}")
        with self._lock:
            if not server.healthy:
                log.warning("reward server %s is back", server.url)
            server.healthy, server.down_until = True, 0.0
            server.batches_ok += 1
            server.jobs_ok += len(results)
        return results

    def _failed(self, server: ServerHealth, error: str) -> str:
        with self._lock:
            if server.healthy:
                log.warning("reward server %s is down (%s); its share goes to the others", server.url, error)
            server.healthy = False
            server.down_until = time.monotonic() + self.cooldown_s
            server.failures += 1
            server.last_error = error
        return f"{server.url}: {error}"

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    def __enter__(self) -> RemoteGrader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
