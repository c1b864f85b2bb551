"""release_memory gives a freed heap back to the system (what lets the learning benchmark score after
training without adding the two stages' peaks)."""

from __future__ import annotations

import ctypes.util
import sys
from pathlib import Path

import pytest

from rust_grpo.memory import release_memory


def resident_mib() -> float:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None, reason="glibc")
def test_a_fragmented_heap_is_handed_back() -> None:
    chunks = [bytes(1000) + bytes([i % 256]) for i in range(300_000)]  # ~300 MiB of malloc'd 1 KB blocks
    kept = chunks[::100]  # one block in every ~100 KB stays: free() alone cannot shrink the heap past them
    del chunks
    before = resident_mib()
    release_memory()
    after = resident_mib()
    assert len(kept) == 3000
    assert before - after > 150, (before, after)
