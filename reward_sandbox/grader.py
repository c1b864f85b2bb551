"""Grade one job: lay out the crate, run the backend's plan in the sandbox, classify the outcome."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from .assemble import GENERATED_FILES, Assembly, assemble
from .backends import CARGO, FAST, Plan, cargo_files, cargo_manifest, cargo_plan, fast_plan
from .diagnostics import dedupe, parse_diagnostics
from .isolation import BWRAP, bwrap_argv, host_env, layout_for, rlimits_argv, slot_uid
from .jobs import Job, TestMode
from .limits import Limits
from .process import DriverOutcome, driver_script, kill_uid_processes, run_driver
from .results import BuildReport, ClippyReport, Diagnostic, Result, TestReport
from .status import Status
from .testlog import parse_test_log
from .toolchain import Toolchain

SIGXCPU_EXIT, SIGKILL_EXIT, SIGXFSZ_EXIT = 128 + 24, 128 + 9, 128 + 25
TAIL_BYTES = 2000


def _scratch_root() -> str | None:
    """RAM-backed /dev/shm when usable: job dirs are tiny and short-lived."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def grade_job(job: Job, *, toolchain: Toolchain, level: str, limits: Limits, backend: str = FAST, slot: int = 0) -> Result:
    """Grade ``job`` in isolation ``level``. Never raises for the program's behaviour; harness
    faults come back as ``sandbox_error`` with the reason."""
    start = time.monotonic()
    limits = limits.with_run_timeout(job.timeout_s)
    root = Path(tempfile.mkdtemp(prefix="rg-", dir=_scratch_root()))
    uid = slot_uid(slot, level)
    try:
        src, work = root / "src", root / "work"
        src.mkdir()
        work.mkdir()
        os.chmod(root, 0o711)
        asm = assemble(job)
        layout = layout_for(level, toolchain, src, work)
        plan = (cargo_plan if backend == CARGO else fast_plan)(job, asm, layout, toolchain, limits)
        files = cargo_files(job, asm) if backend == CARGO else {**asm.files, "Cargo.toml": cargo_manifest(job)}
        for rel, text in {**files, "driver.sh": driver_script(plan.steps, layout.work)}.items():
            path = src / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        for dirpath, _dirnames, filenames in os.walk(src):
            os.chmod(dirpath, 0o755)
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o644)
        if level == BWRAP:
            prefix, env = bwrap_argv(toolchain, src, limits.disk_mb, uid), {}
        else:
            if uid is not None:
                os.chown(work, uid, uid)
            os.chmod(work, 0o700)
            prefix, env = rlimits_argv(uid), host_env(toolchain, str(work))
        outcome = run_driver(prefix, plan.steps, env, f"{layout.src}/driver.sh")
        result = classify(job, asm, plan, outcome)
    except Exception as exc:  # noqa: BLE001 - a harness fault must not lose the batch
        result = Result(id=job.id, status=Status.SANDBOX_ERROR, reason=f"harness error: {type(exc).__name__}: {exc}")
    finally:
        if level != BWRAP and uid is not None:
            kill_uid_processes(uid)
        shutil.rmtree(root, ignore_errors=True)
    return Result(**{**result.__dict__, "duration_s": time.monotonic() - start, "isolation": level, "backend": backend})


def _first_ran(outcome: DriverOutcome, names: list[str]) -> str | None:
    return next((n for n in names if n in outcome.steps and outcome.steps[n].exit_code is not None), None)


def _resource_status(outcome: DriverOutcome) -> tuple[Status, str] | None:
    """Timeouts, memory and output breaches, from the host's own observations and exit signals."""
    if outcome.overflow_step:
        return Status.OUTPUT_LIMIT, f"step '{outcome.overflow_step}' wrote more output than allowed"
    if outcome.timed_out_step:
        return Status.TIMEOUT, f"step '{outcome.timed_out_step}' exceeded its wall-clock limit"
    for name, step in outcome.steps.items():
        text = step.output[-8192:]
        if step.exit_code in (SIGXCPU_EXIT, SIGKILL_EXIT):
            return Status.TIMEOUT, f"step '{name}' exceeded its CPU-time limit"
        if step.exit_code == SIGXFSZ_EXIT:
            return Status.OUTPUT_LIMIT, f"step '{name}' wrote a file larger than allowed"
        if step.exit_code and (b"memory allocation of" in text or b"out of memory" in text.lower()):
            return Status.MEMORY_LIMIT, f"step '{name}' ran out of its memory limit"
    return None


def classify(job: Job, asm: Assembly, plan: Plan, outcome: DriverOutcome) -> Result:
    steps = outcome.steps
    if not any(s.started for s in steps.values()):
        return Result(id=job.id, status=Status.SANDBOX_ERROR, reason=f"sandbox did not start: {outcome.driver_error or 'no output'}")
    build_step = _first_ran(outcome, plan.build[:1]) or _first_ran(outcome, plan.build)
    build_ok = build_step is not None and steps[build_step].exit_code == 0
    if not build_ok and len(plan.build) > 1:  # fast path: the test build failed, the plain check decides
        check = _first_ran(outcome, plan.build[1:])
        if check is not None:
            build_step, build_ok = check, steps[check].exit_code == 0
    diags = parse_diagnostics(steps[build_step].output, GENERATED_FILES) if build_step else []
    lint_step = build_step if build_step in plan.lint else _first_ran(outcome, plan.lint)
    lint_diags = parse_diagnostics(steps[lint_step].output, GENERATED_FILES) if lint_step else []
    errors = [d for d in diags if d.level == "error"]
    warnings = dedupe([d for d in lint_diags if d.level == "warning"])
    build = BuildReport(ok=build_ok, errors=len(errors), diagnostics=tuple(errors))
    lint_errors = any(d.level == "error" for d in lint_diags)  # errors in generated test files are not counted
    clippy = ClippyReport(ok=build_ok and lint_step is not None and not lint_errors and not warnings,
                          warnings=len(warnings), diagnostics=tuple(warnings))  # fmt: skip
    tests, tail = TestReport(), ""
    run = steps.get(plan.run) if plan.run else None
    if run is not None and run.started:
        tests = parse_test_log(run.output, asm.nonce, run.exit_code, all_hidden=job.test_mode is TestMode.INTEGRATION)
        tail = tests.output[-TAIL_BYTES:]
    resource = _resource_status(outcome)
    test_compile_failed = build_ok and plan.test_compile is not None and steps[plan.test_compile].exit_code not in (0, None)
    if resource is not None:
        status, reason = resource
    elif not build_ok:
        status, reason = Status.COMPILE_ERROR, _first_message(errors) or "the program does not compile"
    elif test_compile_failed:
        test_errors = [d for d in parse_diagnostics(steps[plan.test_compile].output) if d.level == "error"]
        status, reason = Status.TEST_FAILURE, "the tests do not compile: " + (_first_message(test_errors) or "unknown error")
        tail = "\n".join(d.rendered for d in test_errors)[-TAIL_BYTES:]
    elif run is not None and not tests.ok and (tests.counts.failed or not tests.trusted):
        status, reason = Status.TEST_FAILURE, tests.note or f"{tests.counts.failed} test(s) failed"
    else:
        status, reason = Status.OK, ""
    if status is Status.COMPILE_ERROR:
        tail = "\n".join(d.rendered for d in errors)[-TAIL_BYTES:]
    return Result(id=job.id, status=status, build=build, clippy=clippy, tests=tests, reason=reason, output_tail=tail)


def _first_message(diags: list[Diagnostic]) -> str:
    return diags[0].message if diags else ""
