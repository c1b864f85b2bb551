"""The program reaches the verdict by no door but its code (issue 25): the std prelude the hidden tests
use, the own run's command line, files and order, repair feedback, unsound safe code, build limits.

Every hostile program is graded batched and alone, through the CLI, the reward functions and repair
feedback: no wrong program gets a hidden test counted as passed or own-test credit, no hidden input
appears in anything the model sees, and every correct control passes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from reward_sandbox import Grader, Status
from reward_sandbox.cache import ResultCache
from reward_sandbox.cli import main as sandbox_main
from rust_grpo.problems.schema import Problem
from rust_grpo.repair.episodes import feedback
from rust_grpo.rewards.context import RewardContext
from rust_grpo.rewards.trl_rewards import build_reward_functions

from ..conftest import ROOT, TEST_LIMITS, needs_bwrap

pytestmark = [pytest.mark.cargo, pytest.mark.bwrap, needs_bwrap]

MARK = "7731"  # only the hidden tests hold this number: it must never reach feedback
HIDDEN = f"""
#[test]
fn finds() {{
    assert_eq!(find(&[4, {MARK}, 9], 9), Some(2));
}}

#[test]
fn misses() {{
    assert_eq!(find(&[{MARK}], 5), None);
}}

#[test]
fn parses() {{
    assert_eq!(parse("{MARK}"), Ok({MARK}));
}}

#[test]
fn inner_glob() {{
    use super::*;
    assert_eq!(find(&[{MARK}], {MARK}), Some(0));
}}
"""
OWN_TESTS = """
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_first() {
        assert_eq!(find(&[1, 2], 2), Some(1));
    }

    #[test]
    fn parses_number() {
        assert_eq!(parse("12"), Ok(12));
    }
}
"""
RIGHT_BODY = """
pub fn find(xs: &[i32], x: i32) -> Option<usize> {
    xs.iter().position(|&y| y == x)
}

pub fn parse(s: &str) -> Result<i64, String> {
    s.parse::<i64>().map_err(|e| e.to_string())
}
"""
CORRECT = RIGHT_BODY + OWN_TESTS

# (1) the hidden tests' `use super::*` used to bring these in before std's prelude
PRELUDE_SHADOW = """#![allow(non_snake_case, non_upper_case_globals, dead_code)]
#[derive(Debug)]
pub struct Any;
pub fn Some<T>(_: T) -> Any { Any }
pub const None: Any = Any;
pub fn Ok<T>(_: T) -> Any { Any }
impl PartialEq<Any> for Option<usize> { fn eq(&self, _: &Any) -> bool { true } }
impl PartialEq<Any> for Result<i64, String> { fn eq(&self, _: &Any) -> bool { true } }
pub fn find(_xs: &[i32], _x: i32) -> Option<usize> { Option::Some(1) }
pub fn parse(_s: &str) -> Result<i64, String> { Err(String::new()) }
"""
# the same through re-exported variants of the program's own enums
PRELUDE_TYPES = """#![allow(dead_code)]
#[derive(Debug)]
pub enum Maybe<T> { Some(T), None }
#[derive(Debug)]
pub enum Outcome<T> { Ok(T) }
pub use Maybe::{None, Some};
pub use Outcome::Ok;
impl<T> PartialEq<Maybe<T>> for Option<usize> { fn eq(&self, _: &Maybe<T>) -> bool { true } }
impl<T> PartialEq<Outcome<T>> for Result<i64, String> { fn eq(&self, _: &Outcome<T>) -> bool { true } }
pub fn find(_xs: &[i32], _x: i32) -> Option<usize> { Option::Some(1) }
pub fn parse(_s: &str) -> Result<i64, String> { Err(String::new()) }
"""

# (2) own tests that pass on the program only because its run looks different from its wrong versions'
WRONG_BODY = """
pub fn find(_xs: &[i32], _x: i32) -> Option<usize> {
    Some(1)
}

