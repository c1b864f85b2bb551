"""Grade a batch of jobs that share their tests in one compiler run and one link, with the verdicts
grading each alone would give: a batch shares a build, never a process.

A round builds the batch crate (``crate.py``) with the single test build's flags and forced
lints; then each program's tests run as they would alone, in processes of their own: its hidden
run, then its own run, filtered to its tests, with a single run's limits, sentinel and nonce, in
a work directory emptied of whatever the program before it left (``Step.fresh``; under bubblewrap
it is the one place a run can write). Nothing a process holds (threads, their names, peak memory,
signal dispositions, globals, the panic hook) reaches the next program, and no gate is needed.
- When the build fails, each error is traced, through its spans (macro expansions included), to
  the program directories it points into; those programs are graded alone and the rest rebuilt.
  An error that points into no program's directory sends every program alone. A program whose
  every error says its hidden tests need some of its traits back (``compile/trait_scope.py``) is
  graded alone at once with them back (or refused), in this batch's slot: it skips the build alone
  that would only say so again.
- Warnings are counted per program from their primary span's file, as a single grading counts
  them; a warning that belongs to no program and is not ours sends every program alone.
- Each program's runs are read by the single grader's own ``classify``, under the single plan's
  step names, with the program's module dropped from its test names (``compile/testlog.py``): the verdict
  is computed by the same code, from the same kind of runs, as a single one.
A program whose runs did not all end (the sandbox was stopped) or that a memory kill may have hit
is graded alone by the caller; a batch's own build never yields a ``sandbox_error`` (a program
graded alone with its traits back may, as any grading alone).
"""

from __future__ import annotations

import secrets
import signal
import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..backends import (
    FAST,
    FORCED_LINTS,
    SEALED_DIR,
    cargo_manifest,
    compile_flags,
    compile_step,
    dynamic_std,
    fast_plan,
    libtest_args,
    run_step,
)
from ..compile.diagnostics import counted_messages, primary_span
from ..compile.sentinel import extern_flags, sentinel_rlib
from ..compile.toolchain import Toolchain
from ..compile.trait_scope import TraitNeeds, trait_needs
from ..isolation.layout import JobDir, Layout
from ..isolation.levels import Isolation
from ..isolation.limits import Limits
from ..isolation.process import DriverOutcome, Step, StepOutcome, driver_script
from ..jobs import Job
from ..results import Result, invalid_result
from ..single import (
    Slot,
    classify,
    grade_job,
    prepare_dirs,
    release,
    run_script,
    scope_widened,
    scratch_root,
    write_crate,
)
from .crate import BatchCrate, Member, build_batch

MAX_ROUNDS = 3  # builds before whatever is left is graded alone


@dataclass
class BatchOutcome:
    """Verdicts by index into the batch's jobs, and the indices to grade alone."""

    results: dict[int, Result] = field(default_factory=dict)
    alone: list[int] = field(default_factory=list)
    rounds: int = 0
    broken: list[int] = field(default_factory=list)  # of ``alone``: a build's errors pointed into them


@dataclass
class _Round:
    results: dict[int, Result] = field(default_factory=dict)  # trusted verdicts (member index in the round)
    culprits: set[int] | None = None  # build failed: these broke it (None: unknown, all alone)
    built: bool = False
    scoped: dict[int, TraitNeeds] = field(default_factory=dict)  # of ``culprits``: only their traits' scope


def grade_batch(
    jobs: list[Job], *, toolchain: Toolchain, isolation: Isolation, limits: Limits, slot: Slot
) -> BatchOutcome:
    """Grade ``jobs`` (same edition and limits, tests alike or not; see ``sharing.alone_reason``) together."""
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
            for k in sorted(got.culprits):
                if k in got.scoped:
                    job = jobs[pending[k]]
                    outcome.results[pending[k]] = _with_traits(job, got.scoped[k], toolchain, isolation, limits, slot)
                else:
                    outcome.alone.append(pending[k])
                    outcome.broken.append(pending[k])
            pending = [p for k, p in enumerate(pending) if k not in got.culprits]
            continue
        outcome.results.update({pending[k]: r for k, r in got.results.items()})
        outcome.alone += [p for k, p in enumerate(pending) if k not in got.results]
        pending = []
    outcome.alone += pending
    return outcome


