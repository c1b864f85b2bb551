"""Grade one job: lay out the crate, run the backend's plan in the sandbox, classify the outcome."""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .backends import CARGO, Plan, cargo_files, cargo_manifest, cargo_plan, fast_plan
from .compile.assemble import Assembly, assemble
from .compile.diagnostics import counted_messages, dedupe, parse_diagnostics
from .compile.sentinel import sentinel_rlib, write_rlib
from .compile.testlog import parse_test_log
from .compile.toolchain import Toolchain
from .compile.trait_scope import TraitNeeds, foreign_impl, trait_needs
from .isolation.cgroups import SlotMemory
from .isolation.layout import JobDir
from .isolation.levels import Isolation
from .isolation.limits import Limits
from .isolation.process import DriverOutcome, Step, StepOutcome, driver_script, run_driver
from .isolation.runner import runner_path
from .jobs import Job
from .results import BuildReport, ClippyReport, Diagnostic, Result, SuiteReport, TestReport, invalid_result
from .status import Status

TAIL_BYTES = 2000
SCOPE_BUILDS = 3  # builds of one job, each with more of the program's traits the hidden tests need back


@dataclass(frozen=True)
class Slot:
    """What one worker owns: its unprivileged uid (None when not root) and its memory cgroup (None without)."""

    uid: int | None
    memory: SlotMemory | None


@functools.lru_cache(maxsize=1)
def scratch_root() -> Path:
    """A private (0711, unlisted) directory on RAM-backed /dev/shm when usable: job dirs are tiny,
    short-lived, and named at random so no other sandbox uid can guess them."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    root = Path(tempfile.mkdtemp(prefix="reward-sandbox-", dir=base))
    os.chmod(root, 0o711)
    return root


def prepare_dirs(job_dir: JobDir, uid: int | None) -> None:
    job_dir.root.mkdir(mode=0o711)
    job_dir.src.mkdir(mode=0o755)
    job_dir.work.mkdir(mode=0o700)
    if uid is not None:
        os.chown(job_dir.work, uid, uid)


def release(slot: Slot, isolation: Isolation, job_dir: JobDir, outcome: DriverOutcome | None = None) -> None:
    """After a job (or a batch): no process of the slot's uid left, the isolation's leftovers and the
    memory cgroup's processes gone, the job directory removed. The sweep of the uid (a process of
    its own, ~2-4 ms) is skipped only where the sandbox's own exit already ended every process
    (``Isolation.exit_ends_all``) and it did end by itself (``outcome``: done, exit 0)."""
    if slot.uid is not None:
        ended = outcome is not None and outcome.done and outcome.driver_exit == 0 and isolation.exit_ends_all()
        if not ended:
            kill_uid(slot.uid)
        isolation.after_job(slot.uid)
    if slot.memory is not None:
        slot.memory.kill_all()
    shutil.rmtree(job_dir.root, ignore_errors=True)


def grade_job(
    job: Job,
    *,
    toolchain: Toolchain,
    isolation: Isolation,
    limits: Limits,
    backend: str,
    slot: Slot,
    check_first: bool = False,
    keep: frozenset[str] = frozenset(),
) -> Result:
    """Grade ``job``. Never raises for the program's behaviour; harness faults come back as
    ``sandbox_error`` with the reason. ``check_first``: a batch's build failed on this program
    (``backends.fast_plan``). ``keep``: program trait names the hidden tests are known to need.

    The hidden tests are first built with every other trait name of the program shadowed; when
    that build fails only for want of some of them (``trait_scope.trait_needs``), the job is graded
    again with those back, or refused if one is implemented for a type the program does not own
    (``scope_widened``). The verdict is the last grading's, in the time of them all."""
    start = time.monotonic()
    for build in range(SCOPE_BUILDS):
        result, needs = _grade_once(job, toolchain, isolation, limits, backend, slot, check_first, keep)
        if needs is None or build == SCOPE_BUILDS - 1:
            break
        widened, refusal = scope_widened(job, needs, keep)
        if refusal is not None:
            result = invalid_result(job.id, f"job {job.id!r}: {refusal}")
            break
        if widened == keep:
            break
        keep, check_first = widened, False  # the program itself built
    return Result(
        **{**result.__dict__, "duration_s": time.monotonic() - start, "isolation": isolation.name, "backend": backend}
    )