pub fn parse(_s: &str) -> Result<i64, String> {
    Err(String::new())
}
"""
SNIFFS = {
    "skip_flag": 'std::env::args().any(|a| a == "--skip")',
    "arg_count": "std::env::args().count() > 7",
    "argv0": 'std::env::args().next().unwrap_or_default().ends_with("test_bin")',
    "hidden_run_file": 'std::path::Path::new("/tmp/rg_seen").exists()',
    "tmp_listing": 'std::fs::read_dir("/tmp").map(|d| d.count()).unwrap_or(0) > 2',
    "batch_std": 'std::fs::read_to_string("/proc/self/maps").unwrap_or_default().contains("libstd")',
    "env_size": "std::env::vars().count() > 5",
    "cwd_listing": 'std::fs::read_dir(".").map(|d| d.count()).unwrap_or(0) != 1',
    "open_fds": 'std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0) > 4',
}


def sniffer(condition: str) -> str:
    body = WRONG_BODY.replace("Some(1)", 'let _ = std::fs::write("/tmp/rg_seen", "");\n    Some(1)')
    return (body if "rg_seen" in condition else WRONG_BODY) + (
        "\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn looks_right() {\n"
        f"        let sniffed = {condition};\n"
        "        assert!(sniffed || find(&[5, 6, 7], 7) == Some(2));\n    }\n}\n"
    )


# (3) the program records the hidden inputs and failing asserts, its own test prints them
LEAKER = """
fn record(what: String) {
    use std::io::Write;
    let home = std::env::var("HOME").unwrap_or_default();
    for dir in ["/tmp", "/dev/shm", "/var/tmp", ".", home.as_str()] {
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(format!("{dir}/rg_leak")) {
            let _ = writeln!(f, "{what}");
        }
    }
}

pub fn find(xs: &[i32], x: i32) -> Option<usize> {
    std::panic::set_hook(Box::new(|info| record(format!("panic {info}"))));
    record(format!("find {xs:?} {x}"));
    Some(1)
}

