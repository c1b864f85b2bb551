"""benchmarks/learning_seeds.py: several seeds of one recipe as one claim (mean and a t-interval across
seeds), and never a mean over different recipes."""

import copy
import json

from .conftest import run_script


def _report(seed: int, build: float) -> dict:
    stage = {
        "build": build,
        "hidden_pass": 0.1,
        "hidden_share": 0.2,
        "tiers": {"core": {"build": build / 2, "hidden_pass": 0.0, "hidden_share": 0.05}},
    }
    gain = {f: {"gain": build - 0.1} for f in ("build", "hidden_pass", "hidden_share")}
    return {
        "stages": {"sft": stage, "grpo": stage},
        "grpo_gain_over_sft": {**gain, "tiers": {"core": gain}},
        "sampling": {"seed": seed, "samples": 16},
        "grpo_steps": 60,
        "heldout": ["a"],
        "wall_s": 1000 + seed,
        "provenance": {"config": "configs/smollm-cpu.toml", "overrides": [f"train.seed={seed}", "vllm.enabled=true"]},
    }


def _run(tmp_path, reports):  # type: ignore[no-untyped-def]
    paths = []
    for i, r in enumerate(reports):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(r))
    out = tmp_path / "seeds.json"
    proc = run_script("benchmarks/learning_seeds.py", *map(str, paths), "--out", str(out))
    return proc, out


def test_seeds_become_a_mean_with_a_t_interval(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc, out = _run(tmp_path, [_report(0, 0.3), _report(1, 0.4), _report(2, 0.5)])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(out.read_text())
    build = summary["stages"]["grpo"]["all"]["build"]
    assert build["mean"] == 0.4 and build["values"] == [0.3, 0.4, 0.5]
    assert build["ci"][0] == round(0.4 - 4.303 * 0.1 / 3**0.5, 4)  # t with 2 degrees of freedom, not 1.96
    assert summary["stages"]["grpo"]["core"]["build"]["mean"] == 0.2
    assert summary["gain_over_sft"]["core"]["build"]["mean"] == 0.3
    assert "| grpo | core | 20.0 [" in proc.stdout
    assert "recipe_s" not in summary  # no run recorded it


def test_the_recipes_time_without_the_ceiling_is_summarised_when_every_seed_recorded_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reports = [{**_report(seed, 0.3), "recipe_s": 900 + 10 * seed} for seed in range(3)]
    proc, out = _run(tmp_path, reports)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(out.read_text())
    assert summary["recipe_s"]["mean"] == 910 and [r["recipe_s"] for r in summary["runs"]] == [900, 910, 920]
    assert "without the ceiling: 910.0 [" in proc.stdout
    proc, out = _run(tmp_path, [*reports[:2], _report(2, 0.3)])
    assert "recipe_s" not in json.loads(out.read_text()) and "recipe_s" in json.loads(out.read_text())["runs"][0]


def test_runs_of_different_recipes_or_one_seed_twice_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    other = copy.deepcopy(_report(1, 0.4))
    other["provenance"]["overrides"].append("train.beta=0")
    proc, _ = _run(tmp_path, [_report(0, 0.3), other])
    assert proc.returncode != 0 and "differ in more than their seed" in proc.stderr
    proc, _ = _run(tmp_path, [_report(0, 0.3), _report(0, 0.4)])
    assert proc.returncode != 0 and "a seed appears twice" in proc.stderr


def test_the_order_a_run_wrote_its_keys_in_is_not_a_different_recipe(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reordered = _report(1, 0.4)
    reordered["sampling"] = dict(reversed(list(reordered["sampling"].items())))  # {"samples", "seed"}
    proc, _ = _run(tmp_path, [_report(0, 0.3), reordered])
    assert proc.returncode == 0, proc.stderr
