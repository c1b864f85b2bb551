import json
import re

import pytest

from rust_grpo.evaluation.verify import make_stub
from rust_grpo.problems.problemset import build_dataset, load_sources, render_tests
from rust_grpo.problems.schema import DataError, Problem, load_problems, normalize, to_training_rows, user_prompt

from ..conftest import ROOT


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_our_schema_and_oxens_are_both_read(tmp_path):
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            {
                "id": "a",
                "prompt": "Add.",
                "signature": "pub fn add(a: i32, b: i32) -> i32",
                "solution": "x",
                "tests": "t",
            },
            {
                "task_id": 7,
                "rust_prompt": "Sub.",
                "rust_code": "fn sub() {}",
                "rust_test_list": ["#[test] fn a() {}", "#[test] fn b() {}"],
            },
        ],
    )
    a, b = load_problems(str(path))
    assert (a.id, a.signature, a.tests) == ("a", "pub fn add(a: i32, b: i32) -> i32", "t")
    assert (b.id, b.prompt, b.solution) == ("7", "Sub.", "fn sub() {}")
    assert b.tests.count("#[test]") == 2


def test_bad_records_are_named_and_skipped_not_fatal(tmp_path, caplog):
    path = write_jsonl(
        tmp_path / "d.jsonl", [{"id": "ok", "prompt": "p"}, "{broken", {"prompt": "no id"}, {"id": "x", "prompt": " "}]
    )
    problems = load_problems(str(path))
    assert [p.id for p in problems] == ["ok"]
    assert "d.jsonl:2: not valid JSON" in caplog.text and "d.jsonl:3: missing 'id'" in caplog.text
    assert "d.jsonl:4 (id=x): missing 'prompt'" in caplog.text
    with pytest.raises(DataError, match=r"d\.jsonl:2"):
        load_problems(str(path), strict=True)


def test_duplicate_ids_and_empty_files_are_errors(tmp_path):
    with pytest.raises(DataError, match="duplicate ids"):
        load_problems(str(write_jsonl(tmp_path / "dup.jsonl", [{"id": "a", "prompt": "p"}] * 2)))
    with pytest.raises(DataError, match="no usable problems"):
        load_problems(str(write_jsonl(tmp_path / "empty.jsonl", [])))
    with pytest.raises(DataError, match="not found"):
        load_problems(str(tmp_path / "missing.jsonl"))