def scope_widened(job: Job, needs: TraitNeeds, keep: frozenset[str]) -> tuple[frozenset[str], str | None]:
    """``keep`` with the trait names ``needs`` brings back, and why the job is refused instead (a
    needed trait, not one the tests write as a trait, implemented for a type the program does not
    own: ``trait_scope.foreign_impl``), or None."""
    refusal = foreign_impl(job.source, needs.needed - keep)
    return keep | needs.names, refusal


def _grade_once(
    job: Job,
    toolchain: Toolchain,
    isolation: Isolation,
    limits: Limits,
    backend: str,
    slot: Slot,
    check_first: bool,
    keep: frozenset[str],
) -> tuple[Result, TraitNeeds | None]:
    """One grading of ``job`` in a fresh job directory, and what its hidden tests' failed build says
    about the program traits shadowed from them (None when they built, or nothing was shadowed)."""
    limits = limits.with_run_timeout(job.timeout_s)
    job_dir = JobDir(scratch_root() / secrets.token_hex(16))
    outcome: DriverOutcome | None = None
    needs: TraitNeeds | None = None
    try:
        prepare_dirs(job_dir, slot.uid)
        layout = isolation.layout(job_dir, toolchain, slot.memory)
        asm = assemble(job, layout.work, sentinel_crate=backend != CARGO and sentinel_rlib() is not None, keep=keep)
        plan = (
            cargo_plan(job, asm, layout, limits)
            if backend == CARGO
            else fast_plan(job, asm, layout, limits, check_first=check_first)
        )
        files = cargo_files(job, asm) if backend == CARGO else {**asm.files, "Cargo.toml": cargo_manifest(job)}
        write_crate(job_dir, files, bool(asm.sentinel_crate), isolation, slot.uid)
        script = driver_script(plan.steps, layout, slot.uid, plan.uid_secrets, asm.nonce_path, plan.seals)
        outcome = run_script(job_dir, script, plan.steps, asm.nonce, toolchain, isolation, limits, slot)
        oom = slot.memory.oom_killed() if slot.memory is not None else False
        result = classify(job, asm, plan, outcome, oom)
        if slot.memory is not None:
            result = Result(
                **{**result.__dict__, "measures": {**result.measures, "run_peak_mb": round(slot.memory.peak_mb(), 1)}}
            )
        needs = _scope_needs(job, asm, plan, outcome, result)
    except Exception as exc:  # noqa: BLE001 - a harness fault must not lose the batch
        result = Result(id=job.id, status=Status.SANDBOX_ERROR, reason=f"harness error: {type(exc).__name__}: {exc}")
    finally:
        release(slot, isolation, job_dir, outcome)
    return result, needs


def write_crate(job_dir: JobDir, files: dict[str, str], sentinel: bool, isolation: Isolation, uid: int | None) -> None:
    """A crate's files in the job's source directory, written the same way for a job alone and a
    batch: 0644 files in 0755 directories, the prebuilt sentinel rlib beside them where the crate
    links it, then made readable by the job's uid alone where the isolation needs that
    (``Isolation.protect_sources``)."""
    for rel, text in files.items():
        path = job_dir.src / rel
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o644)
    if sentinel:
        write_rlib(job_dir.src)
    isolation.protect_sources(job_dir, uid)


def run_script(
    job_dir: JobDir,
    script: str,
    steps: list[Step],
    nonce: str,
    toolchain: Toolchain,
    isolation: Isolation,
    limits: Limits,
    slot: Slot,
) -> DriverOutcome:
    """Run a driver ``script`` in the sandbox the same way for a job alone and a batch: the script
    private to the host (0600), the slot's memory cgroup set to the run limit, the sources scrubbed
    when the driver asks (``between_runs``) and an overdue step's processes killed by the slot's uid."""
    job_dir.driver.write_text(script)
    job_dir.driver.chmod(0o600)
    if slot.memory is not None:
        slot.memory.prepare(limits.run_memory_mb)
    argv, env = isolation.command(job_dir, toolchain, slot.memory, limits.disk_mb)
    return run_driver(
        argv, steps, env, nonce, scrub=between_runs(job_dir, isolation, slot.uid), kill_step=step_killer(slot.uid)
    )


