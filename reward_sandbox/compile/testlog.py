"""Count test results from libtest's own JSON event stream, and refuse to trust a forged one.

The stream is read as libtest wrote it: one event per line, lines split on ``\\n`` only (libtest
never writes another line break outside a JSON string, and inside one any other break, U+2028
or ``\\r`` included, is part of the string). A line holding a ``{`` must be exactly one event of
a shape libtest writes (its keys, their types, no key twice, nothing before or after it): text
a program writes without a newline runs into libtest's next line, and a line that is not one
clean event is tampering, whatever it seems to say. A line without ``{`` is the program's own
text (a direct write to stdout or stderr): it can neither be nor hide an event, so it is only
kept for a person to read.

A run is trusted only if all of these hold:
- no line is tampering (above);
- the first suite event announces N tests, and exactly N distinct tests each have one
  ``started`` and one result event;
- the sentinel (the last test by name) printed this run's secret nonce, once, after every
  other test's result, and then passed (it reads the nonce from a pipe at run time: the nonce
  is in no file and not in the binary);
- the suite's closing event follows and agrees with the per-test counts;
- the process exit code agrees (0 when nothing failed, 101 otherwise).
Otherwise no test counts as passed: the failures are kept for feedback, the rest is unknown.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..results import SuiteReport, TestCounts

_RESULT_EVENTS = {"ok": "passed", "failed": "failed", "ignored": "ignored"}
_COUNTS = ("passed", "failed", "ignored", "measured", "filtered_out")


@dataclass
class _Test:
    started: int = 0
    results: int = 0
    outcome: str = ""
    position: int = -1


def parse_test_log(
    output: bytes, nonce: str, exit_code: int | None, sentinel_test: str, expected: int = 0, prefix: str = ""
) -> tuple[SuiteReport, str]:
    """The suite's report and the text a person should see (panic messages, crash notes).
    ``exit_code`` is the process's real exit status (None when a signal ended it). ``prefix``
    (a batch: the program's module path) starts every test name of the run; it is dropped, so the
    names are those of a run alone, and a test without it was not the program's to report."""
    tests: dict[str, _Test] = {}
    announced: int | None = None
    suite_end: dict[str, Any] | None = None
    nonce_positions: list[int] = []
    problems: list[str] = []
    readable: list[str] = []  # what a person should see: panic messages, crash notes
    for position, event in _events(output, f"RG_SENTINEL_{nonce}".encode(), nonce_positions, readable, problems):
        kind, what = event["type"], event["event"]
        if kind == "suite":
            if what == "started":
                if announced is not None:
                    problems.append("more than one suite start")
                announced = event["test_count"]
            else:
                if suite_end is not None:
                    problems.append("more than one suite result")
                suite_end = event
            continue
        name: str = event["name"]
        if not name.startswith(prefix):
            problems.append("a test of another program")
            continue
        t = tests.setdefault(name[len(prefix) :], _Test())
        if what == "started":
            t.started += 1
        else:
            if what == "failed" and event.get("stdout"):
                readable.append(f"---- {name[len(prefix) :]} ----\n{str(event['stdout']).strip()}")
            t.results += 1
            t.outcome = _RESULT_EVENTS[what]
            t.position = position

    user_tests = {name: t for name, t in tests.items() if name != sentinel_test}
    failures = tuple(sorted(name for name, t in user_tests.items() if t.outcome == "failed"))
    sentinel = tests.get(sentinel_test)
    if announced is None:
        problems.append("the test harness never started")
    elif len(tests) != announced:
        problems.append(f"{announced} tests announced, {len(tests)} seen")
    if any(t.started != 1 or t.results != 1 for t in tests.values()):
        problems.append("a test reported more or fewer than one result")
    if len(nonce_positions) != 1 or sentinel is None or sentinel.outcome != "passed":
        problems.append("the run ended before its last test (exit, abort or crash inside a test)")
    elif any(t.position > nonce_positions[0] for t in user_tests.values()):
        problems.append("tests finished after the sentinel")
    counts = _count(user_tests.values())
    if suite_end is None:
        problems.append("no suite result")
    elif (suite_end["passed"], suite_end["failed"], suite_end["ignored"]) != (
        counts.passed + 1,
        counts.failed,
        counts.ignored,
    ):
        problems.append("suite totals disagree with the per-test results")
    expected_exit = 0 if counts.failed == 0 else 101
    if exit_code != expected_exit:
        problems.append(f"exit code {exit_code}, expected {expected_exit}")

    readable_text = "\n".join(readable)
    if problems:
        total = max(len(user_tests), (announced or 1) - 1, expected, 1)
        report = SuiteReport(
            ran=True,
            trusted=False,
            failed=total,
            expected=expected,
            failures=failures,
            note="; ".join(dict.fromkeys(problems)),
        )
        return report, readable_text
    passes = tuple(sorted(name for name, t in user_tests.items() if t.outcome == "passed"))
    note = f"{expected} tests expected, {counts.total} ran" if counts.total < expected else ""
    report = SuiteReport(
        ran=True,
        trusted=True,
        passed=counts.passed,
        failed=counts.failed,
        ignored=counts.ignored,
        expected=expected,
        failures=failures,
        passes=passes,
        note=note,
    )
    return report, readable_text


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("a key twice")
    return found


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON libtest writes")


def _count_field(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text_fields(event: dict[str, Any], optional: dict[str, type | tuple[type, ...]]) -> bool:
    return all(isinstance(event[k], t) and not isinstance(event[k], bool) for k, t in optional.items() if k in event)


def libtest_event(line: bytes) -> dict[str, Any] | None:
    """``line`` as the one event libtest wrote, or None when it is not exactly one event of a
    shape libtest writes (``--format json``: suite start and end, test start and result)."""
    if not (line.startswith(b"{") and line.endswith(b"}")):
        return None
    try:
        event = json.loads(line.decode(), object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(event, dict):
        return None
    kind, what, keys = event.get("type"), event.get("event"), set(event)
    if kind == "suite" and what == "started":
        ok = keys == {"type", "event", "test_count"} and _count_field(event["test_count"])
    elif kind == "suite" and what in ("ok", "failed"):
        ok = {"type", "event", *_COUNTS} <= keys <= {"type", "event", *_COUNTS, "exec_time"}
        ok = ok and all(_count_field(event[k]) for k in _COUNTS) and _text_fields(event, {"exec_time": (int, float)})
    elif kind == "test" and what == "started":
        ok = keys == {"type", "event", "name"} and isinstance(event["name"], str)
    elif kind == "test" and what in _RESULT_EVENTS:
        ok = {"type", "event", "name"} <= keys <= {"type", "event", "name", "stdout", "message", "exec_time"}
        ok = ok and isinstance(event["name"], str)
        ok = ok and _text_fields(event, {"stdout": str, "message": str, "exec_time": (int, float)})
    else:
        ok = False
    return event if ok else None


def _events(
    output: bytes, marker: bytes, nonce_positions: list[int], readable: list[str], problems: list[str]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line position, event) for every event line; records where the nonce line is, keeps the
    program's own lines for a person, and notes tampering in ``problems``."""
    for position, line in enumerate(output.split(b"\n")):
        if line == marker:
            nonce_positions.append(position)
        elif b"{" not in line:
            text = line.decode(errors="replace").strip()
            if text:
                readable.append(text)
        elif (event := libtest_event(line)) is not None:
            yield position, event
        else:
            if "a line that is not one libtest event" not in problems:
                problems.append("a line that is not one libtest event")
            readable.append(line.decode(errors="replace").strip()[:2000])


def _count(tests: Iterable[_Test]) -> TestCounts:
    passed = failed = ignored = 0
    for t in tests:
        passed += t.outcome == "passed"
        failed += t.outcome == "failed"
        ignored += t.outcome == "ignored"
    return TestCounts(passed=passed, failed=failed, ignored=ignored)
