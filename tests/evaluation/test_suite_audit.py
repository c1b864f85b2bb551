"""`rust-grpo data audit` (issue 50): mutants of a row's reference against its hidden tests, on the real sandbox;
the source-level operators of ``rewards/mutants.py`` that make them."""

import json
import subprocess
import sys

import pytest

from reward_sandbox.compile.lexer import tokens
from rust_grpo.evaluation.suite_audit import audit_problems
from rust_grpo.problems.schema import Problem
from rust_grpo.rewards.mutants import OPERATORS, mutants

from ..conftest import ROOT

DOUBLE = "pub fn f(x: i32) -> i32 {\n    x * 2\n}\n"
COUNT_ABOVE = (
    "pub fn count_above(xs: &[i32], t: i32) -> usize {\n"
    "    let mut n = 0;\n"
    "    for &x in xs {\n"
    "        if x > t {\n"
    "            n += 1;\n"
    "        }\n"
    "    }\n"
    "    n\n"
    "}\n"
)
COUNT_TESTS = (
    "#[test]\nfn case_1() {\n    assert_eq!(count_above(&[1, 5, 3, 7], 3), 2);\n}\n"
    "#[test]\nfn case_2() {\n    assert_eq!(count_above(&[], 0), 0);\n}\n"
    "#[test]\nfn case_3() {\n    assert_eq!(count_above(&[-1, 0, 1], 0), 1);\n}\n"
)
TRICKY = (
    "/// Doc: a < b && c + 1 == 2\n"
    "pub fn g(a: u32, b: u32, s: &str) -> bool {\n"
    '    let t = "a < b || 1 + 2"; // comment: x * 3 != 4\n'
    "    let v: Vec<Vec<u32>> = Vec::new();\n"
    "    let c = '+';\n"
    "    /* block: if a > 0 { 7 } */\n"
    "    if !s.is_empty() && a < b {\n"
    "        return t.len() + v.len() > 1 && c == '+';\n"
    "    }\n"
    "    a * 2 >= b - 1\n"
    "}\n"
    "fn helper(x: u32) -> u32 {\n    x + 1\n}\n"
)


def _not_code(text: str) -> list[str]:
    return [text[t.start : t.end] for t in tokens(text) if t.kind in ("comment", "string", "char")]


def test_operators_change_code_only_inside_the_asked_functions_never_comments_or_strings():
    made = mutants(TRICKY, ["g"], limit=200)
    operators = {m.operator for m in made}
    assert {"comparison", "arithmetic", "literal", "logical", "negate_if", "argument", "not"} <= operators, operators
    for m in made:
        if m.operator not in ("default", "perturbed"):  # own-test credit's: a new body (its literals too)
            assert _not_code(m.source) == _not_code(TRICKY), m.change
        assert m.source.endswith("fn helper(x: u32) -> u32 {\n    x + 1\n}\n"), m.change  # the helper as written
        assert m.source != TRICKY
    assert len({m.source for m in made}) == len(made)
    changes = {m.change for m in made}
    assert {"`<` -> `<=`", "`>=` -> `>`", "`*` -> `+`", "`&&` -> `||`", "`2` -> `3`", "`!` dropped"} <= changes
    # the generics of `Vec<Vec<u32>>` are no comparisons, the `>>` no shift
    assert not any("Vec<=" in m.source or "Vec<Vec<u32>=" in m.source for m in made)
    assert any(
        m.operator == "argument" and "let s: &str = ::std::default::Default::default();" in m.source for m in made
    )


def test_the_cap_is_deterministic_and_takes_every_operator_in_turn():
    first, again = mutants(TRICKY, ["g"], limit=8), mutants(TRICKY, ["g"], limit=8)
    assert first == again and len(first) == 8
    assert [m.operator for m in first[:2]] == ["default", "perturbed"]
    assert len({m.operator for m in first}) == 8  # one of each before a second of any
    assert all(o in OPERATORS for o in (m.operator for m in first))


def test_statements_are_dropped_and_the_reference_without_asked_functions_gives_nothing():
    made = mutants(COUNT_ABOVE, ["count_above"], limit=100)
    assert any(m.operator == "statement" and "n += 1;" not in m.source for m in made)
    assert any(m.change == "`if x > t` negated" and "if !(x > t)" in m.source for m in made)
    assert mutants(COUNT_ABOVE, ["absent"]) == []


@pytest.mark.cargo
def test_weak_tests_are_named_with_a_surviving_diff_strong_ones_kill_and_a_failing_reference_is_apart(grader):
    problems = [
        Problem("weak", "p", solution=DOUBLE, tests="#[test]\nfn t() {\n    assert!(f(2) >= 0);\n}\n"),
        Problem("strong", "p", solution=COUNT_ABOVE, tests=COUNT_TESTS),
        Problem("broken", "p", solution=DOUBLE, tests="#[test]\nfn t() {\n    assert_eq!(f(2), 5);\n}\n"),
    ]
    weak, strong, broken = audit_problems(problems, grader)
    assert weak.weak and weak.kill_rate is not None and weak.kill_rate < 0.9
    survivors = [o for o in weak.outcomes if o.verdict == "survived"]
    assert survivors and all(o.diff.startswith("@@") for o in survivors)
    assert any("-    x * 2" in o.diff for o in survivors)
    assert "survivors: line" in weak.reason()
    assert not strong.weak and strong.kill_rate is not None and strong.kill_rate >= 0.9, strong.to_dict()
    assert strong.built >= 8
    assert broken.kill_rate is None and broken.reason().startswith("reference does not pass: test_failure")


@pytest.mark.cargo
def test_the_cli_writes_its_files_and_names_a_bad_row_without_losing_the_others(tmp_path):
    data = tmp_path / "rows.jsonl"
    row = {"id": "strong", "prompt": "p", "solution": COUNT_ABOVE, "tests": COUNT_TESTS}
    data.write_text(json.dumps(row) + "\n{not json\n")
    out = tmp_path / "audit"
    proc = subprocess.run(
        [sys.executable, "-m", "rust_grpo.cli", "data", "audit", str(data), "--out", str(out), "-q", "--mutants", "6"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{data}:2: not valid JSON" in proc.stderr
    assert "1/1 rows measured, 0 weak" in proc.stdout
    for name in ("report.json", "report.md", "results.jsonl"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "report.json").read_text())
    assert summary["rows"] == 1 and summary["mutants"]["made"] == 6 and summary["unreadable"]
    assert "strong" in (out / "results.jsonl").read_text()


@pytest.mark.cargo
def test_filter_min_kill_rate_drops_rows_whose_tests_catch_too_few_mutants(tmp_path):
    data, kept = tmp_path / "rows.jsonl", tmp_path / "kept.jsonl"
    rows = [
        {"id": "strong", "prompt": "p", "solution": COUNT_ABOVE, "tests": COUNT_TESTS},
        {"id": "weak", "prompt": "p", "solution": DOUBLE, "tests": "#[test]\nfn t() {\n    assert!(f(2) >= 0);\n}\n"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["data", "filter", str(data), "--out", str(kept), "-q", "--min-kill-rate", "0.9"]
    proc = subprocess.run(
        [sys.executable, "-m", "rust_grpo.cli", *args], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "drop weak: its tests catch too few mutants" in proc.stderr and "kept 1/2 rows" in proc.stdout
    assert [json.loads(line)["id"] for line in kept.read_text().splitlines()] == ["strong"]
