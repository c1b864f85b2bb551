"""Unprivileged uids for untrusted code, unique on this host.

Each worker slot runs its programs as its own uid, so RLIMIT_NPROC binds per slot, a program
cannot signal or read another job's processes, and leftover processes can be found by uid.
Two graders on one host (a CLI run beside a server) must never share a uid: each slot holds an
exclusive ``flock`` on its uid's lock file for the grader's lifetime.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

UID_BASE = 61000
UID_COUNT = 1000
LOCK_DIR = Path("/run/reward-sandbox") if os.path.isdir("/run") else Path("/tmp/reward-sandbox-uids")


class SlotsExhausted(RuntimeError):
    """Every sandbox uid on this host is held by another grader."""


class UidLease:
    """``count`` distinct uids, held until :meth:`release`."""

    def __init__(self, count: int) -> None:
        LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.uids: list[int] = []
        self._files: list[int] = []
        for uid in range(UID_BASE, UID_BASE + UID_COUNT):
            if len(self.uids) == count:
                break
            fd = os.open(LOCK_DIR / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.uids.append(uid)
            self._files.append(fd)
        if len(self.uids) < count:
            self.release()
            raise SlotsExhausted(f"fewer than {count} free sandbox uids in {UID_BASE}..{UID_BASE + UID_COUNT - 1}")

    def release(self) -> None:
        for fd in self._files:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._files, self.uids = [], []
