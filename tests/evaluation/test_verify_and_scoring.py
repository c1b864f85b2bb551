"""`rust-grpo data verify`, `data filter`, `score` and `compare`, on real programs in the sandbox."""

import json
import subprocess
import sys

import pytest

from rust_grpo.evaluation.passk import pass_at_k
from rust_grpo.evaluation.report import compare
from rust_grpo.evaluation.scoring import Completion, score_completions, summarize
from rust_grpo.evaluation.verify import verify_problems
from rust_grpo.problems.schema import Problem, load_problems

from ..conftest import ROOT

pytestmark = pytest.mark.cargo


def run_cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "rust_grpo.cli", *args], capture_output=True, text=True, cwd=cwd, check=False
    )


@pytest.mark.slow
def test_every_shipped_reference_passes_and_every_stub_fails():
    splits = ("train", "eval", "basics-train", "basics-eval", "drills-train")
    proc = run_cli("data", "verify", "--mutants", "0", *(f"data/{split}.jsonl" for split in splits))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for verified in ("164/164", "41/41", "34/34", "16/16", "49/49"):
        assert f"{verified} problems verified" in proc.stdout


def test_verify_names_rows_whose_tests_let_wrong_versions_pass(tmp_path):
    solution = "pub fn scale(a: i32, b: i32) -> i32 {\n    a * 3 + b\n}"
    at_zero_only = "#[test]\nfn a() { " + " ".join(["assert_eq!(scale(0, 0), 0);"] * 4) + " }"
    cases = [(1, 2), (2, 1), (-4, 5), (7, -3), (0, 9), (3, 0)]
    many_inputs = "#[test]\nfn a() { " + " ".join(f"assert_eq!(scale({a}, {b}), {a * 3 + b});" for a, b in cases) + " }"
    rows = [
        {"id": "weak", "prompt": "p", "solution": solution, "tests": at_zero_only},
        {"id": "strong", "prompt": "p", "solution": solution, "tests": many_inputs},
    ]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_cli("data", "verify", str(path), "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # weak tests are named, not failed
    weak = [line for line in proc.stdout.splitlines() if line.startswith("WEAK")]
    assert len(weak) == 1 and ": weak: the tests catch" in weak[0] and "survivors: line" in weak[0], proc.stdout
    assert "2/2 problems verified; 1 with weak tests" in proc.stdout


def test_verify_catches_broken_references_and_tests_that_test_nothing(grader, tmp_path):
    rows = [
        {
            "id": "ok",
            "prompt": "p",
            "signature": "pub fn one() -> i32",
            "solution": "pub fn one() -> i32 { 1 }",
            "tests": "#[test]\nfn a() { assert_eq!(one(), 1); assert_eq!(one() + 1, 2); assert!(one() > 0); assert_ne!(one(), 2); }",
        },
        {
            "id": "wrong",
            "prompt": "p",
            "solution": "pub fn one() -> i32 { 2 }",
            "tests": "#[test]\nfn a() { assert_eq!(one(), 1); assert_eq!(one(), 1); assert_eq!(one(), 1); assert_eq!(one(), 1); }",
        },
        {
            "id": "vacuous",
            "prompt": "p",
            "solution": "pub fn one() -> i32 { 1 }",
            "tests": "#[test]\nfn a() { assert!(true); assert!(true); assert!(true); assert!(true); }",
        },
    ]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = verify_problems(load_problems(str(path)), grader)
    assert report.checked == 3
    assert [f.split(":")[0] for f in report.failures] == ["wrong", "vacuous"]
    assert "reference does not pass" in report.failures[0] and "stub passes" in report.failures[1]


def test_verify_counts_failed_rows_by_id_even_when_ids_hold_colons(tmp_path):
    wrong = "pub fn one() -> i32 { 2 }"
    tests = (
        "#[test]\nfn a() { assert_eq!(one(), 1); assert_eq!(one(), 1); assert_eq!(one(), 1); assert_eq!(one(), 1); }"
    )
    rows = [{"id": f"suite:{i}", "prompt": "p", "solution": wrong, "tests": tests} for i in (1, 2)]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_cli("data", "verify", str(path), "-q")
    assert proc.returncode == 1 and "0/2 problems verified" in proc.stdout, proc.stdout + proc.stderr
    assert proc.stdout.count("FAIL ") == 2 and "WEAK" not in proc.stdout


def test_filter_keeps_only_rows_whose_code_passes(tmp_path):
    rows = [
        {
            "task_id": "good",
            "rust_prompt": "p",
            "rust_code": "pub fn f() -> u8 { 1 }",
            "rust_test_list": "#[test]\nfn t() { assert_eq!(f(), 1); }",
        },
        {
            "task_id": "bad",
            "rust_prompt": "p",
            "rust_code": "pub fn f() -> u8 { 2 }",
            "rust_test_list": "#[test]\nfn t() { assert_eq!(f(), 1); }",
        },
        {"task_id": "broken", "rust_prompt": "p", "rust_code": "pub fn f( -> u8", "rust_test_list": ""},
    ]
    src = tmp_path / "gen.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_cli("data", "filter", str(src), "--out", str(tmp_path / "kept.jsonl"))
    assert proc.returncode == 0, proc.stderr
    kept = [json.loads(line)["id"] for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert kept == ["good"] and "kept 1/3" in proc.stdout


def test_pass_at_k_matches_the_definition():
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(5, 2, 5) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_score_summary_and_report_files(grader, tmp_path):
    problems = {p.id: p for p in load_problems(str(ROOT / "data" / "eval.jsonl"))}
    pid = next(iter(problems))
    right = f"<think>ok</think>\n```rust\n{problems[pid].solution}\n```"
    completions = [
        Completion(pid, right, 0),
        Completion(pid, "<think>?</think>", 1),
        Completion(pid, "```rust\nfn x( {\n```", 2),
        Completion(pid, right, 3),
    ]
    records = score_completions(completions, problems, grader)
    assert [r["hidden_pass"] for r in records] == [True, False, False, True]
    assert [r["status"] for r in records] == ["ok", "no_code", "compile_error", "ok"]
    assert [r["argless"] for r in records] == [False] * 4
    summary = summarize(records)
    assert summary["hidden"]["pass@1"] == pytest.approx(0.5) and summary["hidden"]["pass@4"] == 1.0
    assert summary["rates"]["build"] == 0.5 and summary["per_problem"][pid]["hidden_pass"] == 2


def test_a_score_record_says_whether_a_build_ignores_its_arguments(grader):
    """gray_code answered by `Vec::new()` builds and names no parameter: argless; the real body and
    a stub that does not build are not (argless_builds counts builds)."""
    tests = "#[test]\nfn case_1() { assert_eq!(gray_code(2), vec![0, 1, 3, 2]); }\n"
    problem = Problem(id="gray", prompt="Gray code.", signature="pub fn gray_code(n: u32) -> Vec<u32>", tests=tests)
    answers = [
        "pub fn gray_code(n: u32) -> Vec<u32> { Vec::new() }",
        "pub fn gray_code(n: u32) -> Vec<u32> { (0..1u32 << n).map(|i| i ^ (i >> 1)).collect() }",
        "pub fn gray_code(n: u32) -> Vec<u32> { Vec::new( }",
    ]
    completions = [Completion("gray", f"<think>t</think>\n```rust\n{a}\n```", i) for i, a in enumerate(answers)]
    records = score_completions(completions, {"gray": problem}, grader)
    assert [r["build_ok"] for r in records] == [True, True, False]
    assert [r["argless"] for r in records] == [True, False, False]


def test_score_cli_writes_json_markdown_and_png_and_compare_reads_them(tmp_path):
    problems = load_problems(str(ROOT / "data" / "eval.jsonl"))[:2]
    good = [{"problem_id": p.id, "completion": f"<think>t</think>\n```rust\n{p.solution}\n```"} for p in problems]
    bad = [{"problem_id": p.id, "code": "pub fn nothing() {}"} for p in problems]
    for name, rows in (("good", good), ("bad", [*bad, "{not json"])):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
        )
        proc = run_cli(
            "score", str(tmp_path / f"{name}.jsonl"), "--dataset", "data/eval.jsonl", "--out", str(tmp_path / name)
        )
        assert proc.returncode == 0, proc.stderr
        for f in ("report.json", "report.md", "report.png", "results.jsonl"):
            assert (tmp_path / name / f).stat().st_size > 0
    assert "not valid JSON" in proc.stderr
    a, b = (json.loads((tmp_path / n / "report.json").read_text()) for n in ("bad", "good"))
    assert a["rates"]["hidden_tests"] == 0.0 and b["rates"]["hidden_tests"] == 1.0
    table = compare(a, b, "bad", "good")
    assert "+100.0 pts" in table and problems[0].id in table
    proc = run_cli("compare", str(tmp_path / "bad" / "report.json"), str(tmp_path / "good" / "report.json"))
    assert proc.returncode == 0 and "| hidden tests pass | 0.0% | 100.0% | +100.0 pts |" in proc.stdout


def test_the_hidden_verdict_of_a_correct_program_does_not_depend_on_its_own_tests(grader, tmp_path):
    path = tmp_path / "p.jsonl"
    row = {
        "id": "double",
        "prompt": "p",
        "signature": "pub fn double(x: i32) -> i32",
        "solution": "pub fn double(x: i32) -> i32 { x * 2 }",
        "tests": "#[test]\nfn a() { assert_eq!(double(2), 4); }\n#[test]\nfn b() { assert_eq!(double(-3), -6); }",
    }
    path.write_text(json.dumps(row) + "\n")
    problems = {p.id: p for p in load_problems(path)}
    own = {
        "good": "#[test]\n    fn t() { assert_eq!(double(5), 10); }",
        "failing": "#[test]\n    fn t() { assert_eq!(double(5), 11); }",
        "broken": '#[test]\n    fn t() { assert_eq!(double("5"), 10); }',
    }
    completions = [
        Completion(
            "double",
            f"```rust\npub fn double(x: i32) -> i32 {{ x * 2 }}\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n    {t}\n}}\n```",
            i,
        )
        for i, t in enumerate(own.values())
    ]
    records = score_completions(completions, problems, grader)
    assert [r["hidden_pass"] for r in records] == [True, True, True]
    assert [r["hidden_tests"] for r in records] == [{"passed": 2, "total": 2}] * 3
    assert [r["own_tests_pass"] for r in records] == [True, False, False]
    assert summarize(records)["hidden"]["pass@1"] == 1.0


def test_difficulty_filter_keeps_prompts_solved_sometimes(grader):
    from rust_grpo.problems.difficulty import split_by_difficulty

    problems = {p.id: p for p in load_problems(str(ROOT / "data" / "eval.jsonl"), max_rows=3)}
    easy, hard, mid = list(problems)
    right = {pid: f"```rust\n{p.solution}\n```" for pid, p in problems.items()}
    wrong = "```rust\npub fn nothing() {}\n```"
    completions = [Completion(easy, right[easy], i) for i in range(2)]
    completions += [Completion(hard, wrong, i) for i in range(2)]
    completions += [Completion(mid, right[mid], 0), Completion(mid, wrong, 1)]
    split = split_by_difficulty(score_completions(completions, problems, grader), 0.01, 0.99)
    assert (split.kept, split.never, split.always) == ([mid], [hard], [easy])
    assert split.rates[mid] == 0.5 and "kept 1/3 prompts" in split.summary()
