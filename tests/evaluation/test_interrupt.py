"""Ctrl-C stops grading within about a second: the sandboxes running are killed, nothing queued
starts, and `score` (and `eval`, which scores through the same path) writes what was graded as a
report that says it is partial, then exits 130."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

from reward_sandbox import Grader
from reward_sandbox.cache import ResultCache

from ..conftest import TEST_LIMITS


def _ctrl_c() -> None:
    """What a terminal's Ctrl-C does to this process: a real SIGINT (it also interrupts a blocking wait)."""
    os.kill(os.getpid(), signal.SIGINT)


SPIN = "\n#[test]\nfn spin() {\n    let mut n = 0u64;\n    loop {\n        n = n.wrapping_add(1);\n        std::hint::black_box(n);\n    }\n}\n"


def _bwrap_children() -> list[int]:
    """Processes of this one (sandboxes) still alive."""
    me = str(os.getpid())
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() == me:
            out.append(int(pid))
    return out


def test_ctrl_c_stops_the_grader_within_seconds(foreground):
    """Eight programs whose tests spin until the CPU limit (10 s each, two at a time: 40 s of work):
    interrupted after a second, `grade` raises within ~2 s and leaves no sandbox behind."""
    rows = [json.loads(line) for line in Path("data/eval.jsonl").read_text(encoding="utf-8").splitlines()][:1]
    jobs = [{"id": f"s{i}", "source": f"// {i}\n" + rows[0]["solution"] + SPIN, "tests": ""} for i in range(8)]
    limits = TEST_LIMITS.__class__(**{**TEST_LIMITS.__dict__, "run_cpu_s": 10, "run_wall_s": 20.0})
    with Grader(workers=2, limits=limits, cache=ResultCache()) as grader:
        threading.Timer(2.0, _ctrl_c).start()
        started = time.monotonic()
        try:
            grader.grade(jobs)
        except KeyboardInterrupt:
            stopped = time.monotonic() - started
        else:
            raise AssertionError("grading ended before the interrupt")
        assert stopped < 5.0, f"{stopped:.1f} s to stop"
        assert _bwrap_children() == []
        # the grader works again afterwards: cancelling is not sticky
        (again,) = grader.grade([{"id": "ok", "source": rows[0]["solution"], "tests": rows[0]["tests"]}])
        assert again.status.value == "ok", again.reason


def test_score_writes_a_partial_report_on_ctrl_c(tmp_path, monkeypatch, foreground):
    from rust_grpo import cli
    from rust_grpo.evaluation import scoring

    monkeypatch.setattr(scoring, "SCORE_CHUNK", 2)
    monkeypatch.setenv("REWARD_SANDBOX_CACHE", str(tmp_path / "cache"))
    rows = [json.loads(line) for line in Path("data/eval.jsonl").read_text(encoding="utf-8").splitlines()][:2]
    completions = [{"problem_id": r["id"], "code": r["solution"]} for r in rows]  # the first chunk: quick
    completions += [{"problem_id": rows[0]["id"], "code": rows[0]["solution"] + f"// {i}\n" + SPIN} for i in range(6)]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in completions))

    scored = scoring.score_record
    interrupted_at: list[float] = []

    def record_then_interrupt(*args, **kwargs):  # type: ignore[no-untyped-def]
        record = scored(*args, **kwargs)
        if not interrupted_at:  # the first chunk is being recorded: Ctrl-C a second into the next one
            interrupted_at.append(time.monotonic() + 1.0)
            threading.Timer(1.0, _ctrl_c).start()
        return record

    monkeypatch.setattr(scoring, "score_record", record_then_interrupt)
    out = tmp_path / "out"
    code = cli.main(["score", str(path), "--dataset", "data/eval.jsonl", "--out", str(out), "-q"])
    assert code == 130
    assert time.monotonic() - interrupted_at[0] < 5.0
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["status"] == "ok" for line in lines)
    assert (out / "report.md").read_text().startswith("**Partial report** (interrupted: 2 of 8 completions graded)")
    assert json.loads((out / "report.json").read_text())["meta"]["partial"].startswith("interrupted")
