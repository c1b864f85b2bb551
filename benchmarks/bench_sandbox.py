"""Throughput of the reward harness against the naive approach and the bare-compiler floor.

- harness: reward_sandbox fast backend, bubblewrap isolation, all cores, no cache, as shipped
           (distinct programs share compiler runs: batching by settings);
- single:  the same with batching off: every program alone, one sandbox and one compiler run each
           (the path of `--no-batch`, integration and main-mode jobs, programs kept out of batches);
- naive:   a fresh cargo project per completion, then `cargo build`, `cargo clippy`, `cargo test`
           one after another, no sandbox, on as many workers as the harness (equal cores);
- naive, sequential: the same on one worker, as the public reference run did (for reference only:
           the ratio to it carries the core count);
- floor:   bare unsandboxed `rustc --test -C debuginfo=0` + running the binary, as many workers.
All on the same generated corpus (correct, failing, non-compiling, clippy-warning programs) in
the same run. Targets: harness >= 5x naive on equal workers, and harness time <= the floor's; the
single path's time against the floor's is reported beside them (goal: <= 1x) without deciding the exit
status.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import floor_one, machine, naive_one, provenance, timed
from corpus import corpus

from reward_sandbox import Grader
from reward_sandbox.cache import ResultCache
from reward_sandbox.compile.toolchain import find_toolchain


def v(r):  # type: ignore[no-untyped-def]
    """What a verdict says (bench_batched.verdict's fields)."""
    o = r.tests.own
    return (r.status.value, r.build.ok, r.clippy.warnings, o.trusted, o.passed, o.failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=48, help="corpus size for harness and floor")
    parser.add_argument("--naive-n", type=int, default=12, help="corpus size for the (slow) naive approach")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/sandbox.json"))
    args = parser.parse_args()
    toolchain = find_toolchain()
    cargo = shutil.which("cargo") or str(toolchain.cargo)
    jobs = [{"id": j["id"], "source": j["source"]} for j in corpus(args.n, seed=int(time.time()) % 1000)]
    naive_jobs = jobs[: args.naive_n]

    with Grader(workers=args.workers, cache=ResultCache()) as grader:
        grader.grade(corpus(4, seed=999_999))  # warm the page cache for the toolchain
        start = time.perf_counter()
        results = grader.grade(jobs)
        harness_s = time.perf_counter() - start
        level = grader.level
    with Grader(workers=args.workers, cache=ResultCache(), batch=False) as grader:
        grader.grade(corpus(4, seed=999_998))
        start = time.perf_counter()
        single = grader.grade(jobs)
        single_s = time.perf_counter() - start
    floor_s = timed(lambda s: floor_one(s, str(toolchain.rustc)), [j["source"] for j in jobs], args.workers)
    naive_s = timed(lambda s: naive_one(s, cargo), [j["source"] for j in naive_jobs], args.workers)
    sequential_s = timed(lambda s: naive_one(s, cargo), [j["source"] for j in naive_jobs], 1)

    rates = {
        "harness": len(jobs) / harness_s,
        "single": len(jobs) / single_s,
        "floor": len(jobs) / floor_s,
        "naive": len(naive_jobs) / naive_s,
        "naive_sequential": len(naive_jobs) / sequential_s,
    }
    speedup = rates["harness"] / rates["naive"]
    floor_ratio = rates["floor"] / rates["harness"]
    report = {
        "jobs": len(jobs),
        "naive_jobs": len(naive_jobs),
        "workers": args.workers,
        "workers_note": "harness, single, floor and naive on `workers` each; naive_sequential on 1 (the reference run's way)",
        "machine": machine(),
        "isolation": level,
        "completions_per_s": {k: round(v, 2) for k, v in rates.items()},
        "speedup_vs_naive": round(speedup, 2),
        "speedup_vs_naive_sequential": round(rates["harness"] / rates["naive_sequential"], 2),
        "time_vs_floor": round(floor_ratio, 3),
        "single_time_vs_floor": round(rates["floor"] / rates["single"], 3),
        "graded_in_a_batch": sum("batch" in r.measures for r in results),
        "verdicts_identical_to_single": [v(r) for r in results] == [v(r) for r in single],
        "statuses": {s: sum(r.status.value == s for r in results) for s in {r.status.value for r in results}},
        "targets": {
            "speedup_vs_naive>=5": speedup >= 5,
            "time_vs_floor<=1": floor_ratio <= 1.0,
            "verdicts_identical": [v(r) for r in results] == [v(r) for r in single],
        },
        "goals": {"single_time_vs_floor<=1": rates["floor"] <= rates["single"]},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report["provenance"] = provenance()  # commit, host, command, time
    args.out.write_text(json.dumps(report, indent=2))
    print(f"corpus: {len(jobs)} programs ({report['statuses']}), {args.workers} workers, isolation={level}")
    print(f"{'approach':<18}{'workers':>8}{'completions/s':>15}")
    for name, rate in rates.items():
        print(f"{name:<18}{1 if name == 'naive_sequential' else args.workers:>8}{rate:>15.2f}")
    print(
        f"harness vs naive (equal workers): {speedup:.1f}x (target >= 5x); vs naive sequential "
        f"{report['speedup_vs_naive_sequential']}x; harness time vs floor: {floor_ratio:.2f}x (target <= 1x); "
        f"single path vs floor: {report['single_time_vs_floor']}x (goal <= 1x); "
        f"{report['graded_in_a_batch']}/{len(jobs)} graded in a batch, verdicts identical to single: "
        f"{report['verdicts_identical_to_single']}"
    )
    print(f"wrote {args.out}")
    return 0 if all(report["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
