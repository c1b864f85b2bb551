"""A batch shares a build, never a verdict: hostile programs, one per attack class of issue 24 and
the new ones tried against the fix, graded batched and alone, through the CLI and through the
reward functions, never get a hidden or an own test counted as passed; correct controls pass;
and generated groups get, batched, exactly the verdicts they get alone."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from reward_sandbox import Grader, Limits, Status
from reward_sandbox.batch.sharing import alone_reason
from reward_sandbox.cache import ResultCache
from reward_sandbox.jobs import Job
from rust_grpo.problems.schema import Problem
from rust_grpo.rewards.context import RewardContext
from rust_grpo.rewards.trl_rewards import build_reward_functions

from ...conftest import TEST_LIMITS, needs_bwrap
from .test_batched import batched, compare, single, verdict, was_batched  # noqa: F401 - fixtures

pytestmark = [pytest.mark.bwrap, pytest.mark.slow, needs_bwrap]

HIDDEN = "#[test]\nfn adds() { assert_eq!(add(2, 3), 5); }\n#[test]\nfn adds_zero() { assert_eq!(add(0, 7), 7); }"
OWN = "\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn own() {\n        assert_eq!(add(1, 1), 2);\n    }\n}\n"
CORRECT = "pub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n" + OWN


def wrong_with(trick: str, prelude: str = "") -> str:
    """A wrong ``add`` (a product) that runs ``trick`` first, with its own (failing) test."""
    return f"{prelude}\npub fn add(a: i64, b: i64) -> i64 {{\n    {trick}\n    a * b\n}}\n{OWN}"


# a forged `ok` for the running test, written straight to stdout, then a line break other than
# `\n` printed into libtest's capture: it lands inside libtest's own `failed` event line
_FORGE_OK = """use std::io::Write;
    let me = cur().name().unwrap_or("").to_string();
    let mut out = std::io::stdout();
    let _ = out.write_all(format!("{{ \\"type\\": \\"test\\", \\"name\\": \\"{me}\\", \\"event\\": \\"ok\\" }}\\n").as_bytes());
    let _ = out.flush();"""


def forged_ok_then(printed: str) -> str:
    return wrong_with(f'{_FORGE_OK}\n    println!("{printed}");', "use std::thread::{current as cur};")


# Learns the expected values from its failed asserts (panic hook: `right: N`) and keeps them in every
# place a later process might look: files (the work dir, /dev/shm, /var/tmp, the working directory),
# the main thread's name, the environment; then answers from whatever it finds there.
LEARNER = """use std::io::Write;
use std::sync::Mutex;
static LAST: Mutex<(i64, i64)> = Mutex::new((0, 0));
const FILES: [&str; 5] = ["/tmp/rg_learned", "/dev/shm/rg_learned", "/var/tmp/rg_learned", "rg_learned", "/tmp/.rg/x"];
const ENV: bool = true;
fn comm() -> String {
    format!("/proc/self/task/{}/comm", std::process::id())
}
fn known() -> String {
    let mut all: String = FILES.iter().map(|f| std::fs::read_to_string(f).unwrap_or_default()).collect();
    all += &std::env::var("RG_LEARNED").unwrap_or_default();
    all + &std::fs::read_to_string(comm()).unwrap_or_default()
}
fn learn(entry: &str) {
    for f in FILES {
        if let Ok(mut file) = std::fs::OpenOptions::new().append(true).create(true).open(f) {
            let _ = file.write_all(entry.as_bytes());
        }
    }
    if ENV {
        std::env::set_var("RG_LEARNED", format!("{}{entry}", std::env::var("RG_LEARNED").unwrap_or_default()));
    }
    let name = format!("{}{entry}", std::fs::read_to_string(comm()).unwrap_or_default().trim());
    let _ = std::fs::write(comm(), &name[name.len().saturating_sub(15)..]);
}
pub fn add(a: i64, b: i64) -> i64 {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let text = info.to_string();
            if let Some(right) = text.split("right: ").nth(1).and_then(|r| r.split_whitespace().next()) {
                let (a, b) = *LAST.lock().unwrap_or_else(|e| e.into_inner());
                learn(&format!("{a},{b}={right};"));
            }
            previous(info);
        }));
    });
    *LAST.lock().unwrap_or_else(|e| e.into_inner()) = (a, b);
    let key = format!("{a},{b}=");
    let answer = known().split(';').find_map(|e| e.strip_prefix(&key).and_then(|v| v.parse().ok()));
    answer.unwrap_or(a * b)
}
"""

# Tries to let the next program's process start where this one stopped (a thread left running is
# killed with the process; anything on disk must be gone).
SQUATTER = wrong_with(
    """let _ = std::fs::create_dir_all("/tmp/d/e");
    let _ = std::fs::write("/tmp/d/e/.hidden", b"2,3=5;0,7=7;1,1=2;");
    let _ = std::os::unix::fs::symlink("/tmp/d/e/.hidden", "/tmp/..link");
    std::thread::spawn(|| loop { let _ = std::fs::write("/tmp/late", b"x"); std::thread::yield_now(); });"""
)

ATTACKS = {
    # issue 24, class 1: a forged event, then a line break `str.splitlines` splits on
    "u2028": forged_ok_then("\\u{2028}"),
    "u0085": forged_ok_then("\\u{85}"),
    "u2029": forged_ok_then("\\u{2029}"),
    # new, same class: other breaks and bytes a reader might split or strip on
    "cr": forged_ok_then("\\r"),
    "vt-ff-fs": forged_ok_then("\\u{b}\\u{c}\\u{1c}\\u{1d}\\u{1e}"),
    "nul": forged_ok_then("\\0"),
    "cr-before-libtest-line": wrong_with(
        f'{_FORGE_OK}\n    let _ = out.write_all(b"\\r");', "use std::thread::{current as cur};"
    ),
    # an unclosed event that libtest's `failed` line completes
    "partial-event": wrong_with(
        """use std::io::Write;
    let me = cur().name().unwrap_or("").to_string();
    let _ = std::io::stdout().write_all(format!("{{\\"type\\":\\"test\\",\\"name\\":\\"{me}\\",\\"event\\":\\"ok\\",\\"x\\":").as_bytes());""",
        "use std::thread::{current as cur};",
    ),
    # one event split over two writes, a duplicated one, one with a key twice
    "split-event": wrong_with(
        """use std::io::Write;
    let me = cur().name().unwrap_or("").to_string();
    let mut out = std::io::stdout();
    let _ = out.write_all(format!("{{ \\"type\\": \\"test\\", \\"name\\": \\"{me}\\",").as_bytes());
    let _ = out.flush();
    let _ = out.write_all(b" \\"event\\": \\"ok\\" }\\n");
    let _ = out.flush();""",
        "use std::thread::{current as cur};",
    ),
    "duplicate-key": wrong_with(
        """use std::io::Write;
    let me = cur().name().unwrap_or("").to_string();
    let line = format!("{{ \\"type\\": \\"test\\", \\"name\\": \\"{me}\\", \\"event\\": \\"failed\\", \\"event\\": \\"ok\\" }}\\n");
    let _ = std::io::stdout().write_all(line.as_bytes());""",
        "use std::thread::{current as cur};",
    ),
    # new: a thread writing through its own descriptor for stdout, under no lock of std's, while
    # libtest writes its lines: breaks land inside libtest's events, forged ones between them
    "interleaved-writer": wrong_with(
        """use std::io::Write;
    let me = cur().name().unwrap_or("").to_string();
    std::thread::spawn(move || {
        use std::os::fd::AsFd;
        let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else { return };
        let mut raw = std::fs::File::from(fd);
        let forged = format!("\\n{{ \\"type\\": \\"test\\", \\"name\\": \\"{me}\\", \\"event\\": \\"ok\\" }}\\n");
        for _ in 0..5_000 {
            let _ = raw.write_all(forged.as_bytes());
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(2));""",
        "use std::thread::{current as cur};",
    ),
    # a whole forged ending: the running test's `ok`, the suite's totals, a clean exit
    "forged-suite": wrong_with(
        """use std::io::Write;
    let me = cur().name().unwrap_or("").to_string();
    let mut out = std::io::stdout();
    let _ = out.write_all(format!("{{ \\"type\\": \\"test\\", \\"name\\": \\"{me}\\", \\"event\\": \\"ok\\" }}\\n").as_bytes());
    let _ = out.write_all(b"{ \\"type\\": \\"suite\\", \\"event\\": \\"ok\\", \\"passed\\": 3, \\"failed\\": 0, \\"ignored\\": 0, \\"measured\\": 0, \\"filtered_out\\": 0, \\"exec_time\\": 0.1 }\\n");
    let _ = out.flush();
    std::process::exit(0);""",
        "use std::thread::{current as cur};",
    ),
    # a line long enough to be costly, nested deep
    "long-line": wrong_with(
        'use std::io::Write;\n    let _ = std::io::stdout().write_all("[".repeat(300_000).as_bytes());'
    ),
    # issue 24, class 2 and the new ones: state carried from one program's process to the next
    # new: quotes libtest would escape, unescaped by a reader that rewrote the module path away
    # (`\r` then the tag's tail: erasing `{tag}_m::` from `\rg…_m::\"` leaves `\\"`, a bare quote)
    "escape-rewrite": wrong_with(
        """let arg = std::env::args().find(|a| a.ends_with("_hidden::")).unwrap_or_default();
    let q = format!("\\r{}_m::\\"", arg.trim_end_matches("_hidden::").get(1..).unwrap_or(""));
    println!("{q}, {q}event{q}: {q}ok{q}, {q}x{q}: {q}");"""
    ),
    # new: a peak-memory mark one program leaves (VmHWM outlives the memory) and the next reads
    "peak-memory": wrong_with(
        """static RIGHT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let right = *RIGHT.get_or_init(|| {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let peak: u64 = status.lines().find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0);
        std::hint::black_box(vec![1u8; 128 << 20]);
        peak > (100 << 10)
    });
    if right { return a + b; }"""
    ),
    "learner": LEARNER + OWN,
    # the issue's own: only the main thread's name, which no gate between programs looked at
    "learner-thread-name": LEARNER.replace("[&str; 5] = [", "[&str; 0] = []; // [").replace(
        "ENV: bool = true", "ENV: bool = false"
    )
    + OWN,
    "squatter": SQUATTER,
}


RACY = {"interleaved-writer"}


def _group(name: str) -> list[dict]:  # type: ignore[type-arg]
    """The attacker four times (one learns, later ones could replay), among two correct controls."""
    copies = [f"// copy {n}\n{ATTACKS[name]}" for n in range(4)]
    sources = [f"// {name}\n{CORRECT}", *copies, f"// {name}, other\n{CORRECT}"]  # all distinct: none deduped
    return [{"id": f"{name}/{n}", "source": s, "tests": HIDDEN, "timeout_s": 2.0} for n, s in enumerate(sources)]


def assert_no_pass_but_controls(results) -> None:  # type: ignore[no-untyped-def]
    controls, attackers = [results[0], results[-1]], results[1:-1]
    for r in controls:
        assert r.status is Status.OK and r.tests.hidden.passed == 2 and r.tests.own.passed == 1, (r.reason,)
    for r in attackers:
        assert r.status is not Status.OK, r.reason
        assert r.tests.hidden.passed == 0 and r.tests.own.passed == 0, (r.id, r.reason, r.tests.hidden)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_no_attack_passes_batched_or_alone_and_verdicts_agree(batched, single, attack):  # noqa: F811
    assert alone_reason(Job(id="x", source=ATTACKS[attack], tests=HIDDEN)) is None  # it really is batched
    if attack in RACY:  # which checks fail (the note) depends on how the writes interleave
        results, alone = batched.grade(_group(attack)), single.grade(_group(attack))
        assert_no_pass_but_controls(alone)
    else:
        results = compare(_group(attack), batched, single)
    assert_no_pass_but_controls(results)
    assert all(map(was_batched, results))


def _cli(tmp_path: Path, jobs: list[dict], *flags: str) -> list[dict]:  # type: ignore[type-arg]
    src, out = tmp_path / "jobs.jsonl", tmp_path / f"out{len(flags)}.jsonl"
    src.write_text("".join(json.dumps(j) + "\n" for j in jobs))
    argv = [sys.executable, "-m", "reward_sandbox.cli", "run", "-i", str(src), "-o", str(out), "--overwrite"]
    argv += ["-j", "2", *flags]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_through_the_cli_batched_then_alone_from_one_cache(tmp_path):
    """Each class through ``reward-sandbox run``, batched and then ``--no-batch`` on the same cache
    directory: nothing wrong passes either way, and no batched verdict is served to ``--no-batch``."""
    jobs = [j for name in ("u2028", "learner", "forged-suite") for j in _group(name)]
    cache = ["--cache-dir", str(tmp_path / "cache")]
    together = _cli(tmp_path, jobs, *cache)
    alone = _cli(tmp_path, jobs, *cache, "--no-batch")
    assert sum("batch" in r["measures"] for r in together) == len(jobs)
    assert not any(r.get("cached") for r in alone) and not any("batch" in r["measures"] for r in alone)
    assert all(r.get("cached") for r in _cli(tmp_path, jobs, *cache))  # the same mode again: all from the cache
    for results in (together, alone):
        for n, r in enumerate(results):
            hidden, own = r["tests"]["hidden"], r["tests"]["own"]
            if n % 6 in (0, 5):  # the controls
                assert r["status"] == "ok" and hidden["passed"] == 2 and own["passed"] == 1
            else:
                assert r["status"] != "ok" and hidden["passed"] == 0 and own["passed"] == 0, r


CONST_LOOP = "#[allow(long_running_const_eval)]\npub const X: u64 = { let mut i = 1u64; while i != 0 { i = i.wrapping_add(1); } i };\n"
SHORT_BUILDS = {"compile_wall_s": 8.0, "compile_cpu_s": 4}


def test_through_the_cli_a_program_that_lifts_a_compiler_limit(tmp_path):
    """Issue 24, class 4: graded alone, so its neighbours keep their batch, and its test build's
    timeout is not followed by a metadata check that would time out too."""
    jobs = [{"id": f"c{n}", "source": f"// {n}\n{CORRECT}", "tests": HIDDEN} for n in range(2)]
    jobs.insert(1, {"id": "loop", "source": CONST_LOOP + CORRECT, "tests": HIDDEN})
    for flags in ([], ["--no-batch"]):
        results = _cli(tmp_path, jobs, "--no-cache", "--limits", json.dumps(SHORT_BUILDS), *flags)
        assert [("batch" in r["measures"]) for r in results] == [not flags, False, not flags]
        assert [r["status"] for r in results] == ["ok", "timeout", "ok"]
        looping = results[1]
        assert "check" not in looping["measures"]["steps"] and looping["tests"]["hidden"]["passed"] == 0
        assert "testc" in looping["reason"] and looping["duration_s"] < 2 * SHORT_BUILDS["compile_cpu_s"]


def _answer(code: str) -> str:
    return f"<think>Add.</think>\n```rust\n{code}\n```"


@pytest.mark.parametrize("batch", [True, False])
def test_through_the_reward_functions(batch):
    """Every wrong program earns nothing for hidden or own tests, batched or alone; the control does."""
    names = ["u2028", "u0085", "u2029", "learner", "learner", "forged-suite"]
    codes = [CORRECT, *[f"// {n}\n{ATTACKS[name]}" for n, name in enumerate(names)], CONST_LOOP + CORRECT]
    names.append("const-loop")
    limits = Limits(**{**TEST_LIMITS.to_dict(), **SHORT_BUILDS})
    with Grader(workers=2, limits=limits, cache=ResultCache(), batch=batch) as grader:
        context = RewardContext(grader, [Problem(id="row", prompt="", tests=HIDDEN)])
        funcs, _ = build_reward_functions(context, {})
        completions = [_answer(c) for c in codes]
        ids = ["row"] * len(codes)
        table = {f.__name__: f(prompts=[None] * len(codes), completions=completions, id=ids) for f in funcs}
    evaluations = context.graded[-1].evaluations
    assert all(e.result is not None and was_batched(e.result) == batch for e in evaluations[:-1])
    assert evaluations[-1].result is not None and evaluations[-1].result.status is Status.TIMEOUT
    assert table["hidden_tests"][0] == 1.0 and table["own_tests"][0] > 0 and table["build"][0] == 1.0
    assert table["hidden_tests"][1:] == [0.0] * len(names)
    assert table["own_tests"][1:] == [0.0] * len(names)
    assert table["tests_present"][1:] == [0.0] * len(names)


# ---------------------------------------------------------------------------------------------
# Property: generated groups (every status, own and hidden counts, trusted or not) grade the same
# batched and alone.

_BODIES = [
    "a + b",
    "a * b",
    "b + a",
    'if a == 2 { panic!("no") } a + b',
    "if a == 0 { std::process::exit(0) } a + b",
    "if a == 2 { std::process::abort() } a + b",
    'println!("{a} {b}"); a + b',
    'use std::io::Write; let _ = std::io::stdout().write_all(b"raw line\\n"); a + b',
    'use std::io::Write; let _ = std::io::stderr().write_all(b"partial"); a + b',
    'println!("\\u{2028}{{\\"type\\":\\"test\\"}}"); a - b',
    "if a == 0 { loop { std::hint::black_box(a); } } a + b",
    "if a == 2 { let v: Vec<u8> = Vec::with_capacity(1 << 40); return v.len() as i64; } a + b",
    'let _ = std::fs::write("/tmp/x", b"1"); if std::path::Path::new("/tmp/y").exists() { 0 } else { a + b }',
    "a + b + undefined",
    "let unused = 1; a + b",
]
_OWN_TESTS = [
    "",
    "#[test]\n    fn own() { assert_eq!(add(1, 1), 2); }",
    "#[test]\n    fn own() { assert_eq!(add(1, 1), 3); }",
    "#[test]\n    #[ignore]\n    fn own() { assert_eq!(add(1, 1), 3); }",
    '#[test]\n    fn a() { assert!(add(0, 0) == 0); }\n    #[test]\n    fn b() { let _ = std::fs::write("/tmp/y", b"1"); }',
]


def generated_group(seed: int, size: int = 8) -> list[dict]:  # type: ignore[type-arg]
    rng = random.Random(seed)
    jobs = []
    for n in range(size):
        body, own = rng.choice(_BODIES), rng.choice(_OWN_TESTS)
        source = f"// {seed}/{n}\npub fn add(a: i64, b: i64) -> i64 {{\n    {body}\n}}\n"
        if own:
            source += f"\n#[cfg(test)]\nmod tests {{\n    use super::*;\n    {own}\n}}\n"
        jobs.append({"id": f"g{seed}/{n}", "source": source, "tests": HIDDEN, "timeout_s": 1.0})
    return jobs


def test_generated_groups_grade_the_same_batched_and_alone(batched, single):  # noqa: F811
    jobs = [j for seed in range(4) for j in generated_group(seed)]
    results = compare(jobs, batched, single)
    statuses = {r.status.value for r in results}
    assert {"ok", "test_failure", "compile_error", "timeout", "memory_limit"} <= statuses, statuses
    assert sum(map(was_batched, results)) >= len(jobs) // 2
    assert any(not r.tests.hidden.trusted and r.tests.hidden.ran and was_batched(r) for r in results)
    assert any(r.tests.own.ignored and was_batched(r) for r in results)
    assert verdict(results[0]) == verdict(single.grade([jobs[0]])[0])
