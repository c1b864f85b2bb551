"""``reward-sandbox``: grade a JSONL file of jobs, check the sandbox, or serve rewards over HTTP."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .backends import BACKENDS, FAST
from .cache import ResultCache, default_cache_dir
from .isolation import IsolationUnavailable, bwrap_problem
from .jobs import InvalidJob
from .limits import Limits
from .pool import Grader
from .results import Result
from .toolchain import ToolchainError, find_toolchain


def read_jsonl(path: Path) -> list[Any]:
    """Records of a JSONL file; an unparsable line becomes an :class:`InvalidJob` that grading
    reports as ``invalid_input`` in its place, so the other lines still run."""
    records: list[Any] = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                records.append(InvalidJob(f"line {number}: not valid JSON ({exc.msg})", job_id=f"line-{number}"))
    return records


def _progress(total: int) -> Any:
    done = 0
    start = time.monotonic()

    def report(_index: int, _result: Result) -> None:
        nonlocal done
        done += 1
        if sys.stderr.isatty() or done == total or done % 50 == 0:
            rate = done / max(time.monotonic() - start, 1e-9)
            print(f"\r  graded {done}/{total} ({rate:.1f}/s)", end="" if done < total else "\n", file=sys.stderr, flush=True)

    return report


def cmd_run(args: argparse.Namespace) -> int:
    records = read_jsonl(args.input)
    limits = Limits.from_dict(json.loads(args.limits)) if args.limits else Limits()
    cache = ResultCache(None if args.no_cache else (args.cache_dir or default_cache_dir()))
    start = time.monotonic()
    with Grader(workers=args.workers, isolation=args.isolation, backend=args.backend, limits=limits, cache=cache) as grader:
        print(f"reward-sandbox: isolation={grader.level} backend={grader.backend} workers={grader.workers}", file=sys.stderr)
        results = grader.grade(records, on_result=_progress(len(records)))
    elapsed = time.monotonic() - start
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as fh:
        for result in results:
            fh.write(json.dumps(result.to_dict()) + "\n")
    counts = Counter(r.status.value for r in results)
    summary = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    print(f"reward-sandbox: {len(results)} jobs in {elapsed:.1f}s ({len(results) / max(elapsed, 1e-9):.1f}/s): {summary}", file=sys.stderr)
    return 0


def cmd_check(_args: argparse.Namespace) -> int:
    toolchain = find_toolchain()
    problem = bwrap_problem()
    print(f"toolchain: {toolchain.sysroot} ({toolchain.version.splitlines()[0]})")
    print(f"linker:    {toolchain.linker}")
    print(f"isolation: {'bwrap' if problem is None else 'rlimits (fallback): ' + problem}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .server import serve

    return serve(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reward-sandbox", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="grade jobs from a JSONL file")
    run.add_argument("--input", "-i", type=Path, required=True, help="JSONL of jobs")
    run.add_argument("--output", "-o", type=Path, required=True, help="JSONL of results (input order)")
    run.add_argument("--workers", "-j", type=int, default=None, help="parallel jobs (default: all cores)")
    run.add_argument("--isolation", choices=["auto", "strict", "rlimits"], default="auto",
                     help="strict fails unless bubblewrap works; auto falls back to rlimits and says so")  # fmt: skip
    run.add_argument("--backend", choices=BACKENDS, default=FAST)
    run.add_argument("--limits", help='JSON object overriding limits, e.g. \'{"run_wall_s": 5}\'')
    run.add_argument("--no-cache", action="store_true", help="do not read or write the on-disk result cache")
    run.add_argument("--cache-dir", type=Path, default=None)
    run.set_defaults(func=cmd_run)
    check = sub.add_parser("check", help="show the toolchain and the isolation level available here")
    check.set_defaults(func=cmd_check)
    serve = sub.add_parser("serve", help="serve rewards over HTTP")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8808)
    serve.add_argument("--token", default=None, help="bearer token (or env REWARD_SANDBOX_TOKEN); required off loopback")
    serve.add_argument("--workers", "-j", type=int, default=None)
    serve.add_argument("--isolation", choices=["auto", "strict", "rlimits"], default="auto")
    serve.add_argument("--max-batch", type=int, default=512, help="most jobs in one request")
    serve.add_argument("--max-queue", type=int, default=4096, help="most jobs waiting before requests get 503")
    serve.add_argument("--max-request-mb", type=float, default=32.0)
    serve.set_defaults(func=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    try:
        return int(args.func(args))
    except (IsolationUnavailable, ToolchainError, ValueError, OSError) as exc:
        print(f"reward-sandbox: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
