"""Evaluation reports: JSON for machines, Markdown for people, PNG plots; and side-by-side comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reward_sandbox.outfiles import write_lines, write_text

RATE_LABELS = {
    "format": "format ok",
    "build": "builds",
    "clippy_clean": "clippy clean",
    "own_tests": "own tests pass",
    "hidden_tests": "hidden tests pass",
}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _per_problem(summary: dict[str, Any]) -> str:
    low, high = summary["samples_per_problem"], summary.get("samples_per_problem_max", summary["samples_per_problem"])
    return f"{low} per problem" if low == high else f"{low} to {high} per problem; pass@k uses at most {low}"


def markdown(summary: dict[str, Any], title: str) -> str:
    unknown = summary.get("unknown_problems", 0)
    lines = [
        f"# {title}",
        "",
        f"{summary['problems']} problem{'' if summary['problems'] == 1 else 's'}, {summary['samples']} "
        f"sample{'' if summary['samples'] == 1 else 's'} ({_per_problem(summary)})."
        + (
            f" {unknown} completions name problems the dataset does not hold: not graded, not counted."
            if unknown
            else ""
        ),
        "",
        "| metric | value |",
        "|---|---|",
    ]
    for key, label in RATE_LABELS.items():
        lines.append(f"| {label} (all samples) | {_pct(summary['rates'][key])} |")
    for key, value in summary["hidden"].items():
        lines.append(f"| hidden tests {key} | {_pct(value)} |")
    lines += ["", "Statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(summary["statuses"].items())), ""]
    lines += _tier_lines(summary.get("tiers"))
    lines += _repair_lines(summary.get("repair"))
    lines += ["| problem | samples | build | clippy | own tests | hidden pass |", "|---|---|---|---|---|---|"]
    for pid, row in summary["per_problem"].items():
        lines.append(
            f"| {pid} | {row['samples']} | {row['build']} | {row['clippy_clean']} | {row['own_tests']} | {row['hidden_pass']} |"
        )
    return "\n".join(lines) + "\n"


def _tier_lines(tiers: dict[str, Any] | None) -> list[str]:
    """Per tier (``eval --tier``): its rates and hidden-test pass@k at every k the curve has."""
    if not tiers:
        return []
    ks = sorted({int(k) for t in tiers.values() for k in t["pass_at_k"]})
    lines = [
        "| tier | problems | samples | builds | hidden tests pass | " + " | ".join(f"pass@{k}" for k in ks) + " |",
        "|---|---|---|---|---|" + "---|" * len(ks),
    ]
    for name, t in tiers.items():
        curve = [_pct(t["pass_at_k"].get(str(k))) if str(k) in t["pass_at_k"] else "-" for k in ks]
        lines.append(
            f"| {name.replace('|', '/')} | {t['problems']} | {t['samples']} | {_pct(t['build'])} | {_pct(t['hidden_tests'])} | "
            + " | ".join(curve)
            + " |"
        )
    return [*lines, ""]


def plot_pass_at_k(ax: Any, curves: dict[str, dict[str, float]], title: str) -> None:
    """pass@k against k (log scale), one line per named curve: the ceiling k samples reach."""
    for name, curve in curves.items():
        if curve:
            ks = [int(k) for k in curve]
            ax.plot(ks, [100 * v for v in curve.values()], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 100)
    ax.set_xlabel("k (samples per problem)")
    ax.set_ylabel("hidden tests pass within k samples (%)")
    ax.set_title(title)
    ax.legend()


def _repair_lines(repair: dict[str, Any] | None) -> list[str]:
    """The per-turn table of ``eval --repair-turns`` (turn 0 = single shot); the rates above are final answers'."""
    if not repair:
        return []
    lines = [
        f"Repair episodes of up to {repair['max_turns']} answers; the rates above are the final answers'. After each turn:",
        "",
        "| turn | hidden pass@1 | builds | episodes answering |",
        "|---|---|---|---|",
    ]
    for t in repair["per_turn"]:
        lines.append(f"| {t['turn']} | {_pct(t['pass@1'])} | {_pct(t['build_rate'])} | {t['episodes_answering']} |")
    return [*lines, ""]


