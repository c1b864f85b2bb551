"""Interleaved A/B timing of grading, between two checkouts of this project (or one and the floor).

On a shared machine, two runs one after the other see different loads; this alternates instead:
one long-lived worker process per side (each imports ``reward_sandbox`` from its own tree), and
every program of the corpus is graded by A, then by B, then the next by B, then by A (ABBA), so a
load change costs both sides alike. Reports each side's median and mean per program, the load
average, and whether the two sides' verdicts are identical.

    python benchmarks/ab_single.py --a /tmp/base --b . -n 32          # a change against its base
    python benchmarks/ab_single.py --a floor --b . -n 32               # the harness against the floor
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
mode = sys.argv[2]
if mode == "floor":
    sys.path.insert(0, sys.argv[1] + "/benchmarks")
    from baselines import floor_one
    from reward_sandbox.compile.toolchain import find_toolchain
    rustc = str(find_toolchain().rustc)
else:
    from reward_sandbox import Grader
    from reward_sandbox.cache import ResultCache
    grader = Grader(workers=int(sys.argv[3]), cache=ResultCache(), batch=mode == "batch")
print("ready", flush=True)
for line in sys.stdin:
    jobs = json.loads(line)
    start = time.perf_counter()
    if mode == "floor":
        for job in jobs:
            floor_one(job["source"] + ("\n#[cfg(test)]\nmod hidden {\n    use super::*;\n" + job["tests"] + "\n}\n" if job.get("tests") else ""), rustc)
        verdicts = []
    else:
        verdicts = [[r.status.value, r.build.ok, r.clippy.warnings, r.tests.hidden.passed, r.tests.hidden.failed,
                     r.tests.own.passed, r.tests.own.failed, r.tests.own.trusted] for r in grader.grade(jobs)]
    print(json.dumps({"s": time.perf_counter() - start, "v": verdicts}), flush=True)
"""


class Side:
    def __init__(self, tree: str, mode: str, workers: int) -> None:
        root = Path(__file__).resolve().parent.parent
        where = str(root) if tree == "floor" else str(Path(tree).resolve())
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, where, "floor" if tree == "floor" else mode, str(workers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=where,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        self.times: list[float] = []
        self.verdicts: list[object] = []

    def run(self, jobs: list[dict[str, str]]) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(jobs) + "\n")
        self.proc.stdin.flush()
        got = json.loads(self.proc.stdout.readline())
        self.times.append(got["s"] / len(jobs))
        self.verdicts.extend(got["v"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="a checkout's root, or 'floor'")
    parser.add_argument("--b", required=True, help="a checkout's root, or 'floor'")
    parser.add_argument("-n", type=int, default=32, help="programs")
    parser.add_argument("--corpus", choices=("mixed", "grouped"), default="mixed")
    parser.add_argument("--mode", choices=("single", "batch"), default="single", help="how a checkout grades")
    parser.add_argument("--unit", type=int, default=1, help="programs per timed call (8: one GRPO group)")
    parser.add_argument("--workers", type=int, default=1, help="the grader's workers (the floor runs on one)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corpus import corpus, grouped

    seed = int(time.time()) % 1000
    if args.corpus == "mixed":
        jobs = [{"id": j["id"], "source": j["source"]} for j in corpus(args.n, seed=seed)]
    else:
        jobs = [{k: v for k, v in j.items() if k != "kind"} for j in grouped(max(1, args.n // 8), seed=seed)]
    warm = [{"id": j["id"], "source": j["source"]} for j in corpus(4, seed=999_999)]
    a, b = Side(args.a, args.mode, args.workers), Side(args.b, args.mode, args.workers)
    a.run(warm), b.run(warm)
    a.times.clear(), b.times.clear(), a.verdicts.clear(), b.verdicts.clear()
    load_before = os.getloadavg()
    units = [jobs[i : i + args.unit] for i in range(0, len(jobs), args.unit)]
    for i, unit in enumerate(units):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        first.run(unit)
        second.run(unit)
    a.close(), b.close()
    load_after = os.getloadavg()
    report = {
        "programs": len(jobs),
        "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "a": {"tree": args.a, "median_ms": round(statistics.median(a.times) * 1000, 1)},
        "b": {"tree": args.b, "median_ms": round(statistics.median(b.times) * 1000, 1)},
    }
    report["a"]["mean_ms"] = round(statistics.fmean(a.times) * 1000, 1)
    report["b"]["mean_ms"] = round(statistics.fmean(b.times) * 1000, 1)
    report["b_time_vs_a"] = round(statistics.fmean(b.times) / statistics.fmean(a.times), 3)
    if a.verdicts and b.verdicts:
        report["verdicts_identical"] = a.verdicts == b.verdicts
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