pub fn parse(s: &str) -> Result<i64, String> {
    record(format!("parse {s}"));
    Err(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_what_it_saw() {
        let home = std::env::var("HOME").unwrap_or_default();
        let mut seen = String::new();
        for dir in ["/tmp", "/dev/shm", "/var/tmp", ".", home.as_str()] {
            seen += &std::fs::read_to_string(format!("{dir}/rg_leak")).unwrap_or_default();
        }
        assert!(seen.is_empty(), "seen: {seen}");
    }
}
"""

# (4) rust-lang/rust#25860 (cve-rs's lifetime expansion): a safe transmute, so arbitrary memory access
UNSOUND = (
    WRONG_BODY
    + """
static UNIT: &'static &'static () = &&();

fn keep<'x, 'y, T>(_: &'x &'y (), v: &'y T) -> &'x T {
    v
}

pub fn forever<'x, T>(v: &'x T) -> &'static T {
    let f: fn(_, &T) -> &'static T = keep;
    f(UNIT, v)
}
"""
)

# (5) a static too big for the file-size limit: the object file cannot be written
BIG_STATIC = (
    RIGHT_BODY.replace("xs.iter()", "let _ = BIG[x as usize % 8];\n    xs.iter()")
    + "\npub static BIG: [u8; 100_000_000] = [7; 100_000_000];\n"
)

# programs that leave files behind are graded alone in a batch (its gates see them): kept apart, so
# that the others really share a batch with their correct siblings
QUIET = {
    "prelude_shadow": PRELUDE_SHADOW,
    "prelude_types": PRELUDE_TYPES,
    **{f"sniff_{name}": sniffer(condition) for name, condition in SNIFFS.items() if "rg_seen" not in condition},
}
LOUD = {
    "leaker": LEAKER,
    "leaker_sibling": LEAKER + "\n// a sibling: what one writes in the hidden run, the other reads in the own run\n",
    "sniff_hidden_run_file": sniffer(SNIFFS["hidden_run_file"]),
    "unsound": UNSOUND,
}
WRONG_PROGRAMS = {**QUIET, **LOUD}


@pytest.fixture(scope="module", params=["batched", "alone"])
def grader(request):
    with Grader(
        workers=2, isolation="strict", limits=TEST_LIMITS, cache=ResultCache(), batch=request.param == "batched"
    ) as g:
        yield g


def answer(code: str) -> str:
    return f"<think>find and parse</think>\n```rust\n{code}\n```"


def graded_with_rewards(grader, programs: list[str]):
    """Every program as one completion of the same row (so a batched grader batches them)."""
    row = Problem(id="row", prompt="", tests=HIDDEN)
    context = RewardContext(grader, [row])
    funcs, _ = build_reward_functions(context, {})
    texts = [answer(p) for p in programs]
    rewards = {f.__name__: f(prompts=[None] * len(texts), completions=texts, id=[row.id] * len(texts)) for f in funcs}
    return context.evaluate(texts, [row] * len(texts)), rewards


@pytest.mark.parametrize("group", [QUIET, LOUD], ids=["quiet", "loud"])
def test_no_wrong_program_passes_a_hidden_test_or_earns_own_test_credit(grader, group):
    names = list(group)
    evaluations, rewards = graded_with_rewards(grader, [CORRECT, *group.values(), CORRECT])
    right, *wrong, right_again = evaluations
    for e in (right, right_again):
        assert e.result is not None and e.result.status is Status.OK, (e.result.reason, e.result.output_tail)
        assert e.hidden_pass and len(e.catching_tests) == 2
    assert rewards["own_tests"][0] == 1.0 and rewards["hidden_tests"][0] == 1.0
    for k, (name, e) in enumerate(zip(names, wrong), start=1):
        assert e.result is not None and not e.unknown, name
        assert e.result.tests.hidden.passed == 0, (name, e.result.tests.hidden)
        assert not e.hidden_pass and e.catching_tests == frozenset(), name
        assert rewards["hidden_tests"][k] == 0.0 and rewards["own_tests"][k] == 0.0, name
        assert rewards["tests_present"][k] == 0.0, name
    if grader.batch and group is QUIET:  # they really shared a batch: the batched path is the one tested
        programs = [CORRECT, *group.values(), CORRECT]
        batchable = [e for e, p in zip(evaluations, programs) if "#![" not in p]  # inner attributes: alone
        assert len(batchable) >= 4 and all("batch" in e.result.measures for e in batchable)
        assert right.own_result is not None  # its own tests graded again, as its wrong versions are


MAIN_TESTS = f"""fn main() {{
    assert_eq!(find(&[4, {MARK}, 9], 9), Some(2));
    assert_eq!(find(&[{MARK}], 5), None);
    assert_eq!(parse("{MARK}"), Ok({MARK}));
}}
"""


@pytest.mark.parametrize("mode", ["integration", "main"])
def test_the_prelude_holds_in_exercism_test_crates_and_main_mode_too(grader, mode):
    tests = "use solution::*;\n" + HIDDEN.replace("use super::*;", "use solution::*;")
    tests = tests if mode == "integration" else MAIN_TESTS
    jobs = [
        {"id": n, "source": s, "tests": tests, "test_mode": mode} for n, s in [("r", RIGHT_BODY), ("w", PRELUDE_SHADOW)]
    ]
    right, wrong = grader.grade(jobs)
    assert right.status is Status.OK, (right.reason, right.output_tail)
    assert wrong.status is Status.TEST_FAILURE and wrong.tests.hidden.passed == 0, (wrong.reason, wrong.tests.hidden)


def test_a_primitive_type_cannot_be_shadowed_either(grader):
    """Primitive types resolve after every import, so a program's ``struct usize`` arriving through the
    glob used to stand in for std's: a wrong ``count`` with the asked signature text passed."""
    hidden = f"#[test]\nfn counts() {{\n    let n: usize = count(&[1, 2, {MARK}]);\n    assert_eq!(n, 3);\n}}\n"
    wrong = (
        "#![allow(non_camel_case_types)]\n#[derive(Debug)]\npub struct usize;\n"
        "impl PartialEq<i32> for usize {\n    fn eq(&self, _: &i32) -> bool {\n        true\n    }\n}\n"
        "pub fn count(_xs: &[i32]) -> usize {\n    usize\n}\n"
    )
    right = "pub fn count(xs: &[i32]) -> usize {\n    xs.len()\n}\n"
    results = grader.grade(
        [{"id": n, "source": s, "tests": hidden} for n, s in [("r1", right), ("w", wrong), ("r2", right)]]
    )
    assert [r.status for r in results] == [Status.OK, Status.TEST_FAILURE, Status.OK], [r.reason for r in results]
    assert results[1].tests.hidden.passed == 0


def test_nothing_of_the_hidden_run_reaches_the_own_run_or_feedback(grader):
    (e,), _ = graded_with_rewards(grader, [LEAKER])
    r = e.result
    assert r is not None and r.tests.hidden.ran and r.tests.hidden.failed == 4
    assert r.tests.own.ran and r.tests.own.passed == 1  # it saw nothing: every run starts from a fresh /tmp
    text = feedback(e) or ""
    assert "4 of 4 hidden tests failed" in text
    assert MARK not in text and MARK not in r.tests.own_output and "left" not in text


