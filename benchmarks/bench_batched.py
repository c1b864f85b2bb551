"""Throughput of batched grading on GRPO-shaped groups, against single grading, a fair naive cargo
harness and the bare-rustc floor, on the same corpus in the same run.

- corpus:  G=8 completions per prompt sharing the prompt's hidden test, a quarter each correct,
           failing (hidden and own tests fail), not compiling, and correct with a clippy warning;
- batched: reward_sandbox's default (bubblewrap, fast backend, batching by settings), all cores, no cache;
- single:  the same grader with batching off (one sandbox and one compiler run per completion);
- naive:   a fresh cargo project per completion (program + hidden tests as a test module), then
           `cargo build`, `cargo clippy`, `cargo test`, unsandboxed, on as many workers as the harness;
- naive, sequential: the same on one worker, as the public reference run did (for reference only);
- floor:   bare unsandboxed `rustc --test -C debuginfo=0` of program + hidden tests, then running
           the binary, per completion, as many workers.
Verdicts of batched and single grading must be identical. Targets: batched >= 10x naive on equal
workers, and batched faster than the single-rustc floor.
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
from corpus import grouped

from reward_sandbox import Grader
from reward_sandbox.cache import ResultCache
from reward_sandbox.compile.toolchain import find_toolchain


def with_hidden(job: dict) -> str:
    return job["source"] + "\n#[cfg(test)]\nmod hidden {\n    use super::*;\n" + job["tests"] + "\n}\n"


def verdict(r) -> tuple:  # type: ignore[no-untyped-def,type-arg]
    h, o = r.tests.hidden, r.tests.own
    return (r.status.value, r.build.ok, r.clippy.warnings, h.trusted, h.passed, h.failed, o.trusted, o.passed, o.failed)


def graded(jobs: list[dict], workers: int, batch: bool) -> tuple[float, list, str]:  # type: ignore[type-arg]
    with Grader(workers=workers, cache=ResultCache(), batch=batch) as grader:
        grader.grade([{k: v for k, v in j.items() if k != "kind"} for j in grouped(2, seed=999_999)])  # warm up
        start = time.perf_counter()
        results = grader.grade(jobs)
        return time.perf_counter() - start, results, grader.level


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=8, help="prompts (G=8 completions each)")
    parser.add_argument("--naive-n", type=int, default=12, help="completions for the (slow) naive harness")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/batched.json"))
    args = parser.parse_args()
    toolchain = find_toolchain()
    cargo = shutil.which("cargo") or str(toolchain.cargo)
    corpus = grouped(args.groups, size=8, seed=int(time.time()) % 1000)
    jobs = [{k: v for k, v in j.items() if k != "kind"} for j in corpus]

    batched_s, batched, level = graded(jobs, args.workers, batch=True)
    single_s, single, _ = graded(jobs, args.workers, batch=False)
    floor_s = timed(lambda s: floor_one(s, str(toolchain.rustc)), [with_hidden(j) for j in jobs], args.workers)
    naive_jobs = jobs[:: max(1, len(jobs) // args.naive_n)][: args.naive_n]
    naive_s = timed(lambda s: naive_one(s, cargo), [with_hidden(j) for j in naive_jobs], args.workers)
    sequential_s = timed(lambda s: naive_one(s, cargo), [with_hidden(j) for j in naive_jobs], 1)

    rates = {
        "batched": len(jobs) / batched_s,
        "single": len(jobs) / single_s,
        "floor": len(jobs) / floor_s,
        "naive": len(naive_jobs) / naive_s,
        "naive_sequential": len(naive_jobs) / sequential_s,
    }
    mismatches = [j["id"] for j, a, b in zip(jobs, batched, single) if verdict(a) != verdict(b)]
    from_batch = sum("batch" in r.measures for r in batched)
    report = {
        "jobs": len(jobs),
        "groups": args.groups,
        "naive_jobs": len(naive_jobs),
        "workers": args.workers,
        "workers_note": "batched, single, floor and naive on `workers` each; naive_sequential on 1",
        "machine": machine(),
        "isolation": level,
        "completions_per_s": {k: round(v, 2) for k, v in rates.items()},
        "batched_vs_naive": round(rates["batched"] / rates["naive"], 2),
        "batched_vs_naive_sequential": round(rates["batched"] / rates["naive_sequential"], 2),
        "batched_vs_single": round(rates["batched"] / rates["single"], 2),
        "batched_vs_floor": round(rates["batched"] / rates["floor"], 2),
        "graded_in_a_batch": from_batch,
        "statuses": {s: sum(r.status.value == s for r in batched) for s in sorted({r.status.value for r in batched})},
        "verdict_mismatches": mismatches,
        "targets": {
            "batched>=10x_naive": rates["batched"] >= 10 * rates["naive"],
            "batched>floor": rates["batched"] > rates["floor"],
            "verdicts_identical": not mismatches,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report["provenance"] = provenance()  # commit, host, command, time
    args.out.write_text(json.dumps(report, indent=2))
    print(f"corpus: {len(jobs)} completions in {args.groups} groups of 8 ({report['statuses']}), isolation={level}")
    print(f"{'approach':<18}{'workers':>8}{'completions/s':>15}")
    for name, rate in rates.items():
        print(f"{name:<18}{1 if name == 'naive_sequential' else args.workers:>8}{rate:>15.2f}")
    print(
        f"batched vs naive (equal workers) {report['batched_vs_naive']}x (target >= 10x), vs naive sequential "
        f"{report['batched_vs_naive_sequential']}x, vs single {report['batched_vs_single']}x, "
        f"vs floor {report['batched_vs_floor']}x (target > 1); {from_batch}/{len(jobs)} graded in a batch; "
        f"verdict mismatches: {len(mismatches)}"
    )
    print(f"wrote {args.out}")
    return 0 if all(report["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
