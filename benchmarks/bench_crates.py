"""Grading rate of crate-using programs next to std-only ones: the same corpus shape, the same run.

Each template is one task written twice, once with std alone and once with a crate of the set
(regex, itertools, md5, num, serde_json, once_cell), with one hidden test. Each task becomes a
GRPO-shaped group of G completions, a quarter each correct, failing, not compiling, and correct with
a clippy warning; every completion differs (a comment), so nothing is deduplicated or cached. Both
corpora are graded by the same grader, batched (the default) and single, after a warm-up that also
makes the crate set ready (its one-time build is timed and reported on its own). Target: the crate
corpus grades at least half as fast as the std one (the rlibs are linked, never rebuilt).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import machine, provenance

from reward_sandbox import Grader
from reward_sandbox.cache import ResultCache
from reward_sandbox.compile.crates import ensure
from reward_sandbox.compile.toolchain import find_toolchain

# name -> (std body, crate body, signature, hidden test); `{bug}` is where the failing kind changes a value
TEMPLATES: dict[str, tuple[str, str, str, str]] = {
    "digits": (
        "s.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty()).map(|p| p.to_string()).skip({bug}).collect()",
        'regex::Regex::new(r"\\d+").unwrap().find_iter(s).map(|m| m.as_str().to_string()).skip({bug}).collect()',
        "pub fn digits(s: &str) -> Vec<String>",
        '#[test]\nfn h() { assert_eq!(digits("a1b22c333"), vec!["1", "22", "333"]); }',
    ),
    "joined": (
        'let mut v = v.to_vec();\n    v.sort();\n    v.iter().skip({bug}).map(|x| x.to_string()).collect::<Vec<_>>().join(",")',
        'use itertools::Itertools;\n    v.iter().sorted().skip({bug}).join(",")',
        "pub fn joined(v: &[i32]) -> String",
        '#[test]\nfn h() { assert_eq!(joined(&[3, 1, 2]), "1,2,3"); }',
    ),
    "digest": (
        'format!("{:016x}", s.bytes().fold(0xcbf29ce484222325u64 + {bug}, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3)))',
        'format!("{:x}", md5::compute(format!("{}{}", s, "x".repeat({bug})))).chars().take(16).collect()',
        "pub fn digest(s: &str) -> String",
        '#[test]\nfn h() { assert_eq!(digest("abc"), EXPECT); }',
    ),
    "factorial": (
        "(1..=n as u128).fold(1u128 + {bug}, |a, b| a * b).to_string()",
        "(1..=n).fold(num::BigUint::from(1u32 + {bug}), |a, b| a * b).to_string()",
        "pub fn factorial(n: u32) -> String",
        '#[test]\nfn h() { assert_eq!(factorial(25), "15511210043330985984000000"); }',
    ),
    "field": (
        "s.split(|c: char| !c.is_ascii_digit() && c != '-').filter(|p| !p.is_empty()).next().unwrap().parse::<i64>().unwrap() + {bug}",
        'serde_json::from_str::<serde_json::Value>(s).unwrap()["a"].as_i64().unwrap() + {bug}',
        "pub fn field(s: &str) -> i64",
        '#[test]\nfn h() { assert_eq!(field(r#"{"a": 41}"#), 41); }',
    ),
    "table": (
        "static T: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();\n"
        "    T.get_or_init(|| (0..20).map(|i| i * i + {bug}).collect())[n]",
        "static T: once_cell::sync::Lazy<Vec<u64>> = once_cell::sync::Lazy::new(|| (0..20).map(|i| i * i + {bug}).collect());\n"
        "    T[n]",
        "pub fn table(n: usize) -> u64",
        "#[test]\nfn h() { assert_eq!(table(7), 49); }",
    ),
}
KINDS = ("correct", "failing", "compile_error", "warning")
_EXPECT = {"std": '"e71fa2190541574b"', "crates": '"900150983cd24fb0"'}  # digest("abc"): FNV-1a, md5


def program(name: str, variant: str, kind: str, n: int) -> dict:  # type: ignore[type-arg]
    std, crate, signature, test = TEMPLATES[name]
    body = (std if variant == "std" else crate).replace("{bug}", "1" if kind == "failing" else "0")
    if kind == "compile_error":
        body += " + not_defined_here"
    if kind == "warning":  # clippy::needless_return
        body = "return {\n    " + body + "\n    };"
    source = f"// completion {n}\n{signature} {{\n    {body}\n}}\n"
    tests = test.replace("EXPECT", _EXPECT[variant])
    return {"id": f"{variant}-{name}-{kind}-{n}", "source": source, "tests": tests}


def corpus(variant: str, groups: int, size: int) -> list[dict]:  # type: ignore[type-arg]
    names = list(TEMPLATES)
    jobs = []
    for g in range(groups):
        name = names[g % len(names)]
        jobs += [program(name, variant, KINDS[i % len(KINDS)], g * size + i) for i in range(size)]
    return jobs


def rate(grader: Grader, jobs: list[dict]) -> tuple[float, list]:  # type: ignore[type-arg]
    start = time.perf_counter()
    results = grader.grade(jobs)
    return len(jobs) / (time.perf_counter() - start), results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=12, help="tasks per corpus (G completions each)")
    parser.add_argument("--size", type=int, default=8, help="completions per task (G)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/crates.json"))
    args = parser.parse_args()
    toolchain = find_toolchain()
    start = time.perf_counter()
    built = ensure(toolchain.version, toolchain.cargo)
    ready_s = time.perf_counter() - start
    std_jobs, crate_jobs = corpus("std", args.groups, args.size), corpus("crates", args.groups, args.size)
    rates: dict[str, float] = {}
    statuses: dict[str, dict[str, int]] = {}
    in_batches: dict[str, int] = {}
    for batch in (True, False):
        with Grader(workers=args.workers, cache=ResultCache(), batch=batch) as grader:
            mode = "batched" if grader.batch else "single"
            grader.grade([program("digits", v, "correct", -1 - batch) for v in ("std", "crates")])  # warm up
            for variant, jobs in (("std", std_jobs), ("crates", crate_jobs)):
                rates[f"{mode}_{variant}"], results = rate(grader, jobs)
                in_batches[f"{mode}_{variant}"] = sum("batch" in r.measures for r in results)
                statuses[f"{mode}_{variant}"] = {
                    s: sum(r.status.value == s for r in results) for s in sorted({r.status.value for r in results})
                }
    expected = {
        "ok": 2 * len(std_jobs) // len(KINDS),
        "test_failure": len(std_jobs) // len(KINDS),
        "compile_error": len(std_jobs) // len(KINDS),
    }
    modes = sorted({k.rsplit("_", 1)[0] for k in rates})
    report = {
        "jobs_per_corpus": len(std_jobs),
        "workers": args.workers,
        "machine": machine(),
        "crate_set": {"key": built.key, "versions": built.versions, "ready_s": round(ready_s, 2)},
        "completions_per_s": {k: round(v, 2) for k, v in rates.items()},
        "crates_vs_std": {m: round(rates[f"{m}_crates"] / rates[f"{m}_std"], 2) for m in modes},
        "statuses": statuses,
        "graded_in_a_batch": in_batches,
        "targets": {
            "crates>=0.5x_std": all(rates[f"{m}_crates"] >= 0.5 * rates[f"{m}_std"] for m in modes),
            "statuses_as_built": all(s == expected for s in statuses.values()),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report["provenance"] = provenance()  # commit, host, command, time
    args.out.write_text(json.dumps(report, indent=2))
    print(
        f"corpus: {len(std_jobs)} completions per variant ({args.groups} tasks x {args.size}); crate set ready in {ready_s:.2f}s"
    )
    print(f"{'mode':<10}{'std/s':>10}{'crates/s':>10}{'ratio':>8}")
    for m in modes:
        print(f"{m:<10}{rates[f'{m}_std']:>10.2f}{rates[f'{m}_crates']:>10.2f}{report['crates_vs_std'][m]:>8.2f}")
    print(f"statuses: {statuses}")
    print(f"graded in a batch: {in_batches}")
    print(f"targets: {report['targets']}; wrote {args.out}")
    return 0 if all(report["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
