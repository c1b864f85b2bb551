"""The learning benchmark's statistics and report schema (rust_grpo/evaluation/learning.py), on small inputs."""

from __future__ import annotations

import json
import math

import pytest

from rust_grpo.evaluation.learning import (
    easiest,
    learning_report,
    mean_interval,
    per_problem_counts,
    plot_learning,
    problem_bootstrap_gain,
    stage_gains,
    stage_metrics,
    tier_metrics,
    weighted_reward,
    wilson_interval,
)
from rust_grpo.problems.schema import Problem

WEIGHTS = {"format": 0.5, "build": 1.0, "hidden_tests": 1.0, "clippy": 0.0}


def record(fmt: bool, build: bool, hidden: bool, status: str = "ok", passed: int = -1) -> dict[str, object]:
    rewards = {"format": float(fmt), "build": float(build), "hidden_tests": float(hidden), "clippy": None}
    tests = {"passed": 4 if hidden else max(passed, 0), "total": 4} if build else None
    return {
        "status": status,
        "format_ok": fmt,
        "build_ok": build,
        "hidden_pass": hidden,
        "hidden_tests": tests,
        "rewards": rewards,
    }


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson_interval(32, 64)
    assert lo == pytest.approx(0.3813, abs=1e-3) and hi == pytest.approx(0.6187, abs=1e-3)
    assert wilson_interval(0, 64)[0] == 0.0 and 0.05 < wilson_interval(0, 64)[1] < 0.06
    assert wilson_interval(64, 64)[1] == 1.0
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(5, 4)


def test_mean_interval() -> None:
    lo, hi = mean_interval([0.0, 1.0, 0.0, 1.0])
    half = 1.959963984540054 * math.sqrt(1 / 3) / 2
    assert (lo, hi) == pytest.approx((0.5 - half, 0.5 + half))
    assert mean_interval([2.0]) == (2.0, 2.0)


def test_weighted_reward_skips_zero_weights_and_unknowns() -> None:
    assert weighted_reward(record(True, True, False)["rewards"], WEIGHTS) == 1.5  # type: ignore[arg-type]
    assert weighted_reward({"format": None, "build": None, "hidden_tests": None}, WEIGHTS) is None


def test_stage_metrics_schema_and_rates() -> None:
    records = [
        record(True, True, True),
        record(True, True, False, passed=1),
        record(True, False, False),
        record(False, False, False),
    ]
    records.append(record(True, True, True, status="sandbox_error"))  # not the program's verdict: left out
    m = stage_metrics(records, WEIGHTS)
    assert {"n", "format", "build", "hidden_pass", "mean_reward"} <= set(m)
    assert m["n"] == 4 and m["format"] == 0.75 and m["build"] == 0.5 and m["hidden_pass"] == 0.25
    assert m["hidden_share"] == pytest.approx((1 + 0.25 + 0 + 0) / 4)  # partial credit; no build, no share
    assert m["hidden_share_ci"][0] < m["hidden_share"] < m["hidden_share_ci"][1]
    assert m["mean_reward"] == pytest.approx((2.5 + 1.5 + 0.5 + 0) / 4)
    lo, hi = m["build_ci"]
    assert lo < 0.5 < hi


def test_tier_metrics_keep_each_tiers_records_apart() -> None:
    easy = [{**record(True, True, True), "problem_id": "add"}] * 3
    hard = [{**record(True, False, False), "problem_id": "dijkstra"}] * 5
    tiers = tier_metrics(easy + hard, {"core": ["dijkstra"], "basics": ["add", "missing"]}, WEIGHTS)
    assert list(tiers) == ["core", "basics"]
    assert (tiers["core"]["n"], tiers["core"]["hidden_pass"]) == (5, 0.0)
    assert (tiers["basics"]["n"], tiers["basics"]["hidden_pass"]) == (3, 1.0)
    assert stage_metrics(easy + hard, WEIGHTS)["hidden_pass"] == pytest.approx(3 / 8)  # the mix hides both


def test_pass_at_k_per_tier_is_the_mean_over_problems_up_to_the_fewest_samples() -> None:
    one_of_four = [{**record(True, True, i == 0), "problem_id": "add"} for i in range(4)]
    never = [{**record(True, False, False), "problem_id": "dijkstra"} for _ in range(5)]
    both = stage_metrics(one_of_four + never, WEIGHTS)["pass_at_k"]
    assert both == {"1": pytest.approx(0.125), "2": pytest.approx(0.25), "4": pytest.approx(0.5)}  # (1/4 + 0) / 2 ...
    tiers = tier_metrics(one_of_four + never, {"core": ["dijkstra"], "basics": ["add"]}, WEIGHTS)
    assert tiers["core"]["pass_at_k"] == {"1": 0.0, "2": 0.0, "4": 0.0, "5": 0.0}  # the ceiling: never at k = 5
    assert tiers["basics"]["pass_at_k"]["4"] == 1.0 and tiers["basics"]["pass_at_k"]["2"] == pytest.approx(0.5)