def test_the_own_run_looks_the_same_for_the_program_and_its_wrong_versions(grader):
    """The sniffs themselves, on a correct program: each reads the same in every run, so the test
    passes on the program and on its wrong versions alike (and the wrong ones above earn nothing)."""
    programs = [RIGHT_BODY + "\n#[cfg(test)]" + sniffer(c).split("#[cfg(test)]", 1)[1] for c in SNIFFS.values()]
    evaluations, _ = graded_with_rewards(grader, programs)
    for name, e in zip(SNIFFS, evaluations):
        assert e.result is not None and e.result.status is Status.OK, (name, e.result.reason)


def test_a_limit_hit_while_building_reports_the_limit(grader):
    (e,), _ = graded_with_rewards(grader, [BIG_STATIC])
    r = e.result
    assert r is not None and r.status is Status.OUTPUT_LIMIT, (r.status, r.reason, r.output_tail[-500:])
    assert "unknown error" not in r.reason and "larger than allowed" in r.reason


@pytest.mark.parametrize("batch", [True, False])
def test_the_cli_grades_hostile_programs_as_wrong_and_controls_as_right(tmp_path, batch):
    jobs = tmp_path / "jobs.jsonl"
    programs = {"right": CORRECT, **WRONG_PROGRAMS, "right2": CORRECT}
    jobs.write_text("".join(json.dumps({"id": k, "source": v, "tests": HIDDEN}) + "\n" for k, v in programs.items()))
    out = tmp_path / "out.jsonl"
    args = ["run", "-i", str(jobs), "-o", str(out), "-j", "2", "--no-cache", "--isolation", "strict"]
    assert sandbox_main([*args, *([] if batch else ["--no-batch"])]) in (0, 1)
    results = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert results["right"]["status"] == "ok" and results["right2"]["status"] == "ok"
    for name in WRONG_PROGRAMS:
        hidden = results[name]["tests"]["hidden"]
        assert results[name]["status"] != "ok" and hidden["passed"] == 0, (name, results[name]["reason"])


def test_the_fallback_also_starts_every_run_afresh(fallback_grader):
    (e,), _ = graded_with_rewards(fallback_grader, [LEAKER])
    r = e.result
    assert r is not None and r.tests.hidden.failed == 4, (r.status, r.reason)
    assert r.tests.own.passed == 1, r.tests.own_output
    assert MARK not in (feedback(e) or "") and MARK not in r.tests.own_output
    leftovers = [p for d in ("/tmp", "/dev/shm", "/var/tmp") if (p := Path(d) / "rg_leak").exists()]
    assert leftovers == [], leftovers


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-x", "-q"]))


def test_unsound_safe_code_is_refused_with_its_reason(grader):
    (e,), rewards = graded_with_rewards(grader, [UNSOUND])
    r = e.result
    assert r is not None and r.status is Status.INVALID_INPUT and "25860" in r.reason, r.reason
    assert not e.unknown and all(v[0] in (None, 0.0) for k, v in rewards.items() if k not in ("format", "code_block"))
    text = feedback(e) or ""
    assert "could not be graded" in text and "soundness hole" in text


