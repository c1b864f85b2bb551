import json
import subprocess
import sys

import pytest

from .test_grading import ADD

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
    from reward_sandbox import cli, isolation

    monkeypatch.setattr(isolation, "bwrap_problem", lambda: "bubblewrap is refused here: no namespaces")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"id": "a", "source": ADD}) + "\n")
    code = cli.main(["run", "-i", str(jobs), "-o", str(tmp_path / "o.jsonl"), "--isolation", "strict"])
    assert code == 2
    assert "strict isolation requested but bubblewrap is refused here" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()