def test_parquet_in_oxens_schema(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table(
        {"task_id": [1, 2], "rust_prompt": ["A", "B"], "rust_code": ["a", "b"], "rust_test_list": ["t1", "t2"]}
    )
    pq.write_table(table, tmp_path / "oxen.parquet")
    assert [p.prompt for p in load_problems(str(tmp_path / "oxen.parquet"))] == ["A", "B"]


def test_prompts_are_chats_and_hide_the_tests():
    p = normalize(
        {"id": "a", "prompt": "Add two numbers.", "signature": "pub fn add(a: i32) -> i32", "tests": "SECRET"}, "x"
    )
    from dataclasses import replace

    from rust_grpo.problems.answer_format import THINK

    row = to_training_rows([p], replace(THINK, system_prompt="SYSTEM"))[0]
    assert row["prompt"][0] == {"role": "system", "content": "SYSTEM"}
    assert "pub fn add" in row["prompt"][1]["content"] and "<think>" in user_prompt(p)
    assert "SECRET" not in json.dumps(row["prompt"]) and set(row) == {"prompt", "id"}


def test_shipped_problem_set_is_large_complete_and_built_from_its_sources(tmp_path):
    problems = load_sources(ROOT / "data" / "source")
    assert len(problems) >= 200
    for p in problems:
        assert p.prompt and p.signature and p.solution, p.id
        assert len(re.findall(r"\bassert(?:_eq|_ne)?!", p.tests)) >= 4, p.id
    counts = build_dataset(ROOT / "data" / "source", tmp_path)
    assert counts["train"] + counts["eval"] == len(problems) and counts["eval"] >= 40
    for split in ("train", "eval", "demo"):
        assert (tmp_path / f"{split}.jsonl").read_text() == (ROOT / "data" / f"{split}.jsonl").read_text(), (
            f"data/{split}.jsonl is stale: run `rust-grpo data build --overwrite`"
        )
    train_ids = {p.id for p in load_problems(str(ROOT / "data" / "train.jsonl"))}
    assert not train_ids & {p.id for p in load_problems(str(ROOT / "data" / "eval.jsonl"))}


def test_a_tier_folder_builds_its_own_split_and_leaves_the_main_one_alone(tmp_path):
    counts = build_dataset(ROOT / "data" / "source", tmp_path)
    assert (counts["basics-train"], counts["basics-eval"]) == (34, 16)  # every third held out
    assert counts["drills-train"] >= 45 and "drills-eval" not in counts  # a train-only tier: nothing held out
    for split in ("basics-train", "basics-eval", "drills-train"):
        assert (tmp_path / f"{split}.jsonl").read_text() == (ROOT / "data" / f"{split}.jsonl").read_text(), (
            f"data/{split}.jsonl is stale: run `rust-grpo data build --overwrite`"
        )
    basics = load_sources(ROOT / "data" / "source" / "basics")
    assert all(len(re.findall(r"\bassert(?:_eq|_ne)?!", p.tests)) >= 4 for p in basics)
    assert not {p.id for p in basics} & {p.id for p in load_sources(ROOT / "data" / "source")}
    drills = load_sources(ROOT / "data" / "source" / "drills")
    assert all(len(re.findall(r"\bassert(?:_eq|_ne)?!", p.tests)) >= 4 for p in drills)
    held_out = [p for split in ("basics-eval", "eval") for p in load_problems(str(ROOT / "data" / f"{split}.jsonl"))]

    def body(p: Problem) -> str:  # the reference answer without its signature, whitespace-normalised
        return " ".join(p.solution.split("{", 1)[1].split())

    assert not {body(p) for p in held_out} & {body(p) for p in drills}  # a drill is never a held-out task renamed
    source = tmp_path / "source"
    (source / "extra").mkdir(parents=True)
    (source / "main.rsp").write_text((ROOT / "data" / "source" / "numbers.rsp").read_text())
    (source / "extra" / "dup.rsp").write_text("=== digit_sum\nSum.\n--- signature\nx\n--- solution\ny\n--- tests\nz\n")
    with pytest.raises(DataError, match=r"extra: ids also used elsewhere .*\['digit_sum'\]"):
        build_dataset(source, tmp_path / "out")


def test_render_tests_splits_one_line_asserts_and_keeps_stateful_blocks():
    assert render_tests("assert!(a());\nassert!(b());").count("#[test]") == 2
    assert render_tests("let x = 1;\nassert_eq!(x, 1);").count("#[test]") == 1
    assert render_tests("assert!(a());\n\nlet y = 2;\nassert!(y == 2);").count("#[test]") == 2


def test_stub_replaces_every_body_with_todo():
    code = 'pub struct S;\nimpl S {\n    pub fn a(&self) -> u8 {\n        fn inner() {}\n        1\n    }\n}\npub fn b() -> &\'static str {\n    "}"\n}\n'
    stub = make_stub(code)
    assert stub.count("todo!()") == 2 and "inner" not in stub and "pub struct S;" in stub


def test_a_solution_length_cap_keeps_short_references_and_names_the_file_when_none_fit(tmp_path):
    rows = [
        {"id": "short", "prompt": "p", "solution": "pub fn f() {}"},
        {"id": "long", "prompt": "p", "solution": "pub fn g() {}" + " " * 500},
        {"id": "none", "prompt": "p"},  # no reference: its length is unknown, so it is left out
        {"id": "short2", "prompt": "p", "solution": "pub fn h() {}"},
    ]
    path = write_jsonl(tmp_path / "set.jsonl", rows)
    assert [p.id for p in load_problems(str(path), max_solution_chars=100)] == ["short", "short2"]
    assert [p.id for p in load_problems(str(path), max_solution_chars=100, max_rows=1)] == ["short"]
    assert len(load_problems(str(path))) == 4
    with pytest.raises(DataError, match=r"set\.jsonl: no problem has a reference solution of at most 5"):
        load_problems(str(path), max_solution_chars=5)