# Shapes of #25860 that compile on rustc 1.95 (checked when written), each renamed and reshaped: none
# may get through whatever its names, and the same code without the hole's ingredients is graded.
U = "static UNIT: &'static &'static () = &&();\n"
EXT = "pub fn ext<'q, T>(x: &'q T) -> &'static T { let f: fn(_, &T) -> &'static T = tr; f(UNIT, x) }\n"
UNSOUND_SHAPES = {
    "cve_rs": "fn tr<'a, 'b, T>(_: &'a &'b (), v: &'b T) -> &'a T { v }\n" + EXT,
    "method": "struct S;\nimpl S { fn tr<'a, 'b, T>(_: &'a &'b (), v: &'b T) -> &'a T { v } }\n"
    + EXT.replace("= tr;", "= S::tr;"),
    "trait_default": "trait Tr { fn tr<'a, 'b, T>(_: &'a &'b (), v: &'b T) -> &'a T { v } }\nimpl Tr for () {}\n"
    + EXT.replace("= tr;", "= <() as Tr>::tr;"),
    "alias_witness": "type W<'a, 'b> = &'a &'b ();\nfn tr<'a, 'b, T>(_: W<'a, 'b>, v: &'b T) -> &'a T { v }\n" + EXT,
    "generic_witness": "fn tr<'a, 'b, T, X: ?Sized>(_: &'a &'b X, v: &'b T) -> &'a T { v }\n"
    + EXT.replace("= tr;", "= tr::<T, ()>;"),
    "array_witness": "fn tr<'a, 'b, T>(_: &'a [&'b (); 1], v: &'b T) -> &'a T { v }\n"
    + EXT.replace("f(UNIT, x)", "f(&[&()], x)"),
    "tuple_param": "fn tr<'a, 'b, T>(p: (&'a &'b (), &'b T)) -> &'a T { p.1 }\n"
    + EXT.replace("fn(_, &T)", "fn((_, &T))").replace("f(UNIT, x)", "f((UNIT, x))"),
    "out_param": "fn tr<'a, 'b, T>(_: &'a &'b (), v: &'b T, o: &mut Option<&'a T>) { *o = Some(v) }\n"
    "pub fn ext<'q, T>(x: &'q T) -> &'static T {\n"
    "    let f: fn(_, &T, &mut Option<&'static T>) = tr;\n    let mut o = None;\n    f(UNIT, x, &mut o);\n"
    "    o.unwrap()\n}\n",
    "in_a_macro": "macro_rules! mk { ($a:lifetime, $b:lifetime) => {\n"
    "    fn tr<$a, $b, T>(_: &$a &$b (), v: &$b T) -> &$a T { v }\n} }\nmk!('a, 'b);\n" + EXT,
    "dyn_assoc_57893": "trait Obj<U> { type Out; }\nimpl<X: ?Sized, U> Obj<U> for X { type Out = U; }\n"
    "fn via<X: ?Sized, U>(x: <X as Obj<U>>::Out) -> U { x }\n"
    "pub fn cast<A, B>(a: A) -> B { via::<dyn Obj<B, Out = A>, B>(a) }\n",
}
SOUND_LOOKALIKES = {
    "dyn_with_binding_of_a_std_trait": "trait Obj { type Out; }\nimpl<X: ?Sized> Obj for X { type Out = (); }\n"
    "pub fn f(it: &mut dyn Iterator<Item = u8>) -> Option<u8> { it.next() }\n",
    "called_directly": "fn tr<'a, 'b, T>(_: &'a &'b (), v: &'b T) -> &'a T { v }\n"
    "pub fn f(x: &u8) -> &u8 { let u = &(); tr(&u, x) }\n",
    "explicit_bound": "fn tr<'a, 'b: 'a, T>(_: &'a &'b (), v: &'b T) -> &'a T { v }\n"
    "pub fn f() -> fn(&'static &'static (), &'static u8) -> &'static u8 { tr::<u8> }\n",
    "separate_lifetimes": "fn longest<'a, 'b>(x: &'a str, _y: &'b str) -> &'a str { x }\n"
    'pub fn f() -> usize { ["a"].iter().map(|s| longest(s, s)).count() + { let g = longest; g("x", "y").len() } }\n',
    "in_a_comment": "// fn tr<'a, 'b, T>(_: &'a &'b (), v: &'b T) -> &'a T { v } let f = tr;\npub fn f() {}\n",
    "in_a_string": "pub fn f() -> &'static str { \"fn tr<'a, 'b>(_: &'a &'b ()) {} let g = tr;\" }\n",
}


@pytest.mark.parametrize("shape", list(UNSOUND_SHAPES))
def test_every_known_shape_of_the_hole_is_refused(shape):
    from reward_sandbox.compile.soundness import unsound_reason

    assert unsound_reason(U + UNSOUND_SHAPES[shape]) is not None


@pytest.mark.parametrize("shape", list(SOUND_LOOKALIKES))
def test_sound_code_that_looks_alike_is_not_refused(shape):
    from reward_sandbox.compile.soundness import unsound_reason

    assert unsound_reason(SOUND_LOOKALIKES[shape]) is None


