"""Grading latency of one realistic GRPO training step, measured here and projected to more cores.

A step's completions: ``--groups`` prompts (16) x G=8 completions (128), GRPO-shaped as in
``bench_batched.py`` (a group shares its hidden test; a quarter each correct, failing, not
compiling, clippy-warning), graded the way training grades them (batching on, no cache), once per
``--workers`` value (1 and 2 by default). For each: the step's wall time, the CPU time it used (this
process and every sandbox it started: core-seconds, the cost a bigger machine divides up), and the
wall time of every unit of work (a batch's build and runs; a program graded alone, including the
ones a batch sent alone after its build failed on them).

The projection replays those units, as measured with one worker (no contention), on W workers the
way the pool schedules them (batches first, then programs alone; a batch's leftovers queue when it
ends): the step's time on W cores is then bounded below by its longest chain (a batch and what it
sends alone), not by the core count. The replay with 2 workers is printed beside the measured
figure, so the model's error on this machine is in the report. It assumes a core per worker and no
other load. The replay keeps the one-worker run's batches (16 programs each); the pool cuts more,
smaller batches for more workers (``reward_sandbox/grader.py``), so beyond as many workers as batches it is
pessimistic, and the CPU time divided by W (``cpu_bound``: W cores fully used) the other estimate (smaller
batches cost a little more CPU each). The generation time a GPU takes per step is the number to
compare them with: grading keeps up when the projected time is below it (or grade on R reward
servers of W/R cores each).
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import machine, provenance
from corpus import grouped

from reward_sandbox import Grader
from reward_sandbox.cache import ResultCache


class CpuMeter:
    """CPU seconds used by this process and everything it starts, sandboxes included. A process in
    bubblewrap's pid namespace is reaped there and never reaches this process's RUSAGE_CHILDREN,
    so where cgroup v1 ``cpuacct`` is writable (root) this process moves into a cpuacct group of
    its own, where every process it starts is born, and reads its usage; elsewhere it falls back to
    the rusage of this process and its direct children (the sandboxes' own work then uncounted)."""

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self) -> None:
        self.group: Path | None = None
        try:
            group = self.ROOT / f"rg-bench-{os.getpid()}"
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
            self.group = group
        except OSError:
            self.group = None

    def read(self) -> float:
        if self.group is not None:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    @property
    def source(self) -> str:
        return "cpuacct cgroup" if self.group is not None else "rusage (sandboxes uncounted)"

    def close(self) -> None:
        if self.group is None:
            return
        with contextlib.suppress(OSError):
            (self.ROOT / "cgroup.procs").write_text(str(os.getpid()))
        for _ in range(50):  # a sandbox's last processes may take a moment to be gone
            try:
                self.group.rmdir()
                return
            except OSError:
                time.sleep(0.1)


class Recorder:
    """Times every unit the pool runs: batches (with the ids they send alone) and programs alone."""

    def __init__(self, grader: Grader) -> None:
        self.lock = threading.Lock()
        self.batches: list[tuple[float, list[str]]] = []  # wall, ids sent alone, in submission order
        self.alone: dict[str, float] = {}
        one, batch = grader._grade_one, grader._grade_batch

        def grade_one(job: Any, *more: Any) -> Any:
            start = time.perf_counter()
            try:
                return one(job, *more)
            finally:
                with self.lock:
                    self.alone[job.id] = time.perf_counter() - start

        def grade_batch(jobs: list[Any]) -> Any:
            start = time.perf_counter()
            got = batch(jobs)
            with self.lock:
                self.batches.append((time.perf_counter() - start, [jobs[k].id for k in got.alone]))
            return got

        grader._grade_one = grade_one  # type: ignore[method-assign]
        grader._grade_batch = grade_batch  # type: ignore[method-assign]