def _scope_needs(job: Job, asm: Assembly, plan: Plan, outcome: DriverOutcome, result: Result) -> TraitNeeds | None:
    """What the errors of the hidden tests' builds say about the shadowed program traits, when the
    program built and every build of the hidden tests failed; None otherwise, or when they say nothing."""
    if not asm.shadowed or not result.build.ok or result.tests.hidden.ran:
        return None
    built = [outcome.steps[name] for name in plan.hidden_compile if _ran(outcome, name) is not None]
    if not built or any(step.exit_code == 0 for step in built):
        return None
    diags = [diag for step in built for _, diag in counted_messages(step.output)]
    needs = trait_needs(diags, asm.hidden_file, asm.shadowed, job.crate_name)
    return needs if needs.names else None


def between_runs(job_dir: JobDir, isolation: Isolation, uid: int | None) -> Callable[[], None]:
    """The host's part before every run step (``process.driver_script`` asks for it): the sources
    gone, and what the isolation level must clear so no run finds what an earlier one left."""

    def scrub() -> None:
        _scrub(job_dir.src)
        isolation.between_runs(job_dir, uid)

    return scrub


def _scrub(src: Path) -> None:
    """Delete every source file (the program, its tests, the hidden tests, the sentinel) before tests
    run; only the manifests stay, so a test's working directory still looks like a crate. It runs
    again before every later run, when the program has had its turn (where the fallback leaves the
    directory in its reach): links are removed, never followed, and no process of the slot is left
    to race it (``rg-run`` kills them after every step)."""
    for dirpath, dirnames, filenames in os.walk(src, topdown=False):
        for name in filenames:
            path = Path(dirpath) / name
            if name != "Cargo.toml" or path.is_symlink():
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        for name in dirnames:
            path = Path(dirpath) / name
            with contextlib.suppress(OSError):
                path.unlink() if path.is_symlink() else path.rmdir()


def kill_uid(uid: int) -> None:
    """Kill every process of a slot's uid (its uid is its own on this host: only this job's)."""
    subprocess.run([str(runner_path()), "kill-uid", str(uid)], check=False, capture_output=True)


def step_killer(uid: int | None) -> Callable[[], bool] | None:
    """Kill only the overdue step's processes (the slot uid's), so the driver goes on to the next step."""
    if uid is None:
        return None

    def kill() -> bool:
        kill_uid(uid)
        return True

    return kill


def _ran(outcome: DriverOutcome, name: str | None) -> StepOutcome | None:
    step = outcome.steps.get(name) if name else None
    return step if step is not None and step.started else None


def _first_ran(outcome: DriverOutcome, names: list[str]) -> str | None:
    return next((n for n in names if n in outcome.steps and outcome.steps[n].exit_code is not None), None)


def _resource_status(plan: Plan, outcome: DriverOutcome, oom: bool, names: list[str]) -> tuple[Status, str] | None:
    """Timeouts, memory and output breaches of the named steps, from the host's own observations."""
    limits = {s.name: s for s in plan.steps}
    for name in names:
        step = outcome.steps.get(name)
        if step is None or not step.started:
            continue
        spec = limits[name]
        if name == outcome.overflow_step:
            return Status.OUTPUT_LIMIT, f"step '{name}' wrote more output than allowed"
        if name in outcome.timed_out:
            return Status.TIMEOUT, f"step '{name}' exceeded its wall-clock limit ({spec.wall_s:g} s)"
        if step.signal == signal.SIGXCPU or (step.signal == signal.SIGKILL and step.cpu_s >= 0.9 * spec.cpu_s):
            return Status.TIMEOUT, f"step '{name}' exceeded its CPU-time limit ({spec.cpu_s} s)"
        if step.signal == signal.SIGKILL and oom and spec.kind == "run":
            return Status.MEMORY_LIMIT, f"step '{name}' went over the job's memory limit ({spec.memory_mb} MB)"
        if step.signal == signal.SIGXFSZ or (spec.kind == "compile" and step.exit_code and file_limit_hit(step)):
            return Status.OUTPUT_LIMIT, f"step '{name}' wrote a file larger than allowed"
        text = step.output[-8192:]
        if step.exit_code and (b"memory allocation of" in text or b"out of memory" in text.lower()):
            return Status.MEMORY_LIMIT, f"step '{name}' ran out of its memory limit ({spec.memory_mb} MB)"
    return None


