"""A generated corpus of small Rust programs in four kinds (correct, failing, non-compiling,
clippy-warning), for benchmarks and backend parity checks. Every program is unique (a seed
constant is woven in), so neither the cache nor the in-batch dedupe can shortcut the work."""

from __future__ import annotations

from typing import Any

KINDS = ("correct", "failing", "compile_error", "clippy_warning")

# (function with {k}, own tests with {k}, broken variant, clippy-warning variant)
_TEMPLATES: list[dict[str, str]] = [
    {
        "fn": "pub fn scale(xs: &[i64]) -> Vec<i64> {{\n    xs.iter().map(|x| x * {k}).collect()\n}}\n",
        "bad": "pub fn scale(xs: &[i64]) -> Vec<i64> {{\n    xs.iter().map(|x| x * ({k} + 1)).collect()\n}}\n",
        "broken": "pub fn scale(xs: &[i64]) -> Vec<i64> {{\n    xs.iter().map(|x| x * {k}).collect::<i64>()\n}}\n",
        "lint": "pub fn scale(xs: &[i64]) -> Vec<i64> {{\n    let out = xs.iter().map(|x| x * {k}).collect();\n    return out;\n}}\n",
        "test": "assert_eq!(scale(&[1, 2]), vec![{k}, 2 * {k}]);\n        assert!(scale(&[]).is_empty());",
    },
    {
        "fn": "pub fn gcd_plus(a: u64, b: u64) -> u64 {{\n    if b == 0 {{ a + {k} }} else {{ gcd_plus(b, a % b) }}\n}}\n",
        "bad": "pub fn gcd_plus(a: u64, b: u64) -> u64 {{\n    if b == 0 {{ a + {k} + 1 }} else {{ gcd_plus(b, a % b) }}\n}}\n",
        "broken": "pub fn gcd_plus(a: u64, b: u64) -> u64 {{\n    if b == 0 {{ a + {k} }} else {{ gcd_plus(b, a % b, 1) }}\n}}\n",
        "lint": "pub fn gcd_plus(a: u64, b: u64) -> u64 {{\n    if b == 0 {{ return a + {k}; }} else {{ return gcd_plus(b, a % b); }}\n}}\n",
        "test": "assert_eq!(gcd_plus(12, 18), 6 + {k});\n        assert_eq!(gcd_plus(7, 0), 7 + {k});",
    },
    {
        "fn": 'pub fn shout(s: &str) -> String {{\n    format!("{{}}{{}}", s.to_uppercase(), "!".repeat(s.len() + {m}))\n}}\n',
        "bad": 'pub fn shout(s: &str) -> String {{\n    format!("{{}}{{}}", s.to_lowercase(), "!".repeat(s.len() + {m}))\n}}\n',
        "broken": "pub fn shout(s: &str) -> String {{\n    s.to_uppercase() + {k}\n}}\n",
        "lint": 'pub fn shout(s: &str) -> String {{\n    let out = format!("{{}}{{}}", s.to_uppercase(), "!".repeat(s.len() + {m}));\n    return out;\n}}\n',
        "test": 'assert!(shout("hi").starts_with("HI!"));\n        assert_eq!(shout("").len(), {m});',
    },
    {
        "fn": "pub fn count_over(xs: &[i32]) -> usize {{\n    xs.iter().filter(|&&x| x > {k}).count()\n}}\n",
        "bad": "pub fn count_over(xs: &[i32]) -> usize {{\n    xs.iter().filter(|&&x| x >= {k}).count()\n}}\n",
        "broken": "pub fn count_over(xs: &[i32]) -> usize {{\n    xs.iter().filter(|x| x > {k}).count()\n}}\n",
        "lint": "pub fn count_over(xs: &[i32]) -> usize {{\n    xs.iter().filter(|&&x| x > {k}).count() as usize\n}}\n",
        "test": "assert_eq!(count_over(&[{k}, {k} + 1, {k} + 2]), 2);\n        assert_eq!(count_over(&[]), 0);",
    },
]


def corpus(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` jobs cycling through templates and kinds; each job records its ``kind``."""
    jobs = []
    for i in range(n):
        template = _TEMPLATES[i % len(_TEMPLATES)]
        kind = KINDS[(i // len(_TEMPLATES)) % len(KINDS)]
        k = 3 + seed * 100_003 + i
        body = {"correct": "fn", "failing": "bad", "compile_error": "broken", "clippy_warning": "lint"}[kind]
        source = template[body].format(k=k, m=k % 7 + 1)
        tests = "\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    #[test]\n    fn works() {{\n        {t}\n    }}\n}}\n"
        source += tests.format(t=template["test"].format(k=k, m=k % 7 + 1))
        jobs.append({"id": f"{kind}-{i}", "kind": kind, "source": source})
    return jobs


EXPECTED_STATUS = {"correct": "ok", "failing": "test_failure", "compile_error": "compile_error", "clippy_warning": "ok"}


def grouped(groups: int, size: int = 8, seed: int = 0) -> list[dict[str, Any]]:
    """GRPO-shaped jobs: ``groups`` prompts of ``size`` completions each. A group shares its hidden
    tests; its completions cycle through the four kinds (so G=8 holds a quarter of each) and each
    carries its own tests and a unique comment, so no two are alike."""
    jobs = []
    for g in range(groups):
        template = _TEMPLATES[g % len(_TEMPLATES)]
        k = 3 + seed * 100_003 + g
        tests = "#[test]\nfn hidden() {{\n    {t}\n}}\n".format(t=template["test"].format(k=k, m=k % 7 + 1))
        for j in range(size):
            kind = KINDS[j % len(KINDS)]
            body = {"correct": "fn", "failing": "bad", "compile_error": "broken", "clippy_warning": "lint"}[kind]
            source = f"// completion {j} of prompt {g}\n" + template[body].format(k=k, m=k % 7 + 1)
            own = "\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    #[test]\n    fn works() {{\n        {t}\n    }}\n}}\n"
            source += own.format(t=template["test"].format(k=k, m=k % 7 + 1))
            jobs.append({"id": f"g{g}-{kind}-{j}", "kind": kind, "source": source, "tests": tests})
    return jobs
