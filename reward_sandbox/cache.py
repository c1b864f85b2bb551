"""Content-addressed result cache: the same program, tests, toolchain and limits give the same
verdict, so they are never compiled twice (in a batch or across runs)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from .jobs import Job
from .limits import Limits
from .results import Result
from .status import Status

HARNESS_VERSION = "5"  # bump when grading logic changes what a result says
UNCACHEABLE = {Status.SANDBOX_ERROR, Status.INVALID_INPUT}  # our fault or the input's, never the program's


def job_key(
    job: Job, toolchain_version: str, backend: str, limits: Limits, isolation: str, memory_scope: str = "job"
) -> str:
    """The hash of everything a verdict depends on (a timeout is cached with the limits it hit);
    the job's id is deliberately not part of it. A verdict from a weaker isolation level is never
    served to a stronger one."""
    payload = {k: v for k, v in job.to_dict().items() if k != "id"}
    settings = [toolchain_version, backend, limits.with_run_timeout(job.timeout_s).to_dict(), isolation, memory_scope]
    blob = json.dumps([HARNESS_VERSION, payload, *settings], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def default_cache_dir() -> Path:
    base = os.environ.get("REWARD_SANDBOX_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "reward-sandbox"
    )
    return Path(base)


class ResultCache:
    """An in-memory LRU in front of an optional directory of JSON files (atomic writes)."""

    def __init__(self, directory: Path | None = None, memory_items: int = 50_000) -> None:
        self.directory = directory
        self.memory_items = memory_items
        self._memory: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Result | None:
        with self._lock:
            data = self._memory.get(key)
            if data is not None:
                self._memory.move_to_end(key)
        if data is None and self.directory is not None:
            try:
                data = json.loads(self._path(key).read_text())
            except (OSError, ValueError):
                data = None
        with self._lock:
            if data is None:
                self.misses += 1
                return None
            self.hits += 1
            self._remember(key, data)
        return Result.from_dict(data)

    def put(self, key: str, result: Result) -> None:
        if result.status in UNCACHEABLE:
            return
        data = result.to_dict()
        with self._lock:
            self._remember(key, data)
        if self.directory is not None:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, path)

    def _remember(self, key: str, data: dict[str, Any]) -> None:
        self._memory[key] = data
        self._memory.move_to_end(key)
        while len(self._memory) > self.memory_items:
            self._memory.popitem(last=False)
