import json
import subprocess
import sys
from pathlib import Path

import pytest

from rust_grpo.rewards.sandbox import sandbox_settings

from .sandbox.test_grading import ADD

pytestmark = pytest.mark.cargo


def test_cli_grades_a_jsonl_file_and_keeps_bad_lines_in_place(tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    lines = [
        json.dumps({"id": "a", "source": ADD, "tests": "#[test]\nfn t() { assert_eq!(add(1, 2), 3); }"}),
        "{not json",
        json.dumps({"id": "c", "source": ADD, "test_mode": "nope"}),
        json.dumps({"id": "d", "source": "pub fn f( {"}),
    ]
    jobs.write_text("\n".join(lines) + "\n")
    out = tmp_path / "results.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "reward_sandbox.cli", "run", "-i", str(jobs), "-o", str(out), "-j", "2", "--no-cache"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in results] == ["a", "line-2", "c", "d"]
    assert [r["status"] for r in results] == ["ok", "invalid_input", "invalid_input", "compile_error"]
    assert "not valid JSON" in results[1]["reason"]
    assert results[0]["tests"] == {**results[0]["tests"], "passed": 1, "failed": 0, "ok": True}
    assert "isolation=" in proc.stderr and "4 jobs" in proc.stderr


def test_cli_strict_isolation_exits_2_with_the_reason_when_unavailable(tmp_path, monkeypatch, capsys):
    from reward_sandbox import cli
    from reward_sandbox.isolation import levels as isolation

    monkeypatch.setattr(isolation, "bwrap_problem", lambda: "bubblewrap is refused here: no namespaces")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"id": "a", "source": ADD}) + "\n")
    code = cli.main(["run", "-i", str(jobs), "-o", str(tmp_path / "o.jsonl"), "--isolation", "strict"])
    assert code == 2
    assert "strict isolation requested but bubblewrap is refused here" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def rust_grpo(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "rust_grpo.cli", *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_score_needs_a_dataset_and_counts_unknown_problems_apart(tmp_path):
    from .conftest import ROOT

    eval_set = str(ROOT / "data" / "eval.jsonl")
    problem = json.loads((ROOT / "data" / "eval.jsonl").read_text().splitlines()[0])
    rows = [
        {"problem_id": problem["id"], "code": problem["solution"]},
        {"problem_id": problem["id"], "code": problem["solution"]},
        {"problem_id": "no-such-problem", "code": problem["solution"]},
    ]
    completions = tmp_path / "c.jsonl"
    completions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    missing = rust_grpo("score", str(completions))
    assert missing.returncode == 2 and "--dataset" in missing.stderr
    proc = rust_grpo("score", str(completions), "--dataset", eval_set, "--out", str(tmp_path / "out"), "-q")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["samples"] == 2 and report["unknown_problems"] == 1 and report["rates"]["hidden_tests"] == 1.0
    assert "1 completions name problems the dataset does not hold" in (tmp_path / "out" / "report.md").read_text()


def test_report_says_how_many_samples_each_problem_had():
    """Problems sampled unevenly (1 and 2 samples): the report says so, and that pass@k stops at the
    fewest; evenly sampled, one number."""
    from rust_grpo.evaluation.report import markdown
    from rust_grpo.evaluation.scoring import summarize
    from rust_grpo.rewards.functions import REWARD_NAMES

    def record(problem: str, passed: bool) -> dict:
        flags = {"format_ok": True, "build_ok": True, "clippy_clean": True, "own_tests_pass": passed}
        rewards = dict.fromkeys(REWARD_NAMES, 1.0 if passed else 0.0)
        return {"problem_id": problem, **flags, "hidden_pass": passed, "status": "ok", "rewards": rewards}

    uneven = summarize([record("a", True), record("b", False), record("b", True)])
    assert "(1 to 2 per problem; pass@k uses at most 1)." in markdown(uneven, "t")
    even = summarize([record("a", True), record("b", False)])
    assert "2 problems, 2 samples (1 per problem)." in markdown(even, "t")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["compare", "NOTREPORT", "NOTREPORT"], "not a report"),
        (["plot", "no/such/run"], "no metrics.jsonl there"),
        (["train", "--config", "tiny-cpu", "--set", "train.max_steps=-3"], "train.max_steps must be"),
        (["train", "--config", "tiny-cpu", "--set", "train.learnig_rate=1"], "did you mean learning_rate"),
    ],
)
def test_cli_errors_are_one_line_with_exit_2_never_a_traceback(tmp_path, args, needle):
    not_report = tmp_path / "x.json"
    not_report.write_text('{"a": 1}')
    proc = rust_grpo(*[str(not_report) if a == "NOTREPORT" else a for a in args], cwd=tmp_path)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_every_cli_option_says_what_it_is_for():
    import argparse

    from reward_sandbox.cli import build_parser as sandbox_parser
    from rust_grpo.cli import build_parser

    def undocumented(parser: argparse.ArgumentParser, where: str) -> list[str]:
        missing = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    missing += undocumented(sub, f"{where} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{where} {'/'.join(action.option_strings) or action.dest}")
        return missing

    assert undocumented(build_parser(), "rust-grpo") + undocumented(sandbox_parser(), "reward-sandbox") == []


def test_long_grading_commands_show_a_rate_and_an_eta(grader, capsys):
    from rust_grpo.progress import ProgressGrader

    jobs = [{"id": str(i), "source": ADD} for i in range(3)]
    results = ProgressGrader(grader, "grading", enabled=True).grade(jobs)
    assert [r.status.value for r in results] == ["ok"] * 3
    err = capsys.readouterr().err
    assert "grading" in err and "3/3" in err and "job/s" in err
    assert ProgressGrader(grader, enabled=False).grade(jobs[:1])[0].status.value == "ok"
    assert "grading" not in capsys.readouterr().err


def test_batching_is_on_by_default_and_switches_off_everywhere():
    from reward_sandbox.cli import build_parser
    from reward_sandbox.settings import settings_from_args
    from rust_grpo.config import load_config

    base = ["run", "-i", "in.jsonl", "-o", "out.jsonl"]
    assert settings_from_args(build_parser().parse_args(base)).batch is True
    assert settings_from_args(build_parser().parse_args([*base, "--no-batch"])).batch is False
    assert sandbox_settings(load_config("configs/tiny-cpu.toml").reward).batch is True
    assert sandbox_settings(load_config("configs/tiny-cpu.toml", ["reward.batch=false"]).reward).batch is False


def test_score_draws_its_progress_bar_on_a_terminal_that_reports_no_size(tmp_path):
    """A pty nobody sized (0 x 0: `script`, some consoles) made tqdm draw nothing at all."""
    import os
    import pty

    rows = [json.loads(line) for line in Path("data/eval.jsonl").read_text(encoding="utf-8").splitlines()][:3]
    completions = tmp_path / "c.jsonl"
    completions.write_text("".join(json.dumps({"problem_id": r["id"], "code": r["solution"]}) + "\n" for r in rows))
    master, slave = pty.openpty()  # a new pty reports 0 columns and 0 rows until someone sizes it
    argv = [sys.executable, "-m", "rust_grpo.cli", "score", str(completions), "--dataset", "data/eval.jsonl"]
    env = {**os.environ, "REWARD_SANDBOX_CACHE": str(tmp_path / "cache")}  # graded, not read from a cache
    proc = subprocess.Popen([*argv, "--out", str(tmp_path / "out")], stderr=slave, stdout=subprocess.DEVNULL, env=env)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the pty
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=120) == 0
    os.close(master)
    assert b"scoring: 100%" in seen and b"3/3" in seen, seen[-500:]