_FILE_LIMIT = ("(os error 27)", "(SIGXFSZ)")  # EFBIG, and a tool (the linker) the limit's signal killed


def file_limit_hit(step: StepOutcome) -> bool:
    """A compiler that reports the file-size limit as an error of its own: a write that failed with
    EFBIG, or a tool it ran killed by SIGXFSZ. Read from rustc's messages, never their rendered
    snippets (those quote the program's text)."""
    return any(d.level == "error" and any(m in d.message for m in _FILE_LIMIT) for d in parse_diagnostics(step.output))


def _suite(
    asm: Assembly,
    outcome: DriverOutcome,
    run_name: str | None,
    compile_names: list[str],
    expected: int,
    what: str,
    sentinel: str,
) -> tuple[SuiteReport, str]:
    """The report of one suite: from its run, or, when it never ran, why (its build failed)."""
    if run_name is None:
        return SuiteReport(expected=expected), ""
    run = _ran(outcome, run_name)
    if run is not None:
        try:
            return parse_test_log(run.output, asm.nonce, run.status, sentinel, expected, asm.prefix)
        except Exception as exc:  # noqa: BLE001 - the program wrote this output: its fault, never a sandbox error
            return SuiteReport(
                ran=True, failed=max(expected, 1), expected=expected, note=f"unreadable test output ({exc})"
            ), ""
    ran_compiles = [outcome.steps[n] for n in compile_names if _ran(outcome, n) is not None]
    if not ran_compiles:
        return SuiteReport(expected=expected), ""
    errors = [d for d in parse_diagnostics(ran_compiles[-1].output) if d.level == "error"]
    note = f"{what} do not compile: " + (_first_message(errors) or "unknown error")
    rendered = "\n".join(d.rendered for d in errors)[-TAIL_BYTES:]
    return SuiteReport(ran=False, failed=max(expected, 1), expected=expected, note=note), rendered


