"""Importers for external suites, on small fixtures written here, graded in the real sandbox."""

import json

import pytest

from reward_sandbox import Status
from rust_grpo.evaluation.verify import verify_problems
from rust_grpo.problems.importers import humaneval_problem, import_problems, port_gen_range
from rust_grpo.problems.schema import normalize

from ..conftest import SHARED

pytestmark = pytest.mark.cargo


def exercism_track(root):
    ex = root / "exercises" / "practice" / "tiny-sum"
    (ex / ".meta").mkdir(parents=True)
    (ex / "src").mkdir()
    (ex / "tests").mkdir()
    (ex / ".docs").mkdir()
    (ex / "Cargo.toml").write_text('[package]\nname = "tiny-sum"\nversion = "0.1.0"\nedition = "2021"\n')
    (ex / ".docs" / "instructions.md").write_text("# Instructions\n\nAdd two numbers.")
    (ex / "src" / "lib.rs").write_text("pub fn sum(a: u32, b: u32) -> u32 {\n    todo!()\n}\n")
    (ex / ".meta" / "example.rs").write_text("pub fn sum(a: u32, b: u32) -> u32 {\n    a + b\n}\n")
    (ex / "tests" / "tiny-sum.rs").write_text(
        "use tiny_sum::*;\n\n#[test]\nfn one() {\n    assert_eq!(sum(1, 1), 2);\n}\n\n"
        "#[test]\n#[ignore]\nfn two() {\n    assert_eq!(sum(2, 3), 5);\n}\n#[test]\n#[ignore]\nfn three() {\n    assert_eq!(sum(0, 0), 0);\n    assert_eq!(sum(9, 1), 10);\n}\n"
    )
    dep = root / "exercises" / "practice" / "needs-crate"
    (dep / ".meta").mkdir(parents=True)
    (dep / "tests").mkdir()
    (dep / "Cargo.toml").write_text(
        '[package]\nname = "needs-crate"\nversion = "0.1.0"\n\n[dependencies]\nrand = "0.8"\n'
    )
    (dep / ".meta" / "example.rs").write_text("")
    (dep / "tests" / "needs-crate.rs").write_text("")
    return root


def test_exercism_track_directory(tmp_path, grader):
    problems, skipped = import_problems("exercism", exercism_track(tmp_path))
    (p,) = problems
    assert (
        p.id == "exercism/tiny-sum"
        and p.crate_name == "tiny_sum"
        and p.test_mode == "integration"
        and p.include_ignored
    )
    assert "Add two numbers." in p.prompt and "todo!()" in p.signature
    assert skipped == ["needs-crate: needs crates (rand)"]
    report = verify_problems(problems, grader, min_asserts=1)
    assert report.ok, report.failures
    (r,) = grader.grade(
        [
            {
                "id": "x",
                "source": p.solution,
                "tests": p.tests,
                "test_mode": "integration",
                "crate_name": p.crate_name,
                "include_ignored": True,
            }
        ]
    )
    assert r.tests.counts.passed == 3  # the #[ignore] tests ran too


def test_multipl_e_rows(tmp_path, grader):
    row = {
        "name": "HumanEval_0_add",
        "prompt": "/// Add x and y\nfn add(x: isize, y: isize) -> isize {\n",
        "tests": "}\n\nfn main() {\n    let candidate = add;\n    assert_eq!(candidate(1, 2), 3);\n    assert_eq!(candidate(0, 0), 0);\n}\n",
        "stop_tokens": ["\n}"],
    }
    path = tmp_path / "mpe.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps({"name": "broken"}) + "\n")
    problems, skipped = import_problems("multipl-e", path)
    (p,) = problems
    assert (
        p.test_mode == "main" and p.signature == "fn add(x: isize, y: isize) -> isize" and not p.tests.startswith("}")
    )
    assert len(skipped) == 1 and "mpe.jsonl:2" in skipped[0]
    ok, bad = grader.grade(
        [
            {
                "id": "ok",
                "source": "pub fn add(x: isize, y: isize) -> isize { x + y }",
                "tests": p.tests,
                "test_mode": "main",
            },
            {
                "id": "bad",
                "source": "pub fn add(x: isize, y: isize) -> isize { x * y }",
                "tests": p.tests,
                "test_mode": "main",
            },
        ]
    )
    assert ok.status is Status.OK and bad.status is Status.TEST_FAILURE


