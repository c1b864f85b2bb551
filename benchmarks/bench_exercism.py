"""The real Exercism Rust suite (../shared/evalsets, when present): every reference solution must
pass its tests (#[ignore] tests included) and every stub must fail, graded by the sandbox.
Prints throughput; skips cleanly when ../shared is absent."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reward_sandbox import Grader
from reward_sandbox.cache import ResultCache
from rust_grpo.evaluation.verify import verify_problems
from rust_grpo.problems.importers import import_problems
from rust_grpo.problems.schema import Problem

SUITE = Path(__file__).resolve().parent.parent.parent / "shared" / "evalsets" / "exercism" / "exercism_rust.jsonl"


def main() -> int:
    if not SUITE.exists():
        print(f"skipped: {SUITE} not present")
        return 0
    problems, skipped = import_problems("exercism-jsonl", SUITE)
    stubs = [
        Problem(
            id=p.id,
            prompt=p.prompt,
            solution=p.signature,
            tests=p.tests,
            test_mode=p.test_mode,
            crate_name=p.crate_name,
            include_ignored=True,
            edition=p.edition,
        )
        for p in problems
    ]
    with Grader(cache=ResultCache()) as grader:
        start = time.perf_counter()
        report = verify_problems(problems, grader, min_asserts=0)
        stub_results = grader.grade([s.job_or_invalid(s.solution) for s in stubs])
        elapsed = time.perf_counter() - start
        level = grader.level
    stub_passes = [s.id for s, r in zip(stubs, stub_results) if r.status.value == "ok"]
    jobs = 3 * len(problems)
    print(f"exercism: {len(problems)} exercises ({len(skipped)} skipped), isolation={level}")
    print(f"  references passing: {len(problems) - len({f.split(':')[0] for f in report.failures})}/{len(problems)}")
    print(f"  shipped stubs failing: {len(stubs) - len(stub_passes)}/{len(stubs)}")
    print(f"  {jobs} gradings in {elapsed:.1f}s ({jobs / elapsed:.1f}/s)")
    for line in report.failures[:20]:
        print("  FAIL", line)
    return 0 if report.ok and not stub_passes else 1


if __name__ == "__main__":
    sys.exit(main())
