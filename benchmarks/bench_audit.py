"""Time of `rust-grpo data audit` (issue 50): seconds per row and per graded program (reference and
mutants) for each shipped problem set, on all cores, bubblewrap, batched grading; kill rates beside.

    python benchmarks/bench_audit.py [--sets data/eval.jsonl ...] [--out runs/bench/audit.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import provenance

from reward_sandbox import Grader, Limits
from rust_grpo.evaluation.suite_audit import summarize, timed_audit, usable_rows

SETS = [
    "data/eval.jsonl",
    "data/basics-eval.jsonl",
    "data/train.jsonl",
    "data/basics-train.jsonl",
    "data/drills-train.jsonl",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=SETS)
    parser.add_argument("--mutants", type=int, default=20, help="most mutants a row (the CLI's default)")
    parser.add_argument("--timeout", type=float, default=2.0, help="CPU seconds a test run (the CLI's default)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/audit.json"))
    args = parser.parse_args()
    report: dict[str, object] = {"provenance": provenance(), "sets": {}}
    with Grader(limits=Limits().with_run_timeout(args.timeout)) as grader:
        for spec in args.sets:
            problems, errors = usable_rows(spec)
            audits, seconds = timed_audit(problems, grader, args.mutants)
            s = summarize(audits, errors, seconds, {"file": spec})
            keep = ("rows", "measured", "mutants", "kill_rate", "seconds", "seconds_per_row", "seconds_per_job", "weak")
            report["sets"][spec] = {k: s[k] for k in keep}  # type: ignore[index]
            rate = s["kill_rate"]["mean"]
            print(
                f"{spec}: {s['rows']} rows, {s['mutants']['made']} mutants in {s['seconds']} s "
                f"({s['seconds_per_row']} s a row, {s['seconds_per_job']} s a program); "
                f"mean kill rate {rate:.2f}, {len(s['weak'])} weak",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
