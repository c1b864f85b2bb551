"""Grade a batch of jobs that share their tests in one compiler run, one link and one test run each
for the hidden and the own tests, with the verdicts grading each alone would give.

A round builds the batch crate (``batchcrate.py``) with the single test build's flags and forced
lints, lists the binary's tests, then runs the hidden tests of all programs, then their own tests.
- When the build fails, each error is traced, through its spans (macro expansions included), to
  the program directories it points into; those programs are graded alone and the rest rebuilt.
  An error that points into no program's directory sends every program alone.
- Warnings are counted per program from their primary span's file, as a single grading counts
  them; a warning that belongs to no program and is not ours sends every program alone.
- Each program's stretch of each run is checked (``batchlog.py``); a trusted one is rewritten into
  the output of a run of that program alone, and the single grader's own ``classify`` reads it,
  with the single plan's step names: the verdict is computed by the same code as a single one.
Whatever is not trusted is graded alone by the caller; a batch never yields a ``sandbox_error``.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any

from .backends import (
    FORCED_LINTS,
    SEALED_DIR,
    cargo_manifest,
    compile_flags,
    compile_step,
    fast_plan,
    libtest_args,
    run_step,
)
from .batchcrate import BatchCrate, build_batch
from .batchlog import Stretch, listed_tests, split_run
from .diagnostics import counted_messages, primary_span
from .grader import Slot, _prepare_dirs, _scratch_root, _scrub, _step_killer, classify, release
from .isolation import Isolation
from .jobs import Job
from .layout import JobDir, Layout
from .limits import Limits
from .process import DriverOutcome, StepOutcome, driver_script, run_driver
from .results import Result
from .toolchain import Toolchain

MAX_ROUNDS = 3  # builds before whatever is left is graded alone


@dataclass
class BatchOutcome:
    """Verdicts by index into the batch's jobs, and the indices to grade alone."""

    results: dict[int, Result] = field(default_factory=dict)
    alone: list[int] = field(default_factory=list)
    rounds: int = 0


@dataclass
class _Round:
    results: dict[int, Result] = field(default_factory=dict)  # trusted verdicts (member index in the round)
    culprits: set[int] | None = None  # build failed: these broke it (None: unknown, all alone)
    built: bool = False


def grade_batch(
    jobs: list[Job], *, toolchain: Toolchain, isolation: Isolation, limits: Limits, slot: Slot
) -> BatchOutcome:
    """Grade ``jobs`` (same tests, edition and limits; see ``batching.alone_reason``) together."""
    outcome = BatchOutcome()
    pending = list(range(len(jobs)))
    while len(pending) >= 2 and outcome.rounds < MAX_ROUNDS:
        outcome.rounds += 1
        try:
            got = _round([jobs[i] for i in pending], toolchain, isolation, limits, slot)
        except Exception:  # noqa: BLE001 - a fault of ours: everything is graded alone, which reports it
            break
        if not got.built:
            if not got.culprits:
                break
            outcome.alone += [pending[k] for k in sorted(got.culprits)]
            pending = [p for k, p in enumerate(pending) if k not in got.culprits]
            continue
        outcome.results.update({pending[k]: r for k, r in got.results.items()})
        outcome.alone += [p for k, p in enumerate(pending) if k not in got.results]
        pending = []
    outcome.alone += pending
    return outcome


def _files_of(diag: dict[str, Any]) -> list[str]:
    """Every file a diagnostic points into: its spans, their macro expansions, its children's."""
    files: list[str] = []
    for span in diag.get("spans") or []:
        while isinstance(span, dict):
            files.append(str(span.get("file_name", "")))
            span = (span.get("expansion") or {}).get("span")
    for child in diag.get("children") or []:
        files += _files_of(child)
    return files


def _primary_file(diag: dict[str, Any]) -> str | None:
    primary = primary_span(diag)
    return str(primary.get("file_name", "")) if primary else None