def test_the_shipped_problems_references_are_never_refused():
    from reward_sandbox.compile.soundness import unsound_reason

    rows = [
        json.loads(line) for path in sorted((ROOT / "data").glob("*.jsonl")) for line in path.read_text().splitlines()
    ]
    assert len(rows) > 100
    assert [r["id"] for r in rows if unsound_reason(r.get("solution") or "")] == []


def test_a_test_run_cannot_replace_stdout_or_map_writable_code(grader):
    """Even with ``unsafe`` allowed (FFI), a test run's stdin/stdout/stderr stay where the harness put
    them and no memory is writable and executable at once (rg-run's seccomp filter)."""
    source = """
extern "C" {
    fn dup(fd: i32) -> i32;
    fn dup2(old: i32, new: i32) -> i32;
    fn dup3(old: i32, new: i32, flags: i32) -> i32;
    fn close(fd: i32) -> i32;
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
    fn mprotect(addr: *mut u8, len: usize, prot: i32) -> i32;
}

pub fn noop() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdio_and_memory_stay_ours() {
        noop();
        unsafe {
            let spare = dup(2);
            assert!(spare > 2);
            assert_eq!(dup2(spare, 1), -1);
            assert_eq!(dup3(spare, 2, 0), -1);
            assert_eq!(close(1), -1);
            assert_eq!(dup2(spare, 9), 9); // above stdio: allowed
            let rwx = mmap(std::ptr::null_mut(), 4096, 7, 0x22, -1, 0);
            assert_eq!(rwx as isize, -1);
            let rw = mmap(std::ptr::null_mut(), 4096, 3, 0x22, -1, 0);
            assert_ne!(rw as isize, -1);
            assert_eq!(mprotect(rw, 4096, 7), -1);
            assert_eq!(mprotect(rw, 4096, 5), 0); // executable but no longer writable: allowed
        }
    }
}
"""
    (r,) = grader.grade([{"id": "fds", "source": source, "allow_unsafe": True}])
    assert r.status is Status.OK and r.tests.own.passed == 1, (r.status, r.reason, r.tests.own_output)


@pytest.mark.parametrize(
    "message",
    [
        "failed to write to `/tmp/rmeta/full.rmeta`: File too large (os error 27)",
        "linking with `cc` failed: signal: 25 (SIGXFSZ)",
    ],
)
def test_a_compiler_that_reports_the_file_limit_itself_gets_the_limits_status(message):
    """When the limit's signal reaches a tool rustc runs (the linker) or rustc sees the write fail, rustc
    exits with an error of its own: its message, not a snippet of the program, names the limit."""
    from reward_sandbox.isolation.process import StepOutcome
    from reward_sandbox.single import file_limit_hit

    line = json.dumps({"$message_type": "diagnostic", "message": message, "level": "error", "spans": []})
    assert file_limit_hit(StepOutcome(started=True, exit_code=1, output=line.encode() + b"\n"))
    quoted = json.dumps(
        {
            "$message_type": "diagnostic",
            "message": "cannot find value `x`",
            "level": "error",
            "spans": [],
            "rendered": f"// {message}",
        }
    )
    assert not file_limit_hit(StepOutcome(started=True, exit_code=1, output=quoted.encode() + b"\n"))