def _with_traits(
    job: Job, needs: TraitNeeds, toolchain: Toolchain, isolation: Isolation, limits: Limits, slot: Slot
) -> Result:
    """A program whose hidden tests need some of its traits back, graded alone with them back, as
    ``grader.grade_job`` would after its own first build; or refused, as it would be."""
    keep, refusal = scope_widened(job, needs, frozenset())
    if refusal is not None:
        return invalid_result(job.id, f"job {job.id!r}: {refusal}")
    return grade_job(job, toolchain=toolchain, isolation=isolation, limits=limits, backend=FAST, slot=slot, keep=keep)


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


def _scoped(output: bytes, layout: Layout, crate: BatchCrate, culprits: set[int]) -> dict[int, TraitNeeds]:
    """The culprits whose every error is their hidden tests' want of some of their traits, and what
    those errors say (``trait_scope.trait_needs``)."""
    tags = {m.tag: i for i, m in enumerate(crate.members)}
    errors: dict[int, list[dict[str, Any]]] = {}
    for _, diag in counted_messages(output):
        if diag["level"] == "error":
            for owner in culprits & {_owner(f, layout, tags) for f in _files_of(diag)}:
                errors.setdefault(owner, []).append(diag)
    out = {}
    for i, diags in errors.items():
        member = crate.members[i]
        if member.asm.shadowed:
            needs = trait_needs(diags, member.asm.hidden_file, member.asm.shadowed, member.job.crate_name)
            if needs.names and not needs.unexplained:
                out[i] = needs
    return out


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


def _runs(member: Member, index: int) -> dict[str, str]:
    """The single plan's run step names -> this member's steps in the batch's driver."""
    runs = {"run_hidden": f"h{index}"} if member.asm.hidden_root is not None else {}
    if member.asm.has_own_tests:
        runs["run_own"] = f"o{index}"
    return runs


def _as_alone(text: str, member: Member) -> str:
    """Text for a person, with the member's module and directory gone, as a run alone prints it."""
    return text.replace(member.asm.prefix, "").replace(f"/{member.tag}/", "/")


def _verdict(
    member: Member, index: int, layout: Layout, limits: Limits, lint_lines: list[str], outcome: DriverOutcome
) -> Result:
    """The single grader's verdict, read from the member's steps of the batch as from its own."""
    plan = fast_plan(member.job, member.asm, layout, limits)
    steps = {step.name: StepOutcome() for step in plan.steps}
    steps["testc"] = StepOutcome(started=True, exit_code=0, status=0, output="\n".join(lint_lines).encode())
    runs = _runs(member, index)
    steps.update({name: outcome.steps[step] for name, step in runs.items()})
    timed_out = {name for name, step in runs.items() if step in outcome.timed_out}
    alone = DriverOutcome(steps=steps, timed_out=timed_out, done=True)
    result = classify(member.job, member.asm, plan, alone)
    tests = replace(
        result.tests,
        output=_as_alone(result.tests.output, member),
        own_output=_as_alone(result.tests.own_output, member),
    )
    return replace(result, tests=tests, output_tail=_as_alone(result.output_tail, member))