def _owner(path: str, layout: Layout, tags: dict[str, int]) -> int | None:
    rel = path[len(layout.src) + 1 :] if path.startswith(layout.src + "/") else path
    return tags.get(rel.split("/", 1)[0]) if "/" in rel else None


def _culprits(output: bytes, layout: Layout, crate: BatchCrate) -> set[int] | None:
    """The members whose files the build's errors point into; None when an error points elsewhere."""
    tags = {m.tag: i for i, m in enumerate(crate.members)}
    culprits: set[int] = set()
    for _, diag in counted_messages(output):
        if diag["level"] != "error":
            continue
        owners = {_owner(f, layout, tags) for f in _files_of(diag)} - {None}
        if not owners:
            return None
        culprits |= {o for o in owners if o is not None}
    return culprits or None


def _warnings(output: bytes, layout: Layout, crate: BatchCrate) -> dict[int, list[str]] | None:
    """Each member's warning lines (paths as alone); None when one belongs to nobody and is not ours."""
    tags = {m.tag: i for i, m in enumerate(crate.members)}
    ours = {f"{layout.src}/{name}" for name in crate.files if "/" not in name}
    per: dict[int, list[str]] = {i: [] for i in range(len(crate.members))}
    for raw, diag in counted_messages(output):
        primary = _primary_file(diag)
        owner = _owner(primary, layout, tags) if primary else None
        if owner is None:
            if primary in ours:
                continue
            return None
        per[owner].append(raw.replace(f"/{crate.members[owner].tag}/", "/"))
    return per


def _verdict(
    job_index: int,
    crate: BatchCrate,
    layout: Layout,
    limits: Limits,
    lint_lines: list[str],
    hidden: Stretch,
    own: Stretch | None,
) -> Result:
    """The single grader's verdict, read from the member's part of the batch as from its own steps."""
    member = crate.members[job_index]
    asm = replace(member.asm, marker="")
    plan = fast_plan(member.job, asm, layout, limits)
    steps = {step.name: StepOutcome() for step in plan.steps}
    steps["testc"] = StepOutcome(started=True, exit_code=0, status=0, output="\n".join(lint_lines).encode())
    steps["run_hidden"] = StepOutcome(
        started=True, exit_code=hidden.exit_code, status=hidden.exit_code, output=hidden.output
    )
    if own is not None and plan.run_own:
        steps[plan.run_own] = StepOutcome(
            started=True, exit_code=own.exit_code, status=own.exit_code, output=own.output
        )
    return classify(member.job, asm, plan, DriverOutcome(steps=steps, done=True))