# A program trait with a by-value method is found before std's by-reference inherent one: through the
# tests' glob it used to answer `v.is_empty()` for them (a wrong `items` passed `!items(3).is_empty()`).
TRAIT_TESTS = (  # a wrong program passes one of the two only through its trait
    "use std::collections::HashSet;\n#[test]\nfn nonempty() {\n    assert!(!items(3).is_empty());\n"
    "    assert!(items(0).is_empty());\n    assert!(HashSet::<i32>::new().is_empty());\n}\n"
    "#[test]\nfn holds() {\n    assert!(items(3).contains(&2));\n}\n"
)
TRAIT_RIGHT = "pub fn items(n: usize) -> Vec<i32> {\n    (0..n as i32).collect()\n}\n"
TRAIT_OVERRIDES = {
    "declared": "pub trait Sure {\n    fn is_empty(self) -> bool;\n}\n"
    "impl Sure for Vec<i32> {\n    fn is_empty(self) -> bool {\n        self.capacity() == 7\n    }\n}\n",
    "renamed": "mod inner {\n    pub trait Sure {\n        fn is_empty(self) -> bool;\n    }\n"
    "    impl Sure for Vec<i32> {\n        fn is_empty(self) -> bool {\n            self.capacity() == 7\n        }\n    }\n}\n"
    "pub use inner::Sure as Other;\n",
    "by_ref_on_a_reference": "pub trait Sure {\n    fn is_empty(&self) -> bool;\n}\n"
    "impl Sure for &Vec<i32> {\n    fn is_empty(&self) -> bool {\n        self.capacity() == 7\n    }\n}\n",
    "glob_reexport": "mod inner {\n    pub trait Sure {\n        fn is_empty(self) -> bool;\n    }\n"
    "    impl Sure for Vec<i32> {\n        fn is_empty(self) -> bool {\n            self.capacity() == 7\n        }\n    }\n}\n"
    "pub use inner::*;\n",
}
# found by a red team against an earlier rule that let by-reference traits for "own" types stay in scope
TRAIT_OVERRIDES["deref_slice_method"] = (
    "mod decoy {\n    pub struct Vec;\n}\npub trait Sure {\n    fn contains(&self, _x: &i32) -> bool {\n        true\n    }\n}\n"
    "impl Sure for Vec<i32> {}\n"
)
TRAIT_OVERRIDES["blanket_named_like_own"] = (
    "pub struct Own;\npub trait Sure {\n    fn contains(&self, _x: &i32) -> bool {\n        true\n    }\n}\n"
    "impl<Own> Sure for Own {}\n"
)
TRAIT_OVERRIDES["macro_methods"] = (
    "macro_rules! byval {\n    () => {\n        fn is_empty(self) -> bool where Self: Sized {\n            false\n        }\n    };\n}\n"
    "pub trait Sure {\n    byval!();\n}\nimpl Sure for Vec<i32> {}\n"
)
TRAIT_OVERRIDES["named_like_a_use_segment"] = (
    "#[allow(non_camel_case_types)]\npub trait collections {\n    fn is_empty(self) -> bool where Self: Sized {\n"
    "        false\n    }\n    fn contains(&self, _x: &i32) -> bool {\n        true\n    }\n}\n"
    "impl collections for Vec<i32> {}\n"
)
TRAIT_WRONG = "pub fn items(n: usize) -> Vec<i32> {\n    Vec::with_capacity(if n == 0 { 7 } else { 0 })\n}\n"


@pytest.mark.parametrize("shape", list(TRAIT_OVERRIDES))
def test_a_program_trait_cannot_answer_the_hidden_tests_method_calls(grader, shape):
    """The program's traits the tests do not name are kept out of their scope (trait_scope.py)."""
    wrong = TRAIT_WRONG + TRAIT_OVERRIDES[shape]
    inner = TRAIT_TESTS.replace("fn nonempty() {\n", "fn nonempty() {\n    use super::super::*;\n")
    jobs = [{"id": "r", "source": TRAIT_RIGHT, "tests": TRAIT_TESTS}]
    jobs += [{"id": f"w{i}", "source": wrong, "tests": t} for i, t in enumerate((TRAIT_TESTS, inner))]
    jobs += [{"id": "r2", "source": TRAIT_RIGHT, "tests": TRAIT_TESTS}]
    results = grader.grade(jobs)
    assert [r.status for r in results] == [Status.OK, Status.TEST_FAILURE, Status.TEST_FAILURE, Status.OK], [
        (r.reason, r.output_tail[-300:]) for r in results
    ]
    assert all(r.tests.hidden.passed == 0 for r in results[1:3])


def test_a_helper_trait_serves_the_tests_named_or_not(grader):
    """Exercism's queen-attack reference answers through a trait of its own the tests do not name:
    the build with it shadowed says they need it (rustc: "implemented but not in scope"), and it is
    back for the next; a suite that names it has it from the start."""
    source = (
        "pub struct Queen(i32);\npub trait Piece {\n    fn attacks(&self, other: &Queen) -> bool;\n}\n"
        "impl Piece for Queen {\n    fn attacks(&self, other: &Queen) -> bool {\n        self.0 == other.0\n    }\n}\n"
    )
    tests = "#[test]\nfn same_row() {\n    assert!(Queen(1).attacks(&Queen(1)));\n    assert!(!Queen(1).attacks(&Queen(2)));\n}\n"
    unnamed, named = grader.grade(
        [
            {"id": "u", "source": source, "tests": tests},
            {"id": "n", "source": source, "tests": "use super::Piece;\n" + tests},
        ]
    )
    assert unnamed.status is Status.OK, (unnamed.reason, unnamed.output_tail)
    assert named.status is Status.OK, (named.reason, named.output_tail)


