"""``rust-grpo``: train, evaluate and score Rust coding models; verify and build datasets."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("rust_grpo")


def _grader(args: argparse.Namespace) -> Any:
    from reward_sandbox import Settings, open_grader

    settings = Settings(isolation=getattr(args, "isolation", "auto"), workers=getattr(args, "workers", None) or 0)
    return open_grader(settings.with_run_timeout(getattr(args, "timeout", None) or 10.0))


def run_config(path: str) -> Any:
    """A run's config: a TOML file or preset, or the ``config.json`` a training run wrote."""
    from .config import from_dict, load_config

    if path.endswith(".json"):
        return from_dict(json.loads(Path(path).read_text()), path)
    return load_config(path)


def _problems_by_id(path: str | None) -> dict[str, Any]:
    from .data import load_problems

    return {p.id: p for p in load_problems(path)} if path else {}


def cmd_train(args: argparse.Namespace) -> int:
    from .config import load_config
    from .train import train

    cfg = load_config(args.config, args.set)
    log.info("resolved config:\n%s", cfg.to_json())
    print(f"final model: {train(cfg, resume=args.resume)}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(Path(args.out), steps=args.steps)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from .plots import plot_run

    print(plot_run(Path(args.run_dir)))
    return 0


def _score_and_report(
    completions: list[Any], problems: dict[str, Any], args: argparse.Namespace, title: str, meta: dict[str, Any]
) -> int:
    from .report import write_report
    from .scoring import score_completions, summarize

    with _grader(args) as grader:
        records = score_completions(completions, problems, grader)
        meta = {**meta, "isolation": grader.level}
    summary = summarize(records)
    paths = write_report(Path(args.out), records, summary, title, meta)
    rates = summary["rates"]
    print(
        f"{summary['samples']} samples over {summary['problems']} problems: build {rates['build']:.1%}, clippy clean "
        f"{rates['clippy_clean']:.1%}, own tests {rates['own_tests']:.1%}, hidden tests {rates['hidden_tests']:.1%}, "
        + ", ".join(f"{k} {v:.1%}" for k, v in summary["hidden"].items())
    )
    print(f"report: {paths['markdown']} (also {paths['report'].name}, {paths['plot'].name}, {paths['results'].name})")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from .scoring import read_completions

    completions, errors = read_completions(Path(args.completions))
    for e in errors:
        log.warning("skipping %s", e)
    if not completions:
        print(f"rust-grpo score: no usable completions in {args.completions}", file=sys.stderr)
        return 2
    return _score_and_report(
        completions,
        _problems_by_id(args.dataset),
        args,
        f"Scores: {Path(args.completions).name}",
        {"completions": args.completions, "dataset": args.dataset, "skipped": errors},
    )


def cmd_eval(args: argparse.Namespace) -> int:
    from .data import load_problems
    from .evaluate import SamplingSettings, generate, write_completions

    problems = load_problems(args.dataset, max_rows=args.limit)
    fmt = run_config(args.config).data.format() if args.config else None
    settings = SamplingSettings(
        samples=args.samples,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        batch_problems=args.batch,
        seed=args.seed,
    )
    extra = {"fmt": fmt} if fmt is not None else {}
    completions = generate(args.backend, args.model, problems, settings, adapter=args.adapter, **extra)
    write_completions(Path(args.out) / "completions.jsonl", completions)
    meta = {
        "model": args.model,
        "adapter": args.adapter,
        "dataset": args.dataset,
        "backend": args.backend,
        "config": args.config,
        **settings.__dict__,
    }
    return _score_and_report(
        completions,
        {p.id: p for p in problems},
        args,
        f"Eval: {Path(args.model).name} on {Path(args.dataset).name}",
        meta,
    )


def cmd_compare(args: argparse.Namespace) -> int:
    from .report import compare

    a, b = (json.loads(Path(p).read_text()) for p in (args.a, args.b))
    print(compare(a, b, args.name_a or Path(args.a).parent.name, args.name_b or Path(args.b).parent.name), end="")
    return 0


def cmd_data_verify(args: argparse.Namespace) -> int:
    from .data import load_problems
    from .verify import verify_problems

    failed = 0
    with _grader(args) as grader:
        for path in args.paths:
            problems = load_problems(path, strict=True)
            report = verify_problems(problems, grader, min_asserts=args.min_asserts)
            for line in report.failures:
                print(f"FAIL {path}: {line}")
            print(
                f"{path}: {report.checked - len({f.split(':')[0] for f in report.failures})}/{report.checked} problems verified"
            )
            failed += len(report.failures)
    return 1 if failed else 0


def cmd_data_filter(args: argparse.Namespace) -> int:
    from .data import load_problems
    from .importers import write_problems

    problems = load_problems(args.input)
    jobs = [p.job_or_invalid(p.solution) for p in problems]
    with _grader(args) as grader:
        results = grader.grade(jobs)
    kept = [
        p
        for p, r in zip(problems, results)
        if r.status.value == "ok" and r.tests.counts.passed > 0 and (r.clippy.ok or not args.clippy)
    ]
    write_problems(Path(args.out), kept)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    print(f"kept {len(kept)}/{len(problems)} rows whose code passes its tests -> {args.out} ({counts})")
    return 0


def cmd_data_import(args: argparse.Namespace) -> int:
    from .importers import import_problems, write_problems

    problems, skipped = import_problems(args.format, Path(args.source))
    for s in skipped:
        log.warning("skipped %s", s)
    write_problems(Path(args.out), problems)
    print(f"imported {len(problems)} problems ({len(skipped)} skipped) -> {args.out}")
    return 0


def cmd_data_build(args: argparse.Namespace) -> int:
    from .problemset import build_dataset

    print(f"built {build_dataset(Path(args.source), Path(args.out))} in {args.out}")
    return 0


def _sandbox_options(p: argparse.ArgumentParser) -> None:
    from reward_sandbox import Settings
    from reward_sandbox.isolation import CHOICES

    helps = Settings.help()
    p.add_argument("--workers", "-j", type=int, default=None, help="sandbox " + helps["workers"])
    p.add_argument("--isolation", choices=CHOICES, default="auto", help=helps["isolation"])
    p.add_argument(
        "--timeout", type=float, default=10.0, help="CPU seconds for one program's tests (wall clock: twice that)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rust-grpo", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="GRPO training from a TOML config")
    p.add_argument(
        "--config", "-c", required=True, help="a TOML file, or a shipped preset: tiny-cpu, oxen-1.5b, modern-1.5b"
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override, e.g. train.max_steps=10")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in train.output_dir")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("demo", help="offline CPU demo: tiny model, real sandboxed rewards, metrics and plots")
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--steps", type=int, default=8)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("plot", help="PNG training curves of a run")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("eval", help="sample K completions per problem and report build/clippy/test rates and pass@k")
    p.add_argument("--model", required=True, help="model path or id (a merged model, or the base with --adapter)")
    p.add_argument("--adapter", default=None, help="a LoRA adapter directory (e.g. RUN/final)")
    p.add_argument(
        "--config", default=None, help="the run's config (TOML, preset or RUN/config.json): evaluate with its prompt"
    )
    p.add_argument("--dataset", default="data/eval.jsonl")
    p.add_argument("--samples", "-k", type=int, default=4)
    p.add_argument("--backend", choices=["hf", "vllm"], default="hf")
    p.add_argument("--max-new-tokens", type=int, default=1024)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--batch", type=int, default=4, help="problems per generation batch (hf)")
    p.add_argument("--limit", type=int, default=0, help="first N problems only")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/eval")
    _sandbox_options(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("score", help="score existing completions (JSONL) against cargo test suites")
    p.add_argument("completions")
    p.add_argument("--dataset", default=None, help="problems with hidden tests, matched by problem_id")
    p.add_argument("--out", default="runs/score")
    _sandbox_options(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("compare", help="two report.json files side by side")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--name-a")
    p.add_argument("--name-b")
    p.set_defaults(func=cmd_compare)

    data = sub.add_parser("data", help="dataset tools").add_subparsers(dest="data_command", required=True)
    p = data.add_parser("verify", help="references pass their hidden tests; todo!() stubs fail them")
    p.add_argument("paths", nargs="+")
    p.add_argument(
        "--min-asserts", type=int, default=4, help="asserts the hidden tests must hold (1 for external suites)"
    )
    _sandbox_options(p)
    p.set_defaults(func=cmd_data_verify)
    p = data.add_parser("filter", help="keep only rows whose code passes its tests")
    p.add_argument("input")
    p.add_argument("--out", required=True)
    p.add_argument("--clippy", action="store_true", help="also require clippy-clean code")
    _sandbox_options(p)
    p.set_defaults(func=cmd_data_filter)
    p = data.add_parser("import", help="convert an external suite to our schema")
    from .importers import FORMATS

    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("source")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_data_import)
    p = data.add_parser("build", help="build data/train.jsonl and data/eval.jsonl from data/source/*.rsp")
    p.add_argument("--source", default="data/source")
    p.add_argument("--out", default="data")
    p.set_defaults(func=cmd_data_build)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("rust_grpo").setLevel(logging.INFO)
    from reward_sandbox import IsolationUnavailable, ToolchainError

    from .config import ConfigError
    from .data import DataError

    try:
        return int(args.func(args))
    except (ConfigError, DataError, IsolationUnavailable, ToolchainError, FileNotFoundError) as exc:
        print(f"rust-grpo: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
