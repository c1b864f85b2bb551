"""``reward-sandbox``: grade a JSONL file of jobs, check the sandbox, or serve rewards over HTTP."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from . import __version__
from .cliargs import OneLineParser
from .compile.toolchain import ToolchainError, find_toolchain
from .grader import Grader
from .isolation.cgroups import cgroup_problem
from .isolation.levels import IsolationUnavailable, choose_level
from .isolation.runner import runner_path
from .isolation.slots import SlotsExhausted
from .jobs import InvalidJob
from .outfiles import check_output_file, write_lines
from .results import Result
from .service.client import RemoteGraderError
from .settings import add_arguments, open_grader, settings_from_args


def read_jsonl(path: Path) -> list[Any]:
    """Records of a JSONL file; a line that is not UTF-8 JSON becomes an :class:`InvalidJob` that
    grading reports as ``invalid_input`` in its place, so the other lines still run."""
    records: list[Any] = []
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                records.append(InvalidJob(f"line {number}: not UTF-8 (byte {exc.start})", job_id=f"line-{number}"))
                continue
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
            print(
                f"\r  graded {done}/{total} ({rate:.1f}/s)",
                end="" if done < total else "\n",
                file=sys.stderr,
                flush=True,
            )

    return report


def cmd_run(args: argparse.Namespace) -> int:
    check_output_file(args.output, overwrite=args.overwrite)
    records = read_jsonl(args.input)
    settings = settings_from_args(args)
    start = time.monotonic()
    grader = open_grader(settings)
    try:
        if isinstance(grader, Grader):
            print(
                f"reward-sandbox: isolation={grader.level} backend={grader.backend} workers={grader.workers}",
                file=sys.stderr,
            )
            results = grader.grade(records, on_result=_progress(len(records)))
        else:
            print(f"reward-sandbox: grading on {', '.join(settings.server_urls)}", file=sys.stderr)
            results = grader.grade(records)
            for server in getattr(grader, "health", list)():
                state = (
                    "refused the token"
                    if server.get("unauthorized")
                    else "up"
                    if server["healthy"]
                    else f"down ({server['last_error']})"
                )
                print(
                    f"  {server['url']}: {state}, {server['jobs_ok']} jobs graded, {server['failures']} failures",
                    file=sys.stderr,
                )
    finally:
        grader.close()
    elapsed = time.monotonic() - start
    write_lines(args.output, (json.dumps(result.to_dict()) for result in results))
    counts = Counter(r.status.value for r in results)
    summary = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    print(
        f"reward-sandbox: {len(results)} jobs in {elapsed:.1f}s ({len(results) / max(elapsed, 1e-9):.1f}/s): {summary}",
        file=sys.stderr,
    )
    if not results or counts.get("invalid_input", 0) == len(results):
        print(
            f"reward-sandbox: no job could be read from {args.input} (the reasons are in {args.output}); "
            "each line must be a JSON object with at least 'source'",
            file=sys.stderr,
        )
        return 2
    return 0


def cmd_check(_args: argparse.Namespace) -> int:
    toolchain = find_toolchain()
    print(f"toolchain: {toolchain.sysroot} ({toolchain.version.splitlines()[0]})")
    print(f"linker:    {toolchain.linker}")
    print(f"runner:    {runner_path()}")
    level, warning = choose_level("auto")
    print(f"isolation: {level.name}" + (f" ({warning})" if warning else ""))
    memory = cgroup_problem()
    print(f"memory:    {'per job (cgroup v1 memory)' if memory is None else 'per process only: ' + memory}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .service.server import serve

    return serve(args)


def cmd_crates(args: argparse.Namespace) -> int:
    from .compile.crates import CratesUnavailable, ensure

    toolchain = find_toolchain()
    try:
        built = ensure(toolchain.version, toolchain.cargo)
    except CratesUnavailable as exc:
        raise ValueError(str(exc)) from exc
    print(f"crates: {built.root} (key {built.key})")
    for name, version in built.versions.items():
        print(f"  {name} {version}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="reward-sandbox", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="more log lines, and a traceback on errors")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="grade jobs from a JSONL file")
    run.add_argument("--input", "-i", type=Path, required=True, help="JSONL of jobs")
    run.add_argument("--output", "-o", type=Path, required=True, help="JSONL of results (input order)")
    run.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    add_arguments(run)
    run.set_defaults(func=cmd_run)
    check = sub.add_parser(
        "check",
        help="show the toolchain and the isolation level available here",
        description="Show the Rust toolchain, the sandbox runner, the isolation level and the memory limit "
        "that grading here would use; exit 2 with the reason when grading cannot work.",
    )
    check.set_defaults(func=cmd_check)
    crates = sub.add_parser(
        "crates",
        help="build (once) and show the crate set programs may use",
        description="Build the curated crate set from the Debian crate sources into rlibs for this toolchain, "
        "unless a build for it exists, and print the crates, their versions and where they are; "
        "exit 2 with the reason when it cannot be built. Images run it once so workers start warm.",
    )
    crates.set_defaults(func=cmd_crates)
    from . import cliargs  # here, not at the top: the serve block stays self-contained

    serve = sub.add_parser("serve", help="serve rewards over HTTP")
    # every number is range-checked by argparse (cliargs): a bad one is one line and exit 2, before binding
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (not loopback: a token is required)")
    serve.add_argument(
        "--port", type=cliargs.int_in(0, 65535), default=8808, help="TCP port (0: any free one, printed)"
    )
    serve.add_argument("--token", default=None, help=argparse.SUPPRESS)  # refused with a clear error: `ps` shows argv
    serve.add_argument(
        "--token-file",
        default=None,
        help="file holding the bearer token (or env REWARD_SANDBOX_TOKEN / REWARD_SANDBOX_TOKEN_FILE); "
        "required off loopback",
    )
    add_arguments(serve, local_only=True)
    serve.add_argument("--max-batch", type=cliargs.int_in(1, 100_000), default=512, help="most jobs in one request")
    serve.add_argument(
        "--max-queue",
        type=cliargs.int_in(1, 10_000_000),
        default=4096,
        help="most jobs waiting before requests get 503 (at least --max-batch)",
    )
    serve.add_argument(
        "--max-request-mb",
        type=cliargs.float_in(0, 4096, low_open=True),
        default=32.0,
        help="largest request body (then 413)",
    )
    serve.add_argument(
        "--read-timeout-s",
        type=cliargs.float_in(0, 3600, low_open=True),
        default=30.0,
        help="a request must arrive in full within this (else dropped)",
    )
    serve.add_argument(
        "--max-connections",
        type=cliargs.int_in(1, 1_000_000),
        default=256,
        help="open connections (idle ones evicted first, then 503)",
    )
    serve.add_argument(
        "--max-connections-per-ip",
        type=cliargs.int_in(0, 1_000_000),
        default=64,
        help="open connections from one address (0: no limit)",
    )
    serve.add_argument(
        "--max-inflight-mb",
        type=cliargs.float_in(0, 65536, low_open=True),
        default=128.0,
        help="request bodies held at once, all clients (then 503)",
    )
    serve.set_defaults(func=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("reward-sandbox: interrupted; nothing was written", file=sys.stderr)
        return 130
    except (IsolationUnavailable, ToolchainError, SlotsExhausted, RemoteGraderError, ValueError, OSError) as exc:
        if args.verbose:
            traceback.print_exc()
        print(f"reward-sandbox: error: {first_line(exc)}", file=sys.stderr)
        return 2


def first_line(exc: BaseException) -> str:
    """An error's message on one line (a Unicode error names the file it came from where it can)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start}: {exc.reason})"
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


if __name__ == "__main__":
    sys.exit(main())
