"""Run a sequence of steps (compile, run, ...) as one sandboxed shell driver.

One sandbox start per job keeps the overhead at a single bubblewrap call. Each step's
output has its own pipe, and the driver reports "begin STEP" / "end STEP RC" on a control
pipe that is closed for the steps themselves, so a program cannot forge exit codes by printing.
The host enforces each step's wall-clock deadline, caps every stream, and kills the whole
process tree on breach.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field

CONTROL_FD = 9
FIRST_STEP_FD = 3
MAX_STEPS = CONTROL_FD - FIRST_STEP_FD  # dash knows single-digit fds only


@dataclass(frozen=True)
class Step:
    """One command of the driver, with its own limits. ``when`` is "always" or "ok:NAME"/"failed:NAME"
    (run only if step NAME exited 0 / non-zero)."""

    name: str
    argv: list[str]
    wall_s: float
    cpu_s: int
    memory_mb: int
    procs: int
    file_size_mb: int
    open_files: int
    output_bytes: int
    env: dict[str, str] = field(default_factory=dict)
    when: str = "always"
    cwd: str = ""  # run from this directory (default: the work dir)


@dataclass
class StepOutcome:
    started: bool = False
    exit_code: int | None = None
    output: bytes = b""
    truncated: bool = False
    wall_s: float = 0.0


@dataclass
class DriverOutcome:
    steps: dict[str, StepOutcome]
    timed_out_step: str | None = None
    overflow_step: str | None = None
    driver_exit: int | None = None
    driver_error: str = ""
    wall_s: float = 0.0


def driver_script(steps: list[Step], work_dir: str) -> str:
    """A POSIX sh script that runs the steps with their rlimits and reports on the control fd."""
    if len(steps) > MAX_STEPS:
        raise ValueError(f"at most {MAX_STEPS} steps per job")
    step_fds = [FIRST_STEP_FD + i for i in range(len(steps))]
    close_all = " ".join(f"{fd}>&-" for fd in [*step_fds, CONTROL_FD])
    lines = ["exec 0</dev/null", f"cd {shlex.quote(work_dir)} || exit 90"]
    for step, fd in zip(steps, step_fds):
        limits = [
            f"--as={step.memory_mb * 1024 * 1024}",
            f"--cpu={step.cpu_s}",
            f"--nproc={step.procs}",
            f"--fsize={step.file_size_mb * 1024 * 1024}",
            f"--nofile={step.open_files}",
            "--core=0",
        ]
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in step.env.items())
        command = " ".join(shlex.quote(a) for a in step.argv)
        if step.cwd:
            command = f"sh -c 'cd \"$0\" && exec \"$@\"' {shlex.quote(step.cwd)} {command}"
        body = (
            f"echo 'begin {step.name}' >&{CONTROL_FD}; "
            f"{env + ' ' if env else ''}prlimit {' '.join(limits)} -- {command} >&{fd} 2>&{fd} {close_all}; "
            f"rc_{step.name}=$?; echo \"end {step.name} $rc_{step.name}\" >&{CONTROL_FD}"
        )
        if step.when == "always":
            lines.append(body)
        else:
            kind, _, other = step.when.partition(":")
            test = "-eq" if kind == "ok" else "-ne"
            lines.append(f'if [ "${{rc_{other}:-1}}" {test} 0 ]; then {body}; fi')
    return "\n".join(lines) + "\n"


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def kill_uid_processes(uid: int) -> None:
    """Kill every process of ``uid`` (used after fallback-level jobs, which have no pid namespace)."""
    subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "/bin/sh", "-c", "kill -9 -1 2>/dev/null"],
        check=False,
        capture_output=True,
    )


def run_driver(prefix: list[str], steps: list[Step], env: dict[str, str], script_in_sandbox: str) -> DriverOutcome:
    """Spawn ``prefix + [sh, script]`` in a new session and collect every step's output."""
    pipes: dict[int, tuple[int, int]] = {}
    for i in range(len(steps)):
        pipes[FIRST_STEP_FD + i] = os.pipe()
    pipes[CONTROL_FD] = os.pipe()
    misc_r, misc_w = os.pipe()
    actions = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, misc_w, 1), (os.POSIX_SPAWN_DUP2, misc_w, 2)]
    actions += [(os.POSIX_SPAWN_DUP2, w, target) for target, (_, w) in pipes.items()]
    argv = [*prefix, "/bin/sh", script_in_sandbox]
    start = time.monotonic()
    try:
        pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions, setsid=True)
    except OSError as exc:
        for r, w in [*pipes.values(), (misc_r, misc_w)]:
            os.close(r)
            os.close(w)
        return DriverOutcome(steps={}, driver_error=f"could not start sandbox: {exc}")
    for _, w in pipes.values():
        os.close(w)
    os.close(misc_w)

    outcomes = {s.name: StepOutcome() for s in steps}
    fd_step = {pipes[FIRST_STEP_FD + i][0]: s for i, s in enumerate(steps)}
    control_r = pipes[CONTROL_FD][0]
    sel = selectors.DefaultSelector()
    for fd in [*fd_step, control_r, misc_r]:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    control_buf = b""
    misc = b""
    current: Step | None = None
    step_deadline = float("inf")
    step_started = start
    hard_deadline = start + sum(s.wall_s for s in steps) + 30.0
    outcome = DriverOutcome(steps=outcomes)
    killed = False
    open_fds = len(sel.get_map())
    while open_fds:
        now = time.monotonic()
        if not killed and (now > step_deadline or now > hard_deadline):
            outcome.timed_out_step = current.name if current else "driver"
            _kill(pid)
            killed = True
        timeout = max(0.0, min(step_deadline, hard_deadline) - now) if not killed else 1.0
        events = sel.select(timeout=min(timeout, 1.0))
        for key, _ in events:
            fd = key.fd
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(fd)
                os.close(fd)
                open_fds -= 1
                continue
            if fd == control_r:
                control_buf += chunk
                while b"\n" in control_buf:
                    line, control_buf = control_buf.split(b"\n", 1)
                    parts = line.decode(errors="replace").split()
                    if len(parts) >= 2 and parts[1] in outcomes:
                        if parts[0] == "begin":
                            current = next(s for s in steps if s.name == parts[1])
                            outcomes[current.name].started = True
                            step_started = time.monotonic()
                            step_deadline = step_started + current.wall_s
                        elif parts[0] == "end" and len(parts) == 3:
                            done = outcomes[parts[1]]
                            done.exit_code = int(parts[2]) if parts[2].lstrip("-").isdigit() else None
                            done.wall_s = time.monotonic() - step_started
                            current, step_deadline = None, float("inf")
            elif fd == misc_r:
                misc = (misc + chunk)[-16384:]
            else:
                step = fd_step[fd]
                out = outcomes[step.name]
                room = step.output_bytes - len(out.output)
                out.output += chunk[: max(room, 0)]
                if len(chunk) > room and not out.truncated:
                    out.truncated = True
                    if not killed:
                        outcome.overflow_step = step.name
                        _kill(pid)
                        killed = True
        if killed and time.monotonic() > hard_deadline + 10:
            break  # a stuck pipe holder outside our reach; stop reading
    for key in list(sel.get_map().values()):
        os.close(key.fd)
    sel.close()
    _, status = os.waitpid(pid, 0)
    outcome.driver_exit = os.waitstatus_to_exitcode(status)
    outcome.driver_error = misc.decode(errors="replace").strip()
    outcome.wall_s = time.monotonic() - start
    if current is not None and outcomes[current.name].exit_code is None:
        outcomes[current.name].wall_s = time.monotonic() - step_started
    return outcome
