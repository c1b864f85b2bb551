"""Run a job's steps (compile, run, ...) as one sandboxed bash driver, and watch it from the host.

One sandbox start per job keeps the overhead at a single bubblewrap call. The driver runs as
(sandbox) root; each step goes through ``rg-run``, which drops to the slot uid, so the program
cannot signal the driver or forge what it reports. Each step's output has its own pipe; the
driver reports ``begin STEP``, ``end STEP RC`` and finally ``done`` on a control pipe that the
steps never hold, and ``rg-run`` adds each step's exact exit status, signal, CPU time and peak
memory there. A driver that never says ``done`` without the host having killed it was stopped
by something outside the program: that is a sandbox fault, not a verdict.
The host enforces each step's wall-clock deadline and caps every stream; on breach it kills the
step's processes (the driver goes on to the next step), or the whole process tree when it cannot.
Every test run starts from an emptied work dir (``/tmp``): runs leave nothing for each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import shlex
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .layout import Layout

CONTROL_FD = 3
ACK_FD = 4  # the host answers the driver's "scrub" here once the sources are gone
NONCE_FD = 5
FIRST_STEP_FD = 6
HIGH_FD = 100  # above every target descriptor


@dataclass(frozen=True)
class Step:
    """One command of the driver, with its own limits. ``when`` is "always" or alternatives joined
    by ``|``, each a conjunction joined by ``&`` of ``ok:NAME`` (step NAME ran and exited 0),
    ``failed:NAME`` (it ran and did not) or ``erred:NAME`` (it failed by itself: it was killed
    neither by SIGKILL, as at its wall-clock deadline, nor for its CPU time, SIGXCPU)."""

    name: str
    argv: list[str]
    kind: str  # "compile" or "run" (untrusted code executes: sources gone, memory cgroup joined)
    wall_s: float
    cpu_s: int
    memory_mb: int
    procs: int
    file_size_mb: int
    open_files: int
    stack_mb: int
    output_bytes: int
    env: dict[str, str] = field(default_factory=dict)
    when: str = "always"
    cwd: str = ""  # run from this directory (default: the work dir)


@dataclass
class StepOutcome:
    started: bool = False
    exit_code: int | None = None  # the driver's view ($?), 128+N for a signal
    output: bytes = b""
    truncated: bool = False
    wall_s: float = 0.0
    status: int | None = None  # from rg-run: the real exit status (None when killed by a signal)
    signal: int = 0
    cpu_s: float = 0.0
    max_rss_mb: float = 0.0

    def measures(self) -> dict[str, float | int | None]:
        return {
            "exit_code": self.status,
            "signal": self.signal,
            "cpu_s": round(self.cpu_s, 3),
            "wall_s": round(self.wall_s, 3),
            "max_rss_mb": round(self.max_rss_mb, 1),
        }


@dataclass
class DriverOutcome:
    steps: dict[str, StepOutcome]
    timed_out: set[str] = field(default_factory=set)  # steps stopped at their wall-clock deadline
    overflow_step: str | None = None
    driver_exit: int | None = None
    driver_error: str = ""
    done: bool = False  # the driver reached its end
    faults: dict[str, str] = field(default_factory=dict)  # step -> why rg-run could not start it (ours)
    wall_s: float = 0.0
    # (seconds since the spawn, what happened): every control line as it arrived, the host's scrubs,
    # and the driver's exit. For profiling (benchmarks/profile_single.py): the gaps between a step's
    # end and the next one's begin are the driver's own work (handshakes, emptying /tmp, sealing).
    events: list[tuple[float, str]] = field(default_factory=list)


def _condition(when: str) -> str:
    def atom(term: str) -> str:
        kind, _, name = term.partition(":")
        if kind == "ok":
            return f'[ "${{rc_{name}:-x}}" = 0 ]'
        failed = f'[ -n "${{rc_{name}:-}}" ] && [ "$rc_{name}" != 0 ]'
        if kind == "erred":
            return (
                f'{failed} && [ "$rc_{name}" != {128 + signal.SIGKILL} ] && [ "$rc_{name}" != {128 + signal.SIGXCPU} ]'
            )
        return failed

    return " || ".join("{ " + " && ".join(atom(t) for t in alt.split("&")) + "; }" for alt in when.split("|"))


def _runner_call(layout: Layout, step: Step, uid: int | None, argv: list[str]) -> str:
    cwd = step.cwd or "-"
    args = [
        layout.runner,
        str(CONTROL_FD),
        step.name,
        str(-1 if uid is None else uid),
        str(step.memory_mb),
        str(step.cpu_s),
        str(step.procs),
        str(step.file_size_mb),
        str(step.open_files),
        str(step.stack_mb),
        cwd,
        "--",
        *argv,
    ]
    variables = dict(step.env)
    if step.kind == "run" and layout.fresh_runs:  # no kernel state shared with an earlier run (runner.c)
        variables["RG_FRESH_NS"] = layout.work
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
    return (env + " " if env else "") + " ".join(shlex.quote(a) for a in args)


def driver_script(
    steps: list[Step],
    layout: Layout,
    uid: int | None,
    uid_secrets: list[str],
    nonce_path: str | Sequence[str],
    seals: Sequence[tuple[str, str]] = (),
) -> str:
    """A bash script that runs the steps and reports on the control fd.

    Before the first step that runs untrusted code it says ``scrub`` and waits for the host to
    delete the sources (hidden tests included) and answer; ``uid_secrets``, copies the slot uid
    made, are deleted as that uid. No source or generated file is readable once tests run. Then it
    writes the nonce it reads from the host's pipe to ``nonce_path`` (root-owned file, unlisted
    directory), where the sentinel test finds it by a name only the exec-only binary holds, and
    seals each test binary (``seals``: a path or glob, and where it goes) with ``rg-run seal``.
    A batch has one nonce per program: ``nonce_path`` is then a list (one directory), read in order
    from the host's pipe, one line each.
    """
    nonce_paths = [nonce_path] if isinstance(nonce_path, str) else list(nonce_path)
    lines = ["exec 0</dev/null", "umask 022", f"cd {shlex.quote(layout.work)} || exit 90"]
    kinds = [step.kind for step in steps]
    if "run" in kinds and "compile" in kinds[kinds.index("run") :]:
        raise ValueError("every compile step must come before the first run step")
    scrubbed = False
    first_run = True
    # Every run starts from a fresh work dir (the sandbox's /tmp and $HOME): only the nonce and the
    # sealed binaries stay, both root's. A run cannot leave anything for the next one to find, so
    # the own run shows nothing of the hidden run, and a program's run is the same as its wrong
    # versions' (own-test credit). The host's own part (the sources again, and in the fallback the
    # slot uid's files in the host's shared directories) is done when the driver says ``scrub``.
    keep = {os.path.basename(os.path.dirname(nonce_paths[0]))} | {
        os.path.basename(os.path.dirname(target)) for _, target in seals
    }
    # Emptying costs no process when nothing is left to remove (the common case: the compiler
    # cleans up after itself, and most runs write nothing): bash lists the entries itself, hidden
    # ones included, and `rm` runs only on what is there besides what stays.
    spare = "|".join(shlex.quote(name) for name in sorted(keep))
    work = shlex.quote(layout.work)
    empty = (
        f"_left=(); for _f in {work}/* {work}/.[!.]* {work}/..?*; do "
        f'[ -e "$_f" ] || [ -L "$_f" ] || continue; case "${{_f##*/}}" in {spare}) ;; *) _left+=("$_f") ;; esac; done; '
        f'if [ ${{#_left[@]}} -gt 0 ]; then rm -rf -- "${{_left[@]}}" || exit 95; fi; unset _left _f'
    )
    handshake = f"echo scrub >&{CONTROL_FD}; read -r -n 1 -t 60 -u {ACK_FD} _ack || exit 92"
    for index, step in enumerate(steps):
        fd = FIRST_STEP_FD + index
        argv = list(step.argv)
        if step.kind == "run" and not scrubbed:  # unconditionally, whichever run step comes first
            scrubbed = True
            lines.append(handshake)
            nonce_dir = os.path.dirname(nonce_paths[0])
            lines.append(f"mkdir -m 0711 {shlex.quote(nonce_dir)} || exit 94")
            for path in nonce_paths:
                lines.append(
                    f"read -r _nonce <&{NONCE_FD} && printf '%s\\n' \"$_nonce\" > {shlex.quote(path)} || exit 94"
                )
            lines.append("unset _nonce")
            if uid_secrets:
                scrub = Step("scrub", [], "compile", 30, 10, 256, 8, 1, 64, 64, 0)
                lines.append(_runner_call(layout, scrub, uid, ["rm", "-rf", "--", *uid_secrets]) + " >/dev/null 2>&1")
            for source, target in seals:  # test binaries: root's, exec-only, in a directory the program cannot write
                if uid is not None:
                    seal = f'{shlex.quote(layout.runner)} seal {uid} "$f" {shlex.quote(target)}'
                else:
                    seal = f'mkdir -p {shlex.quote(os.path.dirname(target))} && mv -f "$f" {shlex.quote(target)}'
                lines.append(f'for f in {source}; do if [ -f "$f" ] && [ -x "$f" ]; then {seal}; break; fi; done')
        body = [f"echo 'begin {step.name}' >&{CONTROL_FD}"]
        if step.kind == "run":
            # the first run's handshake is the one just above (the host scrubbed, nothing ran since);
            # every later run asks again, after the program has had its turn
            body[:0] = [empty] if first_run else [handshake, empty]
            first_run = False
        call = _runner_call(layout, step, uid, argv)
        body.append(f"{call} >&{fd} 2>&{fd}")
        body.append(f'rc_{step.name}=$?; echo "end {step.name} $rc_{step.name}" >&{CONTROL_FD}')
        block = "; ".join(body)
        lines.append(block if step.when == "always" else f"if {_condition(step.when)}; then {block}; fi")
    lines.append(f"echo done >&{CONTROL_FD}")
    if "run" not in kinds or not layout.memory_cgroup:
        return "\n".join(lines) + "\n"
    # Every process that runs untrusted code is born in the job's memory cgroup. Joining it costs a
    # kernel RCU grace period (~5-10 ms, more under load: cgroups.py), so the runs get a shell of
    # their own, started first, that joins the cgroup while the compiler works and waits for the
    # compile steps' exit codes (digits only) before its first handshake. The compile steps are
    # started by the first shell, outside the cgroup, as before.
    split = 3 + next(i for i, line in enumerate(lines[3:]) if line == handshake)
    names = [step.name for step in steps if step.kind == "compile"]
    handover = " ".join(f"rc_{name}=${{rc_{name}:-}}" for name in names)
    runs = [
        f"coproc _RUNS {{ echo 0 > {layout.memory_cgroup} || exit 93; read -r _rcs || exit 92",
        'exec 0</dev/null 1>/dev/null; eval "$_rcs"; unset _rcs',
        *lines[split:],
        "}",
    ]
    # a runs' shell gone early (exit 93) must not take the first one with SIGPIPE: its status is the driver's
    hand = [f'trap "" PIPE; echo "{handover}" >&"${{_RUNS[1]}}"', 'wait "$_RUNS_PID"; exit $?']
    return "\n".join(lines[:3] + runs + lines[3:split] + hand) + "\n"


_LIVE: set[int] = set()  # sandboxes running now (their process groups), for cancel_all
_LIVE_LOCK = threading.Lock()
_CANCELLED = threading.Event()


def cancel_all() -> None:
    """Kill every sandbox this process is running and refuse to start new ones until
    :func:`resume_all`: Ctrl-C must stop grading within a second, not after the queue drains."""
    _CANCELLED.set()
    with _LIVE_LOCK:
        live = list(_LIVE)
    for pid in live:
        _kill(pid)


def resume_all() -> None:
    _CANCELLED.clear()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _arguments_on_stdin(argv: list[str]) -> tuple[list[str], bytes | None]:
    """bubblewrap's options moved to its stdin (``--args 0``): its ``/proc/<pid>/cmdline``, which the
    sandbox sees as ``/proc/1/cmdline``, then names no host path (toolchain, job directory, crate
    set). Its stdin is otherwise /dev/null, and the driver's own is /dev/null again."""
    if os.path.basename(argv[0]) != "bwrap" or "--" not in argv:
        return argv, None
    end = argv.index("--")
    payload = b"".join(a.encode() + b"\0" for a in argv[1:end])
    if len(payload) > 60_000:  # more than a pipe holds before the child reads: keep them on the command line
        return argv, None
    return [argv[0], "--args", "0", *argv[end:]], payload


