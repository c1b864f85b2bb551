"""Content-addressed result cache: the same program, tests, toolchain and limits give the same
verdict, so they are never compiled twice (in a batch or across runs)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path

from .isolation.limits import Limits
from .jobs import Job
from .results import Result
from .status import Status

log = logging.getLogger("reward_sandbox")

HARNESS_VERSION = "10"  # bump when grading logic changes what a result says
UNCACHEABLE = {Status.SANDBOX_ERROR, Status.INVALID_INPUT}  # our fault or the input's, never the program's


def job_key(
    job: Job,
    toolchain_version: str,
    backend: str,
    limits: Limits,
    isolation: str,
    memory_scope: str = "job",
    batch: bool = False,
    crates: str = "",
) -> str:
    """The hash of everything a verdict depends on (a timeout is cached with the limits it hit);
    the job's id is deliberately not part of it. A verdict from a weaker isolation level is never
    served to a stronger one, and one graded where batching was on never to a grading with it off:
    batched verdicts are built to equal single ones, and ``--no-batch`` is how that is checked.
    ``crates`` is the crate set's key (``compile/crates.py``) for a job that links crates, so a verdict
    computed against other crate versions is never served; std-only jobs keep their keys."""
    payload = {k: v for k, v in job.to_dict().items() if k != "id"}
    settings = [toolchain_version, backend, limits.with_run_timeout(job.timeout_s).to_dict(), isolation, memory_scope]
    blob = json.dumps([HARNESS_VERSION, payload, *settings, batch, *([crates] if crates else [])], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResultCache:
    """An in-memory LRU in front of an optional directory of JSON files (atomic writes).

    Both parts are bounded in bytes, not items: one result with a megabyte of compiler warnings
    costs what it weighs. The memory part holds each result as its JSON text. The directory is
    bounded too, because a long-lived server writes one file per new program, and a client that
    sends endless distinct programs would otherwise fill the disk: past ``disk_bytes`` the least
    recently used files go (a disk hit refreshes its file's time) until 80% of the bound is left."""

    def __init__(
        self,
        directory: Path | None = None,
        memory_bytes: int = 64 * 1024 * 1024,
        disk_bytes: int = 1024 * 1024 * 1024,
    ) -> None:
        if disk_bytes <= 0:
            raise ValueError(f"disk_bytes must be positive, got {disk_bytes}")
        self.directory = directory
        self.memory_bytes = memory_bytes
        self.memory_used = 0
        self.disk_bytes = disk_bytes
        self._disk_used: int | None = None  # measured by a scan at the first write
        self._memory: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._prune_lock = threading.Lock()
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
            path = self._path(key)
            try:
                text = path.read_text()
                json.loads(text)  # a torn or foreign file is a miss
            except (OSError, ValueError):
                text = None
            else:
                with contextlib.suppress(OSError):  # a read-only cache still answers
                    os.utime(path)  # recently used: pruned last
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
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(text)
                os.replace(tmp, path)
            except OSError as exc:  # a full or read-only disk: the cache is an optimisation, grading goes on
                log.warning("result cache: cannot write %s: %s", path, exc)
                with contextlib.suppress(OSError):
                    tmp.unlink()
                return
            self._account(disk_cost(len(text.encode())))

    @property
    def disk_used(self) -> int:
        """Bytes the directory's result files take (as last measured, plus what this cache wrote since)."""
        if self._disk_used is None:
            self._prune(scan_only=True)
        return self._disk_used or 0

    def _account(self, cost: int) -> None:
        with self._lock:
            if self._disk_used is not None:
                self._disk_used += cost
            over = self._disk_used is None or self._disk_used > self.disk_bytes
        if over:
            self._prune()

    def _prune(self, scan_only: bool = False) -> None:
        """Measure the directory (other processes may share it) and, when it is over its bound,
        delete the least recently used files until 80% of the bound is left."""
        assert self.directory is not None
        if not self._prune_lock.acquire(blocking=False):
            return  # another thread is pruning; its scan will see this file too
        try:
            files = []
            stale = time.time() - 60  # a temporary file this old was left by a writer that died
            for path in self.directory.glob("*/*"):
                try:
                    st = path.stat()
                except OSError:  # pruned by another process meanwhile
                    continue
                if path.suffix == ".tmp" and st.st_mtime < stale:
                    path.unlink(missing_ok=True)
                elif path.suffix == ".json":
                    files.append((st.st_mtime, disk_cost(st.st_size), path))
            total = sum(cost for _, cost, _ in files)
            if not scan_only and total > self.disk_bytes:
                files.sort()
                for _, cost, path in files:
                    if total <= self.disk_bytes * 0.8:
                        break
                    path.unlink(missing_ok=True)
                    total -= cost
            with self._lock:
                self._disk_used = total
        finally:
            self._prune_lock.release()

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


def disk_cost(size: int) -> int:
    """What a file of ``size`` bytes takes on disk: whole 4 KiB blocks (a small result still takes one)."""
    return -(-max(size, 1) // 4096) * 4096


def entry_cost(key: str, text: str) -> int:
    """What one memory entry really costs: both strings with their object headers and the
    ordered dict's slot, not only the text (many small results would otherwise pass the budget)."""
    return sys.getsizeof(key) + sys.getsizeof(text) + _SLOT_BYTES


_SLOT_BYTES = 100  # an OrderedDict entry: hash table slot and linked-list node, measured ~100 bytes
