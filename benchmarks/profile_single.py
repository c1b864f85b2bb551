"""Where the milliseconds of the single-program path go, from a real run.

Grades the mixed corpus (``benchmarks/corpus.py``: correct, failing, not compiling, clippy
warning) one job at a time with ``Grader(batch=False)``, timing the host's phases (wrapping the
grader's functions) and the driver's (from the control events ``run_driver`` records: a step's
begin and end, each ``scrub`` handshake, the driver's exit), then the bare floor (unsandboxed
``rustc --test -C debuginfo=0`` + one run) on the same programs. Prints the median per job of each
phase, wall and, for steps, CPU (from ``rg-run``), so a change can be judged phase by phase.
Timings on a shared machine are noisy: the load average is printed beside them; compare A/B runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import floor_one, provenance
from corpus import corpus

from reward_sandbox import Grader, grader, single
from reward_sandbox.cache import ResultCache
from reward_sandbox.compile.toolchain import find_toolchain
from reward_sandbox.isolation import cgroups
from reward_sandbox.isolation.process import DriverOutcome

phases: dict[str, list[float]] = defaultdict(list)
current: dict[str, float] = defaultdict(float)  # this job's phases, summed


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            current[name] += time.perf_counter() - start

    return wrapper


def driver_phases(outcome: DriverOutcome) -> None:
    """The driver's timeline, cut at its events: sandbox start, each step, the handshakes between."""
    last, where = 0.0, "sandbox start (bwrap + bash)"
    for at, event in outcome.events:
        if event.startswith(("stat ", "fault ")):  # rg-run's reports, inside a step
            continue
        span = at - last
        if event.startswith("end "):
            name = event.split()[1]
            current[f"step {name} (wall)"] += span
            where = f"after {name}: up to the next step"
        elif event == "scrub":
            current[where] += span
            where = "host scrub (sources, between_runs)"
        elif event == "scrubbed":
            current[where] += span
            where = "after a scrub: nonce, seal, empty /tmp"
        elif event.startswith("begin "):
            current[where] += span
            where = "?"
        elif event == "done":
            current[where] += span
            where = "after done: sandbox exit"
        elif event == "exit":
            current[where] += span
        last = at
    for name, step in outcome.steps.items():
        if step.started:
            current[f"step {name} (cpu, rg-run)"] += step.cpu_s


def instrument() -> None:
    for name in ("prepare_dirs", "assemble", "fast_plan", "driver_script", "classify", "release", "kill_uid"):
        setattr(single, name, timed(f"host {name}", getattr(single, name)))
    run = single.run_driver

    def run_driver(*args: Any, **kwargs: Any) -> DriverOutcome:
        start = time.perf_counter()
        outcome: DriverOutcome = run(*args, **kwargs)
        current["driver total (spawn to exit)"] += time.perf_counter() - start
        driver_phases(outcome)
        return outcome

    single.run_driver = run_driver  # type: ignore[assignment]
    for method in ("prepare", "oom_killed", "peak_mb", "kill_all"):
        setattr(cgroups.SlotMemory, method, timed(f"host cgroup {method}", getattr(cgroups.SlotMemory, method)))
    ResultCache.put = timed("host cache put", ResultCache.put)  # type: ignore[method-assign]
    grader.job_key = timed("host cache key", grader.job_key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=24, help="programs (a quarter of each kind)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/profile_single.json"))
    args = parser.parse_args()
    instrument()
    jobs = [{"id": j["id"], "source": j["source"]} for j in corpus(args.n, seed=int(time.time()) % 1000)]
    statuses: dict[str, int] = defaultdict(int)
    totals: list[float] = []
    with Grader(workers=1, cache=ResultCache(), batch=False) as g:
        g.grade([{"id": j["id"], "source": j["source"]} for j in corpus(4, seed=999_999)])  # warm up
        current.clear()
        for job in jobs:
            start = time.perf_counter()
            (result,) = g.grade([job])
            totals.append(time.perf_counter() - start)
            statuses[result.status.value] += 1
            for name, value in current.items():
                phases[name].append(value)
            current.clear()
    rustc = str(find_toolchain().rustc)
    floor = []
    for job in jobs:
        start = time.perf_counter()
        floor_one(job["source"], rustc)
        floor.append(time.perf_counter() - start)
    n = len(jobs)
    load = os.getloadavg()
    report: dict[str, Any] = {
        "jobs": n,
        "statuses": dict(statuses),
        "load_average": [round(x, 2) for x in load],
        "median_ms": {
            "grade() per job": round(statistics.median(totals) * 1000, 1),
            "floor per job": round(statistics.median(floor) * 1000, 1),
        },
        "mean_ms": {
            "grade() per job": round(statistics.fmean(totals) * 1000, 1),
            "floor per job": round(statistics.fmean(floor) * 1000, 1),
        },
        # a phase that not every job has (the check step: only programs that do not build) is averaged over all jobs
        "phases_mean_ms_per_job": {k: round(sum(v) / n * 1000, 1) for k, v in sorted(phases.items())},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report["provenance"] = provenance()  # commit, host, command, time
    args.out.write_text(json.dumps(report, indent=2))
    print(f"{n} programs {dict(statuses)}, 1 worker, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'per job':<52}{'median ms':>10}{'mean ms':>10}")
    for name in report["median_ms"]:
        print(f"{name:<52}{report['median_ms'][name]:>10}{report['mean_ms'][name]:>10}")
    print(
        f"harness time vs floor (means): {report['mean_ms']['grade() per job'] / report['mean_ms']['floor per job']:.2f}x"
    )
    print(f"{'phase (mean over all jobs)':<52}{'ms':>10}")
    for name, value in report["phases_mean_ms_per_job"].items():
        print(f"{name:<52}{value:>10}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
