"""A client for ``reward-sandbox serve`` with the same ``grade(items)`` shape as :class:`Grader`.

Standard library only. Failed requests are retried with backoff; when every try fails it
raises, and the trainer turns that batch's cargo rewards into None (unknown) with a log line.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from .jobs import InvalidJob, Job
from .results import Result, invalid_result

log = logging.getLogger("reward_sandbox")


class RemoteGraderError(RuntimeError):
    """The reward server could not grade a batch (unreachable, refused, or bad answer)."""


class RemoteGrader:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        token_env: str = "REWARD_SANDBOX_TOKEN",
        timeout_s: float = 300.0,
        retries: int = 2,
        backoff_s: float = 1.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token or os.environ.get(token_env) or None
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.level = "remote"

    def _post(self, body: bytes) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{self.url}/v1/grade", data=body, headers=headers, method="POST")
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

    def _grade_remote(self, items: Sequence[Job | dict[str, Any]]) -> list[Result]:
        body = json.dumps({"jobs": [i.to_dict() if isinstance(i, Job) else i for i in items]}).encode()
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                payload = self._post(body)
                return [Result.from_dict(r) for r in payload["results"]]
            except urllib.error.HTTPError as exc:
                exc.close()  # it holds the response's socket
                last = exc
                if exc.code in (400, 401, 413):  # our request is wrong: retrying will not help
                    break
            except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
                last = exc
            if attempt < self.retries:
                log.warning("reward server %s failed (%s); retry %d/%d", self.url, last, attempt + 1, self.retries)
                time.sleep(self.backoff_s * 2**attempt)
        raise RemoteGraderError(f"reward server {self.url} failed after {self.retries + 1} tries: {last}")

    def close(self) -> None:
        pass

    def __enter__(self) -> RemoteGrader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