def _round(jobs: list[Job], toolchain: Toolchain, isolation: Isolation, limits: Limits, slot: Slot) -> _Round:
    start = time.monotonic()
    limits = limits.with_run_timeout(jobs[0].timeout_s)
    job_dir = JobDir(scratch_root() / secrets.token_hex(16))
    oom = False
    outcome: DriverOutcome | None = None
    try:
        prepare_dirs(job_dir, slot.uid)
        layout = isolation.layout(job_dir, toolchain, slot.memory)
        crate = build_batch(jobs, layout.work, sentinel_crate=sentinel_rlib() is not None)
        files = {**crate.files, "Cargo.toml": cargo_manifest(jobs[0])}
        write_crate(job_dir, files, bool(crate.sentinel_aliases), isolation, slot.uid)
        src, work, job = layout.src, layout.work, jobs[0]
        sealed = f"{work}/{SEALED_DIR}/test_bin"
        clippy = f"{layout.toolchain}/bin/clippy-driver"
        dynamic = dynamic_std(layout)  # as every fast test build (backends.dynamic_std)
        build = [clippy, "--test", *compile_flags(job, layout), *dynamic, *extern_flags(crate.sentinel_aliases, src)]
        build += [*FORCED_LINTS, f"{src}/{crate.root}"]
        build += ["-o", f"{work}/test_bin"]
        steps: list[Step] = [compile_step("testc", build, limits)]
        for i, member in enumerate(crate.members):
            filters = {"run_hidden": member.hidden_filter(), "run_own": member.own_filter()}
            for name, step in _runs(member, i).items():
                # every run starts from an emptied work dir (process.driver_script), as alone
                steps.append(
                    run_step(step, [sealed, *filters[name], *libtest_args(job)], limits, when="ok:testc", cwd=src)
                )
        nonce_paths = [m.asm.nonce_path for m in crate.members]
        script = driver_script(steps, layout, slot.uid, [], nonce_paths, [(f"{work}/test_bin", sealed)])
        nonces = "\n".join(m.asm.nonce for m in crate.members)
        outcome = run_script(job_dir, script, steps, nonces, toolchain, isolation, limits, slot)
        oom = slot.memory.oom_killed() if slot.memory is not None else False
    finally:
        release(slot, isolation, job_dir, outcome)
    return _judge(jobs, crate, layout, limits, outcome, time.monotonic() - start, isolation.name, oom)


def _judge(
    jobs: list[Job],
    crate: BatchCrate,
    layout: Layout,
    limits: Limits,
    outcome: DriverOutcome,
    wall_s: float,
    level: str,
    oom: bool,
) -> _Round:
    testc = outcome.steps["testc"]
    if outcome.faults:  # the sandbox could not set a step up: every program is graded alone, where it shows
        return _Round()
    if not testc.started or testc.exit_code is None or "testc" in outcome.timed_out or testc.signal:
        return _Round()
    index = {id(job): k for k, job in enumerate(jobs)}  # member (tag order) -> job (input order)
    if testc.exit_code != 0:
        culprits = _culprits(testc.output, layout, crate)
        if culprits is None:
            return _Round()
        scoped = _scoped(testc.output, layout, crate, culprits)
        return _Round(
            culprits={index[id(crate.members[i].job)] for i in culprits},
            scoped={index[id(crate.members[i].job)]: needs for i, needs in scoped.items()},
        )
    got = _Round(built=True)
    lints = _warnings(testc.output, layout, crate)
    if lints is None:
        return got
    for i, member in enumerate(crate.members):
        mine = [outcome.steps[step] for step in _runs(member, i).values()]
        if any(s.exit_code is None for s in mine):  # the sandbox stopped before its runs ended
            continue
        if oom and any(s.signal == signal.SIGKILL for s in mine):  # alone tells a memory kill apart
            continue
        result = _verdict(member, i, layout, limits, lints[i], outcome)
        measures = {"testc": testc.measures(), **{s: outcome.steps[s].measures() for s in _runs(member, i).values()}}
        batch = {"size": len(crate.members), "wall_s": round(wall_s, 3), "steps": measures}
        got.results[index[id(member.job)]] = replace(
            result,
            duration_s=wall_s / len(crate.members),
            isolation=level,
            backend="fast",
            measures={"batch": batch},
        )
    return got