def run_driver(
    argv: list[str],
    steps: list[Step],
    env: dict[str, str],
    nonce: str,
    scrub: Callable[[], None],
    kill_step: Callable[[], bool] | None = None,
) -> DriverOutcome:
    """Spawn ``argv`` (which runs the driver) in a new session and collect every step's output.
    ``kill_step()`` kills just an overdue step's processes, so the driver goes on to the next
    step; without it (or when it finds nothing to kill) the whole sandbox is killed. ``scrub()``
    deletes the job's sources when the driver asks, before any test runs."""
    if _CANCELLED.is_set():  # before any descriptor is made: nothing to undo
        return DriverOutcome(steps={}, driver_error="cancelled: grading was interrupted")
    pipes: dict[int, tuple[int, int]] = {FIRST_STEP_FD + i: os.pipe() for i in range(len(steps))}
    pipes[CONTROL_FD] = os.pipe()
    nonce_r, nonce_w = os.pipe()
    os.write(nonce_w, f"{nonce}\n".encode())
    os.close(nonce_w)
    ack_r, ack_w = os.pipe()
    misc_r, misc_w = os.pipe()
    argv, payload = _arguments_on_stdin(argv)
    stdin: list[tuple[Any, ...]] = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0)]
    spawn_only: list[int] = []  # descriptors the child gets and this process closes after the spawn
    if payload is not None:
        args_r, args_w = os.pipe()
        os.write(args_w, payload)
        os.close(args_w)
        spawn_only.append(fcntl.fcntl(args_r, fcntl.F_DUPFD_CLOEXEC, HIGH_FD))
        os.close(args_r)
        stdin = [(os.POSIX_SPAWN_DUP2, spawn_only[0], 0)]
    # Sources are moved above every target first: a dup2 onto fd 4 must not clobber a pipe that
    # happens to live at fd 4 in this (long-running, many-threaded) process before it is duplicated.
    wanted = {1: misc_w, 2: misc_w, NONCE_FD: nonce_r, ACK_FD: ack_r, **{t: w for t, (_, w) in pipes.items()}}
    high = {t: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD) for t, fd in wanted.items()}
    actions = [*stdin, *[(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in high.items()]]
    start = time.monotonic()
    try:
        pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions, setsid=True)
    except OSError as exc:
        for fd in [*high.values(), *spawn_only]:
            os.close(fd)
        for r, w in [*pipes.values(), (misc_r, misc_w), (ack_r, ack_w)]:
            os.close(r)
            os.close(w)
        os.close(nonce_r)
        return DriverOutcome(steps={}, driver_error=f"could not start sandbox: {exc}")
    with _LIVE_LOCK:
        _LIVE.add(pid)
    if _CANCELLED.is_set():  # interrupted while it started: cancel_all may have missed it
        _kill(pid)
    for fd in [*high.values(), *spawn_only]:
        os.close(fd)
    for _, w in pipes.values():
        os.close(w)
    os.close(misc_w)
    os.close(nonce_r)
    os.close(ack_r)

    outcomes = {s.name: StepOutcome() for s in steps}
    by_name = {s.name: s for s in steps}
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
    while sel.get_map():
        now = time.monotonic()
        if not killed and now > step_deadline and current is not None:
            first_time = current.name not in outcome.timed_out
            outcome.timed_out.add(current.name)
            if first_time and kill_step is not None and kill_step():
                step_deadline = now + 5.0  # grace for the step to end; then the whole sandbox goes
            else:
                _kill(pid)
                killed = True
        if not killed and now > hard_deadline:
            outcome.timed_out.add(current.name if current else "driver")
            _kill(pid)
            killed = True
        timeout = max(0.0, min(step_deadline, hard_deadline) - now) if not killed else 1.0
        for key, _ in sel.select(timeout=min(timeout, 1.0)):
            fd = key.fd
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(fd)
                os.close(fd)
                continue
            if fd == control_r:
                control_buf += chunk
                while b"\n" in control_buf:
                    line, control_buf = control_buf.split(b"\n", 1)
                    parts = line.decode(errors="replace").split()
                    outcome.events.append((time.monotonic() - start, " ".join(parts[:2])))
                    if parts == ["done"]:
                        outcome.done = True
                    elif parts == ["scrub"]:
                        scrub()
                        with contextlib.suppress(BrokenPipeError):  # the driver is gone: it never says done
                            os.write(ack_w, b"1")
                        outcome.events.append((time.monotonic() - start, "scrubbed"))
                    elif len(parts) >= 2 and parts[1] in outcomes:
                        name = parts[1]
                        if parts[0] == "begin":
                            current = by_name[name]
                            outcomes[name].started = True
                            step_started = time.monotonic()
                            step_deadline = step_started + current.wall_s
                        elif parts[0] == "end" and len(parts) == 3:
                            done = outcomes[name]
                            done.exit_code = int(parts[2]) if parts[2].lstrip("-").isdigit() else None
                            done.wall_s = time.monotonic() - step_started
                            current, step_deadline = None, float("inf")
                        elif parts[0] == "fault":
                            outcome.faults[name] = " ".join(parts[2:])[:300]
                        elif parts[0] == "stat" and len(parts) == 6:
                            code, sig, cpu_ms, rss_kb = (int(p) for p in parts[2:])
                            stat = outcomes[name]
                            stat.status = None if code < 0 else code
                            stat.signal, stat.cpu_s, stat.max_rss_mb = sig, cpu_ms / 1000, rss_kb / 1024
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
                        outcome.overflow_step = outcome.overflow_step or step.name
                        # only the step's processes when we can: the own run comes first, and its
                        # flood must not cost the hidden run that follows
                        if kill_step is None or not kill_step():
                            _kill(pid)
                            killed = True
        if killed and time.monotonic() > hard_deadline + 10:
            break  # a stuck pipe holder outside our reach; stop reading
    for key in list(sel.get_map().values()):
        os.close(key.fd)
    sel.close()
    os.close(ack_w)
    _, status = os.waitpid(pid, 0)
    with _LIVE_LOCK:
        _LIVE.discard(pid)
    outcome.driver_exit = os.waitstatus_to_exitcode(status)
    outcome.events.append((time.monotonic() - start, "exit"))
    outcome.driver_error = misc.decode(errors="replace").strip()
    outcome.wall_s = time.monotonic() - start
    if current is not None and outcomes[current.name].exit_code is None:
        outcomes[current.name].wall_s = time.monotonic() - step_started
    return outcome
