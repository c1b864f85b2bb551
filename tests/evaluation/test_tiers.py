"""Tiers in evaluation (``eval --tier NAME=FILE``, the learning benchmark's core and basics): each tier's
rates and pass@k curve apart, so the hard problems' ceiling is not averaged away by the easy ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from rust_grpo.evaluation.report import markdown
from rust_grpo.evaluation.scoring import summarize
from rust_grpo.problems.schema import DataError, load_problems
from rust_grpo.problems.selection import with_tiers
from rust_grpo.rewards.functions import REWARD_NAMES

DATA = Path(__file__).resolve().parents[2] / "data"


def _record(pid: str, passes: bool) -> dict[str, object]:
    return {
        "problem_id": pid,
        "status": "ok",
        "format_ok": True,
        "build_ok": True,
        "clippy_clean": True,
        "own_tests_pass": False,
        "hidden_pass": passes,
        "rewards": dict.fromkeys(REWARD_NAMES, 0.0),
    }


def test_summary_has_each_tiers_pass_at_k_curve_and_the_report_a_row_per_tier() -> None:
    records = [_record("add", i < 2) for i in range(8)] + [_record("dijkstra", False) for _ in range(8)]
    summary = summarize(records, tiers={"basics": ["add"], "core": ["dijkstra", "absent"]})
    assert set(summary["hidden"]) == {"pass@1", "pass@2", "pass@4", "pass@5", "pass@8"}  # 5 from ks, powers of 2
    core, basics = summary["tiers"]["core"], summary["tiers"]["basics"]
    assert (core["problems"], core["samples"], core["build"]) == (1, 8, 1.0)
    assert core["pass_at_k"] == {"1": 0.0, "2": 0.0, "4": 0.0, "8": 0.0}  # the ceiling: never within 8 samples
    assert basics["pass_at_k"]["1"] == pytest.approx(0.25) and basics["pass_at_k"]["8"] == 1.0
    assert basics["pass_at_k"]["2"] == pytest.approx(1 - (6 * 5) / (8 * 7), abs=1e-4)  # unbiased, not 1 - 0.75**2
    text = markdown(summary, "t")
    assert "| core | 1 | 8 | 100.0% | 0.0% | 0.0% | 0.0% | 0.0% | 0.0% |" in text
    assert "| basics | 1 | 8 | 100.0% | 25.0% | 25.0% |" in text
    assert "tiers" not in summarize(records)  # no tiers asked, none reported


def test_tiers_load_each_file_and_refuse_a_name_or_problem_twice() -> None:
    core = load_problems(str(DATA / "eval.jsonl"), max_rows=3)
    problems, tiers = with_tiers("eval", core, [f"basics={DATA / 'basics-eval.jsonl'}"], max_rows=2)
    assert list(tiers) == ["eval", "basics"] and len(tiers["basics"]) == 2 and len(problems) == 5
    with pytest.raises(DataError, match="expected NAME=FILE with a new NAME"):
        with_tiers("eval", core, [f"eval={DATA / 'basics-eval.jsonl'}"])
    with pytest.raises(DataError, match="expected NAME=FILE"):
        with_tiers("eval", core, ["basics"])
    with pytest.raises(DataError, match="already in another tier"):
        with_tiers("eval", core, [f"again={DATA / 'eval.jsonl'}"])
