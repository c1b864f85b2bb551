"""Content-addressed result cache: the same program, tests, toolchain and limits give the same
verdict, so they are never compiled twice (in a batch or across runs)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from collections import OrderedDict
from pathlib import Path

from .jobs import Job
from .limits import Limits
from .results import Result
from .status import Status

HARNESS_VERSION = "6"  # bump when grading logic changes what a result says
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
    """An in-memory LRU in front of an optional directory of JSON files (atomic writes).

    The memory part holds each result as its JSON text and is bounded in bytes, not items: one
    result with a megabyte of compiler warnings costs what it weighs."""

    def __init__(self, directory: Path | None = None, memory_bytes: int = 64 * 1024 * 1024) -> None:
        self.directory = directory
        self.memory_bytes = memory_bytes
        self.memory_used = 0
        self._memory: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Result | None:
        with self._lock:
            text = self._memory.get(key)
            if text is not None:
                self._memory.move_to_end(key)
        if text is None and self.directory is not None:
            try:
                text = self._path(key).read_text()
                json.loads(text)  # a torn or foreign file is a miss
            except (OSError, ValueError):
                text = None
        with self._lock:
            if text is None:
                self.misses += 1
                return None
            self.hits += 1
            self._remember(key, text)
        return Result.from_dict(json.loads(text))

    def put(self, key: str, result: Result) -> None:
        if result.status in UNCACHEABLE:
            return
        text = json.dumps(result.to_dict())
        with self._lock:
            self._remember(key, text)
        if self.directory is not None:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)

    def _remember(self, key: str, text: str) -> None:
        """Newest last; the oldest go until the texts fit (one larger than the whole budget is not kept)."""
        old = self._memory.pop(key, None)
        if old is not None:
            self.memory_used -= entry_cost(key, old)
        cost = entry_cost(key, text)
        if cost > self.memory_bytes:
            return
        self._memory[key] = text
        self.memory_used += cost
        while self.memory_used > self.memory_bytes:
            dropped_key, dropped = self._memory.popitem(last=False)
            self.memory_used -= entry_cost(dropped_key, dropped)


def entry_cost(key: str, text: str) -> int:
    """What one memory entry really costs: both strings with their object headers and the
    ordered dict's slot, not only the text (many small results would otherwise pass the budget)."""
    return sys.getsizeof(key) + sys.getsizeof(text) + _SLOT_BYTES


_SLOT_BYTES = 100  # an OrderedDict entry: hash table slot and linked-list node, measured ~100 bytes
