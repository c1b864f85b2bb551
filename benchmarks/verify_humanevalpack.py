"""HumanEvalPack-Rust, imported as a user would import it, checked against its own answers.

Takes a local copy of the upstream file (``data/rust/data/humanevalpack.jsonl`` of the Hugging Face
dataset ``bigcode/humanevalpack``, or the same file in the ``bigcode-project/octopack`` repository;
the project ships no copy). Each row is imported twice with ``rust_grpo.problems.importers``: with its
``canonical_solution`` as the reference (``rust-grpo data import --format humaneval``) and with its
``buggy_solution`` in its place. Every canonical solution should pass its tests and every buggy one
fail them, under the fast backend and under the cargo backend; the report lists each exception with
its status and reason, and where the backends disagree. A buggy solution that passes is a fact about
the dataset (its tests miss the bug), reported, never hidden.

    python benchmarks/verify_humanevalpack.py PATH/humanevalpack.jsonl [--backends fast,cargo]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import machine, provenance

from reward_sandbox import Grader, Result, Status
from reward_sandbox.backends import BACKENDS
from reward_sandbox.cache import ResultCache
from rust_grpo.problems.importers import humaneval_problem, import_problems
from rust_grpo.problems.schema import DataError, Problem, read_records

VARIANTS = {"canonical": "canonical_solution", "buggy": "buggy_solution"}
UPSTREAM_ROWS = 164


def import_variants(path: Path) -> tuple[dict[str, list[Problem]], dict[str, list[str]], int]:
    """The problems of each variant and the records each variant could not import (with reasons),
    and how many records the file holds. The canonical import is the importer's own entry point."""
    records = read_records(str(path))
    canonical, skipped = import_problems("humaneval", path)
    problems, refused = {"canonical": canonical}, {"canonical": skipped}
    problems["buggy"], refused["buggy"] = [], []
    for where, record in records:
        try:
            if isinstance(record, DataError):
                raise record
            problems["buggy"].append(humaneval_problem(record, VARIANTS["buggy"]))
        except (DataError, KeyError, TypeError) as exc:
            refused["buggy"].append(f"{where}: {exc}")
    return problems, refused, len(records)


def expected(variant: str, result: Result) -> bool:
    """A canonical solution passes; a buggy one fails for its own reasons (a sandbox error is the
    harness's, not the solution's, so it counts as neither)."""
    if variant == "canonical":
        return result.status is Status.OK
    return result.status not in (Status.OK, Status.SANDBOX_ERROR)


def grade(backend: str, problems: dict[str, list[Problem]], workers: int) -> tuple[dict[str, list[Result]], float]:
    """Both variants in one ``grade`` call (batched as training would grade them), with a fresh
    cache: a verdict from an earlier run or the other backend is never served."""
    jobs = [p.job_or_invalid(p.solution, f"{p.id}#{variant}") for variant in VARIANTS for p in problems[variant]]
    with Grader(workers=workers, backend=backend, cache=ResultCache()) as grader:
        start = time.perf_counter()
        results = grader.grade(jobs)
        elapsed = time.perf_counter() - start
    out, at = {}, 0
    for variant in VARIANTS:
        out[variant], at = results[at : at + len(problems[variant])], at + len(problems[variant])
    return out, elapsed


def verdict(result: Result) -> dict[str, Any]:
    """Status, reason, the end of what the compiler or the tests printed and each step's exit code,
    signal and CPU time: enough to tell a dataset's fault from the sandbox's without grading again."""
    tail = result.output_tail or result.tests.output
    steps = {
        name: {key: step.get(key) for key in ("exit_code", "signal", "cpu_s")}
        for name, step in result.measures.get("steps", {}).items()
    }
    return {"status": result.status.value, "reason": result.reason, "tail": tail[-800:], "steps": steps}


def summarize(problems: dict[str, list[Problem]], graded: dict[str, dict[str, list[Result]]]) -> dict[str, Any]:
    """Counts per backend and variant, every exception, and every problem whose status the backends
    disagree on (a disagreement between two failures still says one backend classifies differently)."""
    per_backend: dict[str, Any] = {}
    exceptions = []
    for backend, results in graded.items():
        counts = {}
        for variant in VARIANTS:
            counts[variant] = {
                "as_expected": sum(expected(variant, r) for r in results[variant]),
                "of": len(results[variant]),
                "statuses": dict(Counter(r.status.value for r in results[variant]).most_common()),
            }
            exceptions += [
                {"id": p.id, "solution": variant, "backend": backend, **verdict(r)}
                for p, r in zip(problems[variant], results[variant])
                if not expected(variant, r)
            ]
        per_backend[backend] = counts
    disagreements = []
    if len(graded) > 1:
        for variant in VARIANTS:
            for i, problem in enumerate(problems[variant]):
                verdicts = {b: verdict(results[variant][i]) for b, results in graded.items()}
                if len({v["status"] for v in verdicts.values()}) > 1:
                    disagreements.append({"id": problem.id, "solution": variant, **verdicts})
    return {"per_backend": per_backend, "exceptions": exceptions, "backend_disagreements": disagreements}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, help="HumanEvalPack's Rust split (humanevalpack.jsonl)")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated: fast, cargo")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/humanevalpack.json"))
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or set(backends) - set(BACKENDS):
        parser.error(f"--backends: choose among {', '.join(BACKENDS)}")
    problems, refused, rows = import_variants(args.path)
    graded, seconds = {}, {}
    for backend in backends:
        graded[backend], seconds[backend] = grade(backend, problems, args.workers)
    report = {
        "source": str(args.path),
        "machine": machine(),
        "workers": args.workers,
        "rows": rows,
        "imported": {variant: len(problems[variant]) for variant in VARIANTS},
        "not_imported": refused,
        "crates": dict(Counter(c for p in problems["canonical"] for c in p.crates)),
        "grading_s": {b: round(s, 1) for b, s in seconds.items()},
        **summarize(problems, graded),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report["provenance"] = provenance()  # commit, host, command, time
    args.out.write_text(json.dumps(report, indent=2))
    print(
        f"{args.path}: {rows} rows (upstream: {UPSTREAM_ROWS}); imported canonical "
        f"{len(problems['canonical'])}/{rows}, buggy {len(problems['buggy'])}/{rows}; crates used: {report['crates']}"
    )
    for backend, counts in report["per_backend"].items():
        canonical, buggy = counts["canonical"], counts["buggy"]
        print(
            f"{backend:>6}: canonical pass {canonical['as_expected']}/{canonical['of']}, "
            f"buggy fail {buggy['as_expected']}/{buggy['of']} ({buggy['statuses']}); {seconds[backend]:.0f}s"
        )
    for item in report["exceptions"]:
        print(f"  EXCEPTION {item['backend']} {item['id']} {item['solution']}: {item['status']}: {item['reason']}")
    for item in report["backend_disagreements"]:
        said = "; ".join(f"{b} {item[b]['status']} ({item[b]['reason']})" for b in graded)
        print(f"  BACKENDS DIFFER {item['id']} {item['solution']}: {said}")
    for variant, lines in refused.items():
        for line in lines:
            print(f"  NOT IMPORTED ({variant}) {line}")
    print(f"wrote {args.out}")
    clean = rows == len(problems["canonical"]) == len(problems["buggy"]) and not report["exceptions"]
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