def test_learning_report_shape(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stage = stage_metrics([record(True, True, False)] * 3 + [record(False, False, False)], WEIGHTS)
    report = learning_report("pypi:x", 2, {"base": stage, "sft": stage, "grpo": stage})
    assert list(report) == ["model", "grpo_steps", "stages"] and list(report["stages"]) == ["base", "sft", "grpo"]
    json.dumps(report)
    with pytest.raises(ValueError, match="grpo"):
        learning_report("m", 1, {"base": stage, "sft": stage})
    with_rft = learning_report("m", 1, {"grpo": stage, "rft": stage, "base": stage, "sft": stage})
    assert list(with_rft["stages"]) == ["base", "sft", "rft", "grpo"]  # training order, whatever the input's
    with pytest.raises(ValueError, match="unknown: \\['dpo'\\]"):
        learning_report("m", 1, {"base": stage, "sft": stage, "grpo": stage, "dpo": stage})
    steps = [
        {"step": 1, "reward": 0.5, "reward_std": 0.2, "rates/build": 0.5},
        {"step": 2, "reward": 0.9, "reward_std": 0.1, "rates/build": 0.75},
    ]
    out = plot_learning(report, steps, tmp_path / "learning.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    tiered = {s: {**stage, "tiers": {"core": stage, "basics": stage}} for s in ("base", "sft", "grpo")}
    wide = plot_learning(learning_report("m", 2, tiered), steps, tmp_path / "tiers.png")
    assert wide.stat().st_size > out.stat().st_size  # a bar panel and a pass@k panel per tier
    ceiling = {
        "tier": "core",
        "samples": 64,
        "pass_at_k": {"sft": {"1": 0.0, "64": 0.0}, "grpo": {"1": 0.01, "64": 0.2}},
    }
    deep = plot_learning({**learning_report("m", 2, tiered), "ceiling": ceiling}, steps, tmp_path / "ceiling.png")
    assert deep.stat().st_size != wide.stat().st_size  # the core panel draws the 64-sample curves too
    four = plot_learning(with_rft, steps, tmp_path / "rft.png")  # a fourth bar per metric
    assert four.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_easiest_is_shortest_solutions_deterministically() -> None:
    problems = [Problem(id=i, prompt="p", solution=s) for i, s in [("b", "xx"), ("a", "xx"), ("c", "x"), ("d", "xxxx")]]
    assert [p.id for p in easiest(problems, 3)] == ["c", "a", "b"]


def test_argless_builds_per_stage_is_the_share_of_builds_marked_argless() -> None:
    """Two argless builds and a real one, and an argless record that does not build (a scoring
    record never marks one; counted only among builds if it did): the share of the builds."""
    records = [
        record(True, True, False),
        record(True, True, True),
        record(True, True, False),
        record(True, False, False),
    ]
    for r, argless in zip(records, [True, False, True, True]):
        r["argless"] = argless
    m = stage_metrics(records, WEIGHTS)
    assert m["argless_builds"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["argless_builds_ci"][0] < 2 / 3 < m["argless_builds_ci"][1]


def _samples(problem: str, passing: int, n: int = 16) -> list[dict[str, object]]:
    return [{**record(True, True, i < passing), "problem_id": problem} for i in range(n)]


def test_a_gain_carried_by_one_problem_is_not_called_firm() -> None:
    """One of eight problems goes from 0 to 16 of 16 passing, the others stay at 0: the per-sample
    Wilson intervals of the two stages are apart, but resampling problems leaves that one out of
    a third of the draws, so the gain's interval reaches 0."""
    problems = [f"p{i}" for i in range(8)]
    before = [r for p in problems for r in _samples(p, 0)]
    after = [r for p in problems for r in _samples(p, 16 if p == "p0" else 0)]
    assert stage_metrics(after, WEIGHTS)["hidden_pass_ci"][0] > stage_metrics(before, WEIGHTS)["hidden_pass_ci"][1]
    g = problem_bootstrap_gain(before, after, "hidden_pass")
    assert g["gain"] == pytest.approx(16 / 128) and g["problems"] == 8
    assert g["ci"][0] == 0.0 < g["ci"][1]


def test_a_gain_on_every_problem_is_firm_and_pairs_samples_by_problem() -> None:
    """Every problem 2 -> 10 of 16: any draw of problems gives the same gain. Sandbox faults and a
    problem graded at one stage only are left out, and a tier sees only its own problems."""
    before = [r for p in ("a", "b", "c") for r in _samples(p, 2)]
    after = [r for p in ("a", "b", "c") for r in _samples(p, 10)]
    before += [{**record(True, True, True, status="sandbox_error"), "problem_id": "a"}] * 5
    after += _samples("only-after", 16)
    g = problem_bootstrap_gain(before, after, "hidden_pass")
    assert (g["gain"], g["ci"], g["problems"]) == (0.5, [0.5, 0.5], 3)
    assert problem_bootstrap_gain(before, after, "build")["gain"] == 0.0
    assert problem_bootstrap_gain([], after, "hidden_pass") == {"gain": 0.0, "ci": [0.0, 0.0], "problems": 0}
    with pytest.raises(ValueError, match="resamples"):
        problem_bootstrap_gain(before, after, "build", resamples=0)
    with pytest.raises(ValueError, match="'reward'"):
        problem_bootstrap_gain(before, after, "reward")
    gains = stage_gains(before, after, {"one": ["a"], "none": ["z"]})
    assert set(gains) == {"build", "hidden_pass", "hidden_share", "tiers"}
    assert gains["tiers"]["one"]["hidden_pass"]["problems"] == 1
    assert gains["tiers"]["none"]["hidden_pass"]["problems"] == 0


def test_per_problem_counts_name_the_problems_a_rate_comes_from() -> None:
    """Counts per problem, sandbox faults left out, argless counted only among builds."""
    rows = [
        {**record(True, True, True), "problem_id": "square"},
        {**record(True, True, False), "problem_id": "square", "argless": True},
        {**record(True, False, False), "problem_id": "square", "argless": True},
        {**record(True, True, True, status="sandbox_error"), "problem_id": "square"},
        {**record(False, False, False), "problem_id": "shout"},
    ]
    assert per_problem_counts(rows) == {
        "shout": {"n": 1, "build": 0, "hidden_pass": 0, "argless": 0},
        "square": {"n": 3, "build": 2, "hidden_pass": 1, "argless": 1},
    }