def classify(job: Job, asm: Assembly, plan: Plan, outcome: DriverOutcome, oom: bool = False) -> Result:
    steps = outcome.steps
    if not any(s.started for s in steps.values()):
        return Result(
            id=job.id,
            status=Status.SANDBOX_ERROR,
            reason=f"sandbox did not start: {outcome.driver_error or 'no output'}",
        )
    if outcome.faults:  # a step's limits, uid, filter or exec could not be set up: never the program's doing
        step, why = next(iter(outcome.faults.items()))
        return Result(id=job.id, status=Status.SANDBOX_ERROR, reason=f"sandbox could not start step {step}: {why}")
    if not outcome.done and not outcome.timed_out and not outcome.overflow_step:
        if oom:
            return Result(id=job.id, status=Status.MEMORY_LIMIT, reason="the job went over its memory limit")
        return Result(
            id=job.id,
            status=Status.SANDBOX_ERROR,
            reason=f"the sandbox stopped before the job's end (driver exit {outcome.driver_exit}): {outcome.driver_error[-300:]}",
        )
    generated = asm.generated
    build_step = _first_ran(outcome, plan.build[:1]) or _first_ran(outcome, plan.build)
    build_ok = build_step is not None and steps[build_step].exit_code == 0
    if not build_ok and len(plan.build) > 1:  # fast path: the test build failed, the plain check decides
        check = _first_ran(outcome, plan.build[1:])
        if check is not None:
            build_step, build_ok = check, steps[check].exit_code == 0
    diags = parse_diagnostics(steps[build_step].output, generated) if build_step else []
    lint_step = build_step if build_step in plan.lint else _first_ran(outcome, plan.lint)
    lint_diags = parse_diagnostics(steps[lint_step].output, generated) if lint_step else []
    errors = [d for d in diags if d.level == "error"]
    warnings = dedupe([d for d in lint_diags if d.level == "warning"])
    build = BuildReport(ok=build_ok, errors=len(errors), diagnostics=tuple(errors))
    clippy = ClippyReport(
        ok=build_ok and lint_step is not None and not warnings, warnings=len(warnings), diagnostics=tuple(warnings)
    )
    if build_ok:
        hidden, hidden_text = _suite(
            asm,
            outcome,
            plan.run_hidden,
            plan.hidden_compile,
            asm.hidden_expected,
            "the hidden tests",
            asm.hidden_sentinel_test,
        )
        own_compiles = [plan.own_compile] if plan.own_compile else []
        own, own_text = _suite(
            asm, outcome, plan.run_own, own_compiles, 0, "the program's own tests", asm.sentinel_test
        )
        if own.ran and own.trusted and own.total == 0:
            own = SuiteReport()  # `#[test]` only in text the lexer could not see through, or all cfg'd off
        own_output = own_text if own.ran else _error_lines(outcome, own_compiles, generated)
        tests = TestReport(
            hidden=hidden,
            own=own,
            output="\n".join(t for t in (hidden_text, own_text) if t),
            own_output=own_output[-TAIL_BYTES:],
        )
    else:  # nothing ran: the program itself does not build
        hidden, own = SuiteReport(expected=asm.hidden_expected), SuiteReport()
        tests = TestReport(hidden=hidden, own=own)
    tail = tests.output[-TAIL_BYTES:]
    compile_steps = [s.name for s in plan.steps if s.kind == "compile"]
    run_steps = [s.name for s in plan.steps if s.kind == "run"]
    if not build_ok:
        status, reason = _resource_status(plan, outcome, oom, compile_steps) or (
            Status.COMPILE_ERROR,
            _first_message(errors) or "the program does not compile",
        )
        tail = (
            "\n".join(d.rendered for d in errors)[-TAIL_BYTES:]
            or outcome.steps[build_step].output.decode(errors="replace")[-TAIL_BYTES:]
            if build_step
            else ""
        )
    elif resource := _resource_status(plan, outcome, oom, run_steps + compile_steps):
        status, reason = resource
    elif (hidden.ran or hidden.expected) and not hidden.ok:
        status, reason = Status.TEST_FAILURE, "hidden tests: " + (hidden.note or f"{hidden.failed} failed")
    elif plan.run_own and own.failed:  # failed, did not compile, or did not run honestly
        status, reason = Status.TEST_FAILURE, "own tests: " + (own.note or f"{own.failed} failed")
    else:
        status, reason = Status.OK, ""
    measures = {"steps": {name: s.measures() for name, s in steps.items() if s.started}}
    return Result(
        id=job.id,
        status=status,
        build=build,
        clippy=clippy,
        tests=tests,
        reason=reason,
        output_tail=tail,
        measures=measures,
    )


def _error_lines(outcome: DriverOutcome, compile_names: list[str], skip_files: frozenset[str]) -> str:
    """The errors of the last compile step that ran, located in the program's own files, one line each
    (message, code, line; never the rendered snippets, which may quote other files)."""
    ran = [outcome.steps[n] for n in compile_names if _ran(outcome, n) is not None]
    if not ran:
        return ""
    errors = [d for d in parse_diagnostics(ran[-1].output, skip_files) if d.level == "error"]
    return "\n".join(f"line {d.line}: error" + (f"[{d.code}]" if d.code else "") + f": {d.message}" for d in errors)


def _first_message(diags: list[Diagnostic]) -> str:
    return diags[0].message if diags else ""