def test_humaneval_style_cfg_test_suites(tmp_path, grader):
    row = {
        "task_id": "Rust/0",
        "prompt": "Return double.",
        "declaration": "fn double(x: i32) -> i32 {\n",
        "canonical_solution": "    x * 2\n}\n",
        "test": "\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn test_double() {\n        assert_eq!(double(2), 4);\n        assert_eq!(double(-1), -2);\n        assert_eq!(double(0), 0);\n        assert_eq!(double(5), 10);\n    }\n}\n",
    }
    path = tmp_path / "he.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (p,), _ = import_problems("humaneval", path)
    assert p.test_mode == "unit" and p.solution.startswith("fn double")
    report = verify_problems([p], grader)
    assert report.ok, report.failures


def test_oxen_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table(
            {
                "task_id": ["t1"],
                "rust_prompt": ["Add"],
                "rust_code": ["pub fn f() {}"],
                "rust_test_list": ["#[test] fn a() {}"],
            }
        ),
        tmp_path / "oxen.parquet",
    )
    (p,), skipped = import_problems("oxen", tmp_path / "oxen.parquet")
    assert (p.id, p.prompt, p.solution) == ("t1", "Add", "pub fn f() {}") and skipped == []


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.skipif(
    not (SHARED / "evalsets" / "exercism" / "exercism_rust.jsonl").exists(), reason="../shared evalsets absent"
)
def test_real_exercism_suite_references_pass_and_stubs_fail(grader):
    problems, skipped = import_problems("exercism-jsonl", SHARED / "evalsets" / "exercism" / "exercism_rust.jsonl")
    assert (
        len(problems) == 95 and len(skipped) == 2 and all("multi-file crates are not supported" in s for s in skipped)
    )
    sample = problems[::8]  # the full set runs in `make bench`
    report = verify_problems(sample, grader, min_asserts=1)
    assert report.ok, report.failures