def plot_summary(summary: dict[str, Any], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    repair, tiers = summary.get("repair"), summary.get("tiers")
    panels = 2 + bool(repair) + bool(tiers)
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.5))
    left, right = axes[0], axes[1]
    if tiers:
        plot_pass_at_k(axes[-1], {name: t["pass_at_k"] for name, t in tiers.items()}, "pass@k per tier")
    if repair:
        turns = [t["turn"] for t in repair["per_turn"]]
        axes[2].plot(turns, [100 * t["pass@1"] for t in repair["per_turn"]], marker="o", label="hidden pass@1")
        axes[2].plot(turns, [100 * t["build_rate"] for t in repair["per_turn"]], marker="s", label="builds")
        axes[2].set_xticks(turns)
        axes[2].set_ylim(0, 100)
        axes[2].set_xlabel("turn (0 = single shot)")
        axes[2].set_ylabel("%")
        axes[2].set_title("After each repair turn")
        axes[2].legend()
    labels = list(RATE_LABELS.values()) + [f"hidden {k}" for k in summary["hidden"]]
    values = [summary["rates"][k] for k in RATE_LABELS] + list(summary["hidden"].values())
    left.barh(labels, [100 * v for v in values], color="#4c72b0")
    left.set_xlim(0, 100)
    left.set_xlabel("%")
    left.set_title("Rates")
    fractions = [row["hidden_pass"] / row["samples"] for row in summary["per_problem"].values() if row["samples"]]
    right.hist(fractions, bins=10, range=(0, 1), color="#55a868")
    right.set_xlabel("share of samples passing the hidden tests")
    right.set_ylabel("problems")
    right.set_title("Per-problem hidden-test pass rate")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_report(
    out_dir: Path,
    records: list[dict[str, Any]],
    summary: dict[str, Any],
    title: str,
    meta: dict[str, Any] | None = None,
) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "results": out_dir / "results.jsonl",
        "report": out_dir / "report.json",
        "markdown": out_dir / "report.md",
        "plot": out_dir / "report.png",
    }
    write_lines(paths["results"], (json.dumps(r) for r in records))
    write_text(paths["report"], json.dumps({"title": title, "meta": meta or {}, **summary}, indent=2))
    skipped = (meta or {}).get("skipped") or []
    notes = "".join(f"- skipped {line}\n" for line in skipped)
    partial = (meta or {}).get("partial")  # an interrupted run: say so before any figure
    head = f"**Partial report** ({partial}).\n\n" if partial else ""
    body = markdown(summary, title) + (f"\n## Lines not scored\n\n{notes}" if notes else "")
    write_text(paths["markdown"], head + body)
    plot_summary(summary, paths["plot"], title)
    return paths


def compare(a: dict[str, Any], b: dict[str, Any], name_a: str = "A", name_b: str = "B") -> str:
    """A Markdown table of two reports' headline numbers, with deltas and per-problem flips."""
    lines = [f"| metric | {name_a} | {name_b} | delta |", "|---|---|---|---|"]
    rows = [(RATE_LABELS[k], a["rates"].get(k), b["rates"].get(k)) for k in RATE_LABELS]
    rows += [
        (f"hidden {k}", a["hidden"].get(k), b["hidden"].get(k)) for k in sorted(set(a["hidden"]) | set(b["hidden"]))
    ]
    for label, x, y in rows:
        delta = "n/a" if x is None or y is None else f"{100 * (y - x):+.1f} pts"
        lines.append(f"| {label} | {_pct(x)} | {_pct(y)} | {delta} |")
    common = sorted(set(a["per_problem"]) & set(b["per_problem"]))
    gained = [p for p in common if not a["per_problem"][p]["hidden_pass"] and b["per_problem"][p]["hidden_pass"]]
    lost = [p for p in common if a["per_problem"][p]["hidden_pass"] and not b["per_problem"][p]["hidden_pass"]]
    lines += [
        "",
        f"{len(common)} problems in both. Solved only by {name_b}: {', '.join(gained) or 'none'}. "
        f"Solved only by {name_a}: {', '.join(lost) or 'none'}.",
    ]
    return "\n".join(lines) + "\n"
