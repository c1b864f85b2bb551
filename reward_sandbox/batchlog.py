"""Split one batched libtest run into each program's stretch, and say which stretches can be trusted.

A program's stretch is the output between the gate before its tests and the gate after them. It
is trusted only when all of these hold (else the program is graded alone):
- the baseline test and both gates ran once each and passed, in that order;
- the program's tests seen in the run are exactly those the (untouched, pre-run) ``--list`` of the
  binary names under its module for this run, each started once and with one result;
- its sentinel passed and printed the program's own nonce exactly once, after every other test of
  the program had its result;
- every event of the program, and its nonce line, lie between the two gates.
A neighbour can only add events under names it does not know (random tags), or, under the names it
learns while its own tests run, duplicates that fail the checks above. The trusted stretch is then
rewritten, names and paths, into the output the program's run alone would have produced (a suite
start with its own test count, its lines, a suite end, the matching exit code), which
``testlog.parse_test_log`` reads as it reads a single run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .batchcrate import BatchCrate, Member
from .testlog import MAX_FAILED_DECODES, UnreadableOutput, _line_objects

_RESULTS = {"ok": "passed", "failed": "failed", "ignored": "ignored"}


@dataclass
class _Seen:
    started: int = 0
    results: int = 0
    outcome: str = ""
    first: int = -1
    last: int = -1
    result_at: int = -1


@dataclass(frozen=True)
class Stretch:
    """One program's part of a batched run, as its run alone would have printed it."""

    trusted: bool
    why: str = ""
    output: bytes = b""
    exit_code: int = 0


@dataclass
class _Run:
    lines: list[str]
    tests: dict[str, _Seen] = field(default_factory=dict)
    nonces: dict[str, list[int]] = field(default_factory=dict)  # tag -> lines holding its nonce


def listed_tests(output: bytes) -> list[str]:
    """Test names of a binary's ``--list`` output (``name: test`` lines)."""
    return [line[: -len(": test")] for line in output.decode(errors="replace").splitlines() if line.endswith(": test")]


def _read(output: bytes, members: tuple[Member, ...]) -> _Run:
    markers = {f"RG_SENTINEL_{m.asm.nonce}": m.tag for m in members}
    run = _Run(lines=output.decode(errors="replace").splitlines())
    budget = [MAX_FAILED_DECODES]
    for position, raw in enumerate(run.lines):
        line = raw.strip()
        if line in markers:
            run.nonces.setdefault(markers[line], []).append(position)
            continue
        for event in _line_objects(line, budget)[0]:
            name, what = event.get("name"), event.get("event")
            if event.get("type") != "test" or not isinstance(name, str):
                continue
            seen = run.tests.setdefault(name, _Seen())
            seen.first = position if seen.first < 0 else seen.first
            seen.last = position
            if what == "started":
                seen.started += 1
            elif what in _RESULTS:
                seen.results += 1
                seen.outcome = _RESULTS[what]
                seen.result_at = position
    return run


def _passed_once(run: _Run, name: str) -> _Seen | None:
    seen = run.tests.get(name)
    if seen is None or seen.started != 1 or seen.results != 1 or seen.outcome != "passed":
        return None
    return seen


def _stretch(run: _Run, crate: BatchCrate, index: int, names: list[str], hidden: bool, base: _Seen) -> Stretch:
    member = crate.members[index]
    before, after = _passed_once(run, crate.gate(index, hidden)), _passed_once(run, crate.gate(index + 1, hidden))
    if before is None or after is None:
        return Stretch(False, "a gate around the program failed or did not run")
    start, end = before.result_at, after.first
    if not base.result_at < start < end:
        return Stretch(False, "gates out of order")
    prefix = f"{member.module}::"
    mine = [n for n in names if n.startswith(prefix)]
    if {n for n in run.tests if n.startswith(prefix)} != set(mine):
        return Stretch(False, "tests seen differ from the tests listed")
    sentinel_name = prefix + (
        f"{member.asm.hidden_module}::zzzz_{member.tag}_end::zzzz_done"
        if hidden
        else f"zzzz_{member.tag}_end::zzzz_done"
    )
    seen = {n: run.tests[n] for n in mine}
    if any(s.started != 1 or s.results != 1 or not start < s.first <= s.last < end for s in seen.values()):
        return Stretch(False, "a test reported more or fewer than one result, or outside its stretch")
    nonces = run.nonces.get(member.tag, [])
    sentinel = seen.get(sentinel_name)
    if sentinel is None or sentinel.outcome != "passed" or len(nonces) != 1 or not start < nonces[0] < end:
        return Stretch(False, "the run ended before the program's last test")
    if any(s.result_at > nonces[0] for n, s in seen.items() if n != sentinel_name):
        return Stretch(False, "tests finished after the sentinel")
    counts = {kind: sum(s.outcome == kind for s in seen.values()) for kind in ("passed", "failed", "ignored")}
    text = "\n".join(run.lines[start + 1 : end])
    if hidden:
        text = text.replace(f"{prefix}{member.asm.hidden_module}::", f"{member.tag}_hidden::")
    text = text.replace(prefix, "").replace(f"/{member.tag}/", "/")
    head = json.dumps({"type": "suite", "event": "started", "test_count": len(mine)})
    tail = json.dumps(
        {
            "type": "suite",
            "event": "failed" if counts["failed"] else "ok",
            **counts,
            "measured": 0,
            "filtered_out": 0,
            "exec_time": 0.0,
        }
    )
    output = f"{head}\n{text}\n{tail}\n".encode()
    return Stretch(True, output=output, exit_code=101 if counts["failed"] else 0)


@dataclass(frozen=True)
class SplitRun:
    stretches: dict[str, Stretch]  # by member tag
    files: str = ""  # the baseline's digest of the files it saw ("" when it is not to be had)


def split_run(output: bytes, crate: BatchCrate, listed: list[str], hidden: bool) -> SplitRun:
    """Each member's stretch of one run (the hidden run, or the own run), and the baseline's files."""
    names = [n for n in listed if (crate.filter in n) == hidden]
    try:
        run = _read(output, crate.members)
    except UnreadableOutput:
        return SplitRun({m.tag: Stretch(False, "unreadable output") for m in crate.members})
    base = _passed_once(run, crate.base(hidden))
    if base is None:
        return SplitRun({m.tag: Stretch(False, "the baseline test failed or did not run") for m in crate.members})
    # printed before any program's code ran: no program can have written this line
    digests = [line.strip() for line in run.lines[base.first : base.result_at] if line.startswith("RG_BASE_")]
    stretches = {m.tag: _stretch(run, crate, i, names, hidden, base) for i, m in enumerate(crate.members)}
    return SplitRun(stretches, digests[0] if len(digests) == 1 else "")