def test_oxens_bare_assert_lists_become_one_test_per_assert_and_grade(tmp_path, grader):
    """Oxen's real files hold `rust_test_list` as bare statements, one per line."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    code = "pub fn recent_requests_count(v: Vec<i32>) -> Vec<i32> {\n    v\n}\n"
    asserts = "assert_eq!(recent_requests_count(vec![1, 2, 3, 4]), vec![1, 2, 3, 4]);\nassert_eq!(recent_requests_count(vec![]), vec![]);\nassert!(recent_requests_count(vec![7]).len() == 1);"
    broken = "assert_eq!(recent_requests_count(vec![1]), vec![2]);"  # a noisy upstream row: its reference fails
    rows = {"task_id": ["ok", "noisy"], "rust_prompt": ["Echo the requests.", "Echo."], "rust_code": [code, code],
            "rust_test_list": [asserts, broken]}  # fmt: skip
    pq.write_table(pa.table(rows), tmp_path / "oxen.parquet")
    problems, skipped = import_problems("oxen", tmp_path / "oxen.parquet")
    assert [p.id for p in problems] == ["ok", "noisy"] and skipped == []
    assert problems[0].tests.count("#[test]") == 3
    results = grader.grade([p.job(p.solution) for p in problems])
    assert results[0].status.value == "ok" and results[0].tests.hidden.passed == 3, results[0].reason
    assert results[1].status.value == "test_failure"  # `data filter` drops it, with the reason


HUMANEVALPACK_HEADER = (
    "\nuse std::{slice::Iter, cmp::{max, self}, mem::replace, collections::{HashSet, HashMap}, ops::Index, ascii::AsciiExt};"
    "\nuse rand::Rng;\nuse regex::Regex;\nuse md5;\nuse std::any::{Any, TypeId};\n\n"
)


def humanevalpack_record(task: str, entry: str, decl: str, body: str, test: str) -> dict:
    """One row in HumanEvalPack-Rust's upstream shape: every declaration starts with `fn main(){}` and
    the same crate imports; the tests are a `#[cfg(test)] mod tests`."""
    declaration = "fn main(){}\n" + HUMANEVALPACK_HEADER + decl
    return {"task_id": task, "prompt": f"fn main(){{}}\n{HUMANEVALPACK_HEADER}/*\n Doc.\n*/\n{decl}", "declaration": declaration,
            "canonical_solution": body, "test": test, "entry_point": entry, "buggy_solution": body, "example_test": ""}  # fmt: skip


def test_humanevalpack_upstream_rows_import_and_verify(tmp_path, grader):
    rows = [
        humanevalpack_record(
            "Rust/0", "has_close_elements", "fn has_close_elements(numbers:Vec<f32>, threshold: f32) -> bool{\n",
            "    for i in 0..numbers.len() { for j in 1..numbers.len() { if i != j && (numbers[i] - numbers[j]).abs() < threshold { return true; } } }\n    false\n}\n",
            "#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn test_has_close_elements() {\n"
            "        assert_eq!(has_close_elements(vec![11.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3), true);\n"
            "        assert_eq!(has_close_elements(vec![1.0, 2.0, 3.0], 0.5), false);\n    }\n}\n",
        ),
        humanevalpack_record(
            "Rust/162", "string_to_md5", "fn string_to_md5(text: &str) -> String{\n",
            "    if text.is_empty() { return \"None\".to_string(); }\n    format!(\"{:x}\", md5::compute(text))\n}\n",
            "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { assert_eq!(string_to_md5(\"Hello world\"), \"3e25960a79dbc69b674cd4ec67a72c62\"); }\n}\n",
        ),
    ]  # fmt: skip
    path = tmp_path / "humanevalpack.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems, skipped = import_problems("humaneval", path)
    assert [p.id for p in problems] == ["Rust/0", "Rust/162"] and skipped == []
    assert problems[0].signature == "fn has_close_elements(numbers:Vec<f32>, threshold: f32) -> bool"
    assert "rand" not in problems[0].solution and "rand" not in problems[0].prompt and problems[0].crates == ()
    # the crate the problem uses stays imported and declared; the unused ones go
    assert problems[1].crates == ("md5",) and "use md5;" in problems[1].solution and "rand" not in problems[1].solution
    if not crates_installed():
        return
    report = verify_problems(problems, grader, min_asserts=1)
    assert report.ok, report.failures


def crates_installed() -> bool:
    from ..sandbox.test_crates import needs_crates

    return not needs_crates.args[0]


# HumanEvalPack-Rust's crate problems in their upstream shape: `md5` in a canonical solution (162),
# `Regex` in one (like 91, is_bored), `rand` in the hidden tests (like 38 and 50's random round trips).
CRATE_ROWS = [
    humanevalpack_record(
        "Rust/162", "string_to_md5", "fn string_to_md5(text: &str) -> String{\n",
        "    if text.is_empty() { return \"None\".to_string(); }\n    let digest = md5::compute(text.as_bytes());\n    return format!(\"{:x}\", digest);\n}\n",
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn test_string_to_md5() {\n"
        "        assert!(string_to_md5(\"Hello world\") == \"3e25960a79dbc69b674cd4ec67a72c62\");\n"
        "        assert!(string_to_md5(\"\") == \"None\");\n    }\n}\n",
    ),
    humanevalpack_record(
        "Rust/91", "is_bored", "fn is_bored(s:&str) -> i32 {\n",
        "    let mut count = 0;\n    let regex = Regex::new(r\"[.?!]\\s*\").expect(\"Invalid regex\");\n"
        "    let sqn: Vec<&str> = regex.split(s).into_iter().collect();\n"
        "    for s in sqn {\n        if s.starts_with(\"I \") {\n            count += 1;\n        }\n    }\n    return count;\n}\n",
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn test_is_bored() {\n"
        "        assert_eq!(is_bored(\"Hello world\"), 0);\n        assert_eq!(is_bored(\"I love It !\"), 1);\n"
        "        assert_eq!(is_bored(\"I feel good today. I will be productive. will kill It\"), 2);\n    }\n}\n",
    ),
    humanevalpack_record(
        "Rust/50", "decode_shift", "pub fn encode_shift(s: &str) -> String {\n    let alphabet:Vec<&str> = vec![\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\", \"j\", \"k\", \"l\", \"m\", \"n\", \"o\", \"p\", \"q\", \"r\", \"s\", \"t\", \"u\", \"v\", \"w\", \"x\", \"y\", \"z\"];\n    let mut output = String::new();\n    for c in s.chars() {\n        let mut lower = false;\n        if c.is_ascii_lowercase(){\n            lower = true;\n        }\n        let mut c_shift:String = \"\".to_string();\n        if lower {\n            let index:usize = alphabet.iter().position(|&x| x == c.to_string()).unwrap();\n            c_shift = alphabet[(index + 5) % 26].to_string();\n        }else{\n            let c_lower:String = c.to_ascii_lowercase().to_string();\n            let index:usize = alphabet.iter().position(|&x| x == c_lower).unwrap();\n            c_shift = alphabet[(index + 5) % 26].to_string();\n            c_shift = c_shift.to_ascii_uppercase().to_string();\n        }\n        output.push_str(&c_shift);\n    }\n    output\n}\npub fn decode_shift(s: &str) -> String {\n",
        "    let alphabet:Vec<&str> = vec![\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\", \"j\", \"k\", \"l\", \"m\", \"n\", \"o\", \"p\", \"q\", \"r\", \"s\", \"t\", \"u\", \"v\", \"w\", \"x\", \"y\", \"z\"];\n    let mut output = String::new();\n    for c in s.chars() {\n        let mut lower = false;\n        if c.is_ascii_lowercase(){\n            lower = true;\n        }\n        let mut c_shift:String = \"\".to_string();\n        if lower {\n            let index:usize = alphabet.iter().position(|&x| x == c.to_string()).unwrap();\n            c_shift = alphabet[((26 + (index as i32 - 5)) % 26) as usize].to_string();\n        }else{\n            let c_lower:String = c.to_ascii_lowercase().to_string();\n            let index:usize = alphabet.iter().position(|&x| x == c_lower).unwrap();\n            c_shift = alphabet[((26 + (index as i32 - 5)) % 26) as usize].to_string();\n            c_shift = c_shift.to_ascii_uppercase().to_string();\n        }\n        output.push_str(&c_shift);\n    }\n    output\n}\n",
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn test_decode_shift() {\n"
        "        for _ in 0..100 {\n            let l: usize = 10 + rand::thread_rng().gen::<usize>() % 11;\n"
        "            let mut s = String::new();\n            for _ in 0..l {\n"
        "                s.push_str(&((rand::thread_rng().gen::<u8>() % 26 + 97) as char).to_string());\n            }\n"
        "            assert_eq!(decode_shift(&encode_shift(&s)), s);\n        }\n    }\n}\n",
    ),
]  # fmt: skip


def test_humanevalpack_crate_problems_import_with_their_crates_and_grade(tmp_path, grader):
    path = tmp_path / "humanevalpack.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in CRATE_ROWS))
    problems, skipped = import_problems("humaneval", path)
    assert skipped == []
    assert [p.crates for p in problems] == [("md5",), ("regex",), ("rand",)]
    # a written dataset row keeps them, and reading it back checks them against the set
    assert [normalize(json.loads(json.dumps(p.to_dict())), "row") for p in problems] == problems
    if not crates_installed():
        pytest.skip("the Debian crate packages are not installed: imported, not graded")
    canonical = grader.grade([p.job(p.solution) for p in problems])
    assert [r.status.value for r in canonical] == ["ok"] * 3, [r.reason for r in canonical]
    # a buggy solution of each fails: the crates really ran
    buggy = [
        problems[0].solution.replace("text.as_bytes()", '"text"'),  # upstream's buggy solution
        problems[1].solution.replace("[.?!]", "[?!]"),
        problems[2].solution.replace("index as i32 - 5", "index as i32 - 4"),
    ]
    results = grader.grade([p.job(code) for p, code in zip(problems, buggy)])
    assert [r.status.value for r in results] == ["test_failure"] * 3, [r.reason for r in results]


def test_rand_07_gen_range_calls_become_rand_08_ranges_in_code_only():
    code = (
        "let a = rng.gen_range(0, 4);\n"
        "let c: char = rng.gen_range(b'a', b'z' + 1).into();\n"
        "let n = rng.gen_range::<i32>(f(1, 2), rng.gen_range(5, 9));\n"
        "let ok = rng.gen_range(1..=6);\n"
        "// rng.gen_range(1, 2) in a comment\n"
        'let s = "gen_range(1, 2)";\n'
    )
    assert port_gen_range(code) == (
        "let a = rng.gen_range(0..4);\n"
        "let c: char = rng.gen_range(b'a'..b'z' + 1).into();\n"
        "let n = rng.gen_range::<i32>(f(1, 2)..rng.gen_range(5..9));\n"
        "let ok = rng.gen_range(1..=6);\n"
        "// rng.gen_range(1, 2) in a comment\n"
        'let s = "gen_range(1, 2)";\n'
    )
    assert port_gen_range("r.gen_range(0, x = 3)") == "r.gen_range(0..(x = 3))"  # kept one argument each


def test_humanevalpack_tests_written_for_rand_07_grade_against_the_sets_rand(tmp_path, grader):
    """HumanEvalPack's Rust/32 and Rust/50 draw test inputs with rand <= 0.7's ``gen_range(low, high)``;
    the set's rand is 0.8. Ported on import, the reference passes and the buggy solution fails."""
    row = humanevalpack_record(
        "Rust/x", "square", "fn square(x: i64) -> i64 {\n", "    x * x\n}\n",
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn test_square() {\n"
        "        let mut rng = rand::thread_rng();\n        for _ in 0..20 {\n"
        "            let x: i64 = rng.gen_range(3, 50);\n            assert_eq!(square(x), x * x);\n        }\n    }\n}\n",
    )  # fmt: skip
    row["buggy_solution"] = "    x * 2\n}\n"
    path = tmp_path / "he.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (canonical,), skipped = import_problems("humaneval", path)
    buggy = humaneval_problem(row, "buggy_solution")
    assert skipped == [] and "gen_range(3..50)" in canonical.tests and canonical.crates == ("rand",)
    assert buggy.tests == canonical.tests and buggy.solution.endswith("x * 2\n}\n")
    if not crates_installed():
        pytest.skip("the Debian crate packages are not installed: imported, not graded")
    results = grader.grade([p.job(p.solution) for p in (canonical, buggy)])
    assert [r.status.value for r in results] == ["ok", "test_failure"], [r.reason for r in results]


def test_a_humanevalpack_row_using_a_crate_outside_the_set_is_refused_naming_it(tmp_path):
    row = humanevalpack_record(
        "Rust/x", "f", "fn f() -> i32 {\n", "    tokio::spawn(async {});\n    0\n}\n", "#[cfg(test)]\nmod tests {}\n"
    )
    row["declaration"] = row["declaration"].replace("use md5;", "use md5;\nuse tokio;")
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(row) + "\n")
    problems, skipped = import_problems("humaneval", path)
    assert problems == [] and len(skipped) == 1 and "`tokio`" in skipped[0] and "regex" in skipped[0]