def replay(rec: Recorder, workers: int) -> float:
    """The step's wall time on ``workers`` cores: list scheduling of the measured units."""
    sent = {i for _, ids in rec.batches for i in ids}
    queue: list[tuple[float, float, list[str]]] = [(0.0, wall, ids) for wall, ids in rec.batches]
    queue += [(0.0, wall, []) for i, wall in rec.alone.items() if i not in sent]
    free = [0.0] * workers
    end = 0.0
    ready: list[tuple[float, int, float, list[str]]] = [(t, n, w, ids) for n, (t, w, ids) in enumerate(queue)]
    heapq.heapify(ready)
    count = len(ready)
    while ready:
        at, _, wall, ids = heapq.heappop(ready)
        worker = min(range(workers), key=lambda k: free[k])
        start = max(free[worker], at)
        free[worker] = start + wall
        end = max(end, free[worker])
        for i in ids:  # queued when the batch ends, behind what was queued before
            count += 1
            heapq.heappush(ready, (free[worker], count, rec.alone.get(i, 0.0), []))
    return end


def measure(jobs: list[dict[str, Any]], workers: int, meter: CpuMeter) -> tuple[dict[str, Any], Recorder]:
    with Grader(workers=workers, cache=ResultCache()) as grader:
        grader.grade([{k: v for k, v in j.items() if k != "kind"} for j in grouped(2, seed=999_999)])  # warm up
        rec = Recorder(grader)
        load = os.getloadavg()[0]
        cpu, start = meter.read(), time.perf_counter()
        results = grader.grade(jobs)
        wall, used = time.perf_counter() - start, meter.read() - cpu
    statuses = {s: sum(r.status.value == s for r in results) for s in sorted({r.status.value for r in results})}
    return {
        "workers": workers,
        "wall_s": round(wall, 2),
        "cpu_s": round(used, 2),
        "cpu_ms_per_completion": round(used / len(jobs) * 1000, 1),
        "load_average_at_start": round(load, 2),
        "units": {"batches": len(rec.batches), "alone": len(rec.alone)},
        "statuses": statuses,
    }, rec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=16, help="prompts per step (G=8 completions each)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to measure")
    parser.add_argument("--project", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--out", type=Path, default=Path("runs/bench/step_latency.json"))
    args = parser.parse_args()
    corpus = grouped(args.groups, size=8, seed=int(time.time()) % 1000)
    jobs = [{k: v for k, v in j.items() if k != "kind"} for j in corpus]
    measured, recorders = [], {}
    meter = CpuMeter()
    try:
        for workers in args.workers:
            figures, rec = measure(jobs, workers, meter)
            measured.append(figures)
            recorders[workers] = rec
    finally:
        meter.close()
    base = recorders[min(recorders)]  # the least contended measurement
    projection = {str(w): round(replay(base, w), 2) for w in args.project}
    cpu = measured[0]["cpu_s"]
    cpu_bound = {str(w): round(cpu / w, 2) for w in args.project}
    for figures in measured:
        figures["replayed_wall_s"] = round(replay(base, figures["workers"]), 2)
    longest = max([w for w, _ in base.batches] + list(base.alone.values()) + [0.0])
    report = {
        "completions": len(jobs),
        "groups": args.groups,
        "machine": machine(),
        "measured": measured,
        "cpu_from": meter.source,
        "projected_wall_s_by_workers": projection,
        "projection_from": f"units measured with {min(recorders)} worker(s), replayed on W cores",
        "cpu_bound_wall_s_by_workers": cpu_bound,
        "longest_unit_s": round(longest, 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report["provenance"] = provenance()  # commit, host, command, time
    args.out.write_text(json.dumps(report, indent=2))
    print(f"one training step: {len(jobs)} completions, {args.groups} prompts x G=8, batching on")
    print(f"{'workers':>8}{'wall s':>9}{'replayed s':>12}{'CPU s':>8}{'CPU ms/completion':>19}{'load':>7}")
    for f in measured:
        print(
            f"{f['workers']:>8}{f['wall_s']:>9}{f['replayed_wall_s']:>12}{f['cpu_s']:>8}"
            f"{f['cpu_ms_per_completion']:>19}{f['load_average_at_start']:>7}"
        )
    print("projected wall seconds per step on W cores (one worker each, no other load):")
    print("  replayed:  " + "  ".join(f"W={w}: {s}" for w, s in projection.items()))
    print("  CPU / W:   " + "  ".join(f"W={w}: {s}" for w, s in cpu_bound.items()))
    print(f"  floor: the longest unit, {report['longest_unit_s']} s (a batch's build and runs)")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