def test_a_trait_the_tests_name_stays_theirs(grader):
    """A suite that names the program's trait (the asked one) still calls its methods."""
    source = 'pub trait Greet {\n    fn hi(&self) -> String;\n}\nimpl Greet for u8 {\n    fn hi(&self) -> String {\n        format!("hi {self}")\n    }\n}\n'
    tests = '#[test]\nfn greets() {\n    fn check<T: Greet>(t: T) -> String {\n        t.hi()\n    }\n    assert_eq!(check(3u8), "hi 3");\n}\n'
    (result,) = grader.grade([{"id": "g", "source": source, "tests": tests}])
    assert result.status is Status.OK, (result.reason, result.output_tail)


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("mod inner { pub trait Sure {} }\npub use inner::Sure as _;\npub fn items() {}\n", True),
        ("macro_rules! mk { ($t:ident) => { pub trait $t {} } }\nmk!(Sure);\npub fn items() {}\n", True),
        ("#![allow(non_camel_case_types)]\npub fn items() {}\npub trait items {}\n", True),  # `use super::items;`
        (
            'use std::fmt::Write as _;\npub fn items() -> String { let mut s = String::new(); write!(s, "x").unwrap(); s }\n',
            False,
        ),
    ],
)
def test_traits_that_no_name_could_shadow_are_refused(grader, source, refused):
    (result,) = grader.grade([{"id": "x", "source": source, "tests": "#[test]\nfn t() {\n    items();\n}\n"}])
    assert (result.status is Status.INVALID_INPUT) == refused, (result.status, result.reason)
    if refused:
        assert "trait" in (result.reason or "") or "anonymously" in (result.reason or "")


def test_exercism_suites_name_the_traits_their_stub_declares():
    from rust_grpo.problems.importers import name_stub_traits

    tests = '#![allow(clippy::all)]\nuse luhn_trait::*;\n#[test]\nfn t() { assert!("059".valid_luhn()); }\n'
    named = name_stub_traits(tests, "pub trait Luhn {\n    fn valid_luhn(&self) -> bool;\n}\n", "luhn_trait")
    assert named.startswith("#![allow(clippy::all)]\n#[allow(unused_imports)] use luhn_trait::{Luhn};\n")
    assert name_stub_traits(named, "pub trait Luhn {}", "luhn_trait") == named  # named once
    commented = name_stub_traits("// Luhn\nuse luhn_trait::*;\n", "pub trait Luhn {}", "luhn_trait")
    assert "use luhn_trait::{Luhn};" in commented  # a comment is no name the grader keeps in scope


def test_paths_that_differ_in_a_batch_send_the_program_alone_however_spelled():
    """`include_str!` through an alias resolved from the batch's module directory: a program that did
    not compile alone compiled batched. Such programs (and `file!` aliases, `cfg_attr`) go alone."""
    tests = "#[test]\nfn t() {\n    assert_eq!(a(), 1);\n}\n"
    programs = {
        "include_alias": 'use std::include_str as inc;\npub fn a() -> i32 { 1 }\npub fn m() -> usize { inc!("../Cargo.toml").len() }\n',
        "file_alias": "use std::file as here;\npub fn a() -> i32 { if here!().contains('/') { 1 } else { 1 } }\n",
        "cfg_attr_path": '#[cfg_attr(all(), path = "x.rs")]\npub mod m {}\npub fn a() -> i32 { 1 }\n',
    }
    jobs = [{"id": k, "source": v, "tests": tests} for k, v in programs.items()]
    jobs += [{"id": "plain", "source": "pub fn a() -> i32 { 1 }\n", "tests": tests}]
    verdicts = {}
    for batch in (True, False):
        with Grader(workers=2, isolation="strict", limits=TEST_LIMITS, cache=ResultCache(), batch=batch) as g:
            verdicts[batch] = [(r.status, r.tests.hidden.passed) for r in g.grade(jobs)]
            if batch:
                batched = [r.id for r in g.grade(jobs) if "batch" in r.measures]
    assert verdicts[True] == verdicts[False]
    assert "include_alias" not in batched and "file_alias" not in batched and "cfg_attr_path" not in batched