def test_multipl_e_prompt_files_are_json_arrays_and_verify_without_references(tmp_path, grader):
    rows = [
        {"name": "HumanEval_2_truncate_number", "language": "rs",
         "prompt": "/// Return the decimal part.\nfn truncate_number(number: f64) -> f64 {\n",
         "tests": "}\n\nfn main() {\n    let candidate = truncate_number;\n    assert_eq!(candidate(3.5), 0.5);\n}\n",
         "stop_tokens": ["\n}"]},
        {"name": "HumanEval_99_too_large", "language": "rs", "prompt": "fn big(n: isize) -> isize {\n",
         "tests": "}\n\nfn main() {\n    let candidate = big;\n    assert_eq!(candidate(1), 99999999999999999999999999999999);\n}\n",
         "stop_tokens": ["\n}"]},
    ]  # fmt: skip
    path = tmp_path / "humaneval-rs.json"
    path.write_text(json.dumps(rows, indent=2))
    problems, skipped = import_problems("multipl-e", path)
    assert [p.id for p in problems] == ["HumanEval_2_truncate_number", "HumanEval_99_too_large"] and skipped == []
    report = verify_problems(problems, grader, min_asserts=1)
    assert len(report.failures) == 1 and report.failures[0].startswith("HumanEval_99_too_large: can never pass")
    assert report.without_reference == ["HumanEval_2_truncate_number"]  # verified by the weaker check, and said so