def _round(jobs: list[Job], toolchain: Toolchain, isolation: Isolation, limits: Limits, slot: Slot) -> _Round:
    start = time.monotonic()
    limits = limits.with_run_timeout(jobs[0].timeout_s)
    job_dir = JobDir(_scratch_root() / secrets.token_hex(16))
    try:
        _prepare_dirs(job_dir, slot.uid)
        layout = isolation.layout(job_dir, toolchain, slot.memory)
        crate = build_batch(jobs, layout.work)
        for rel, text in {**crate.files, "Cargo.toml": cargo_manifest(jobs[0])}.items():
            path = job_dir.src / rel
            path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(0o644)
        isolation.protect_sources(job_dir, slot.uid)
        src, work, job = layout.src, layout.work, jobs[0]
        sealed = f"{work}/{SEALED_DIR}/test_bin"
        clippy = f"{layout.toolchain}/bin/clippy-driver"
        # std linked dynamically (found through the binary's rpath in the read-only toolchain): a
        # 2.7 MB binary instead of 7 MB, measured ~10% faster to build; nothing about the run changes
        host = next(
            (ln.split(":", 1)[1].strip() for ln in toolchain.version.splitlines() if ln.startswith("host:")), ""
        )
        libdir = f"{layout.toolchain}/lib/rustlib/{host}/lib"
        dynamic = ["-C", "prefer-dynamic", "-C", f"link-arg=-Wl,-rpath,{libdir}"] if host else []
        build = [clippy, "--test", *compile_flags(job), *dynamic, *FORCED_LINTS, f"{src}/{crate.root}"]
        build += ["-o", f"{work}/test_bin"]
        # Half a single run's time: a program the kill cuts short is graded alone anyway, and one
        # that finished within it finished within its own limit; a loop wastes less.
        runs = replace(limits, run_cpu_s=max(1, limits.run_cpu_s // 2), run_wall_s=max(2.0, limits.run_wall_s / 2))
        steps = [
            compile_step("testc", build, limits),
            run_step("list", [sealed, "--list"], runs, when="ok:testc", cwd=src),
            run_step("run_hidden", [sealed, crate.filter, *libtest_args(job)], runs, when="ok:testc", cwd=src),
        ]
        has_own = any(m.asm.has_own_tests for m in crate.members)
        if has_own:
            own_argv = [sealed, "--skip", crate.filter, *libtest_args(job)]
            steps.append(run_step("run_own", own_argv, runs, when="ok:testc", cwd=src))
        nonce_paths = [m.asm.nonce_path for m in crate.members]
        script = driver_script(steps, layout, slot.uid, [], nonce_paths, [(f"{work}/test_bin", sealed)])
        job_dir.driver.write_text(script)
        job_dir.driver.chmod(0o600)
        if slot.memory is not None:
            slot.memory.prepare(limits.run_memory_mb)
        argv, env = isolation.command(job_dir, toolchain, slot.memory, limits.disk_mb)
        nonces = "\n".join(m.asm.nonce for m in crate.members)
        outcome = run_driver(
            argv, steps, env, nonces, scrub=lambda: _scrub(job_dir.src), kill_step=_step_killer(slot.uid)
        )
    finally:
        release(slot, isolation, job_dir)
    return _judge(jobs, crate, layout, limits, outcome, time.monotonic() - start, isolation.name)


def _judge(
    jobs: list[Job],
    crate: BatchCrate,
    layout: Layout,
    limits: Limits,
    outcome: DriverOutcome,
    wall_s: float,
    level: str,
) -> _Round:
    testc = outcome.steps["testc"]
    if outcome.faults:  # the sandbox could not set a step up: every program is graded alone, where it shows
        return _Round()
    if not testc.started or testc.exit_code is None or "testc" in outcome.timed_out or testc.signal:
        return _Round()
    index = {id(job): k for k, job in enumerate(jobs)}  # member (tag order) -> job (input order)
    if testc.exit_code != 0:
        culprits = _culprits(testc.output, layout, crate)
        return _Round(culprits=None if culprits is None else {index[id(crate.members[i].job)] for i in culprits})
    got = _Round(built=True)
    lints = _warnings(testc.output, layout, crate)
    listing = outcome.steps["list"]
    if lints is None or listing.status != 0:
        return got
    listed = listed_tests(listing.output)
    hidden_run = split_run(outcome.steps["run_hidden"].output, crate, listed, hidden=True)
    hidden = hidden_run.stretches
    own_step = outcome.steps.get("run_own")
    own: dict[str, Stretch] = {}
    if own_step is not None:
        own_run = split_run(own_step.output, crate, listed, hidden=False)
        # a file some program left in the hidden run would be there for every program's own tests
        if own_run.files and own_run.files == hidden_run.files:
            own = own_run.stretches
    measures = {name: s.measures() for name, s in outcome.steps.items() if s.started}
    for i, member in enumerate(crate.members):
        mine_hidden, mine_own = hidden[member.tag], own.get(member.tag)
        if not mine_hidden.trusted or (member.asm.has_own_tests and (mine_own is None or not mine_own.trusted)):
            continue
        result = _verdict(i, crate, layout, limits, lints[i], mine_hidden, mine_own)
        batch = {"size": len(crate.members), "wall_s": round(wall_s, 3), "steps": measures}
        got.results[index[id(member.job)]] = replace(
            result,
            duration_s=wall_s / len(crate.members),
            isolation=level,
            backend="fast",
            measures={"batch": batch},
        )
    return got
