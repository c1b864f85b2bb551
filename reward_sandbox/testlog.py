"""Count test results from libtest's own JSON event stream, and refuse to trust a forged one.

A run is trusted only if all of these hold:
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

from .results import SuiteReport, TestCounts

_RESULT_EVENTS = {"ok": "passed", "failed": "failed", "ignored": "ignored"}


@dataclass
class _Test:
    started: int = 0
    results: int = 0
    outcome: str = ""
    position: int = -1


def parse_test_log(
    output: bytes, nonce: str, exit_code: int | None, sentinel_test: str, expected: int = 0
) -> tuple[SuiteReport, str]:
    """The suite's report and the text a person should see (panic messages, crash notes).
    ``exit_code`` is the process's real exit status (None when a signal ended it)."""
    text = output.decode(errors="replace")
    marker = f"RG_SENTINEL_{nonce}"
    tests: dict[str, _Test] = {}
    announced: int | None = None
    suite_end: dict[str, Any] | None = None
    nonce_positions: list[int] = []
    problems: list[str] = []
    readable: list[str] = []  # what a person should see: panic messages, crash notes
    for position, event in _events(text, marker, nonce_positions, readable):
        kind, what = event.get("type"), event.get("event")
        if kind == "suite":
            if what == "started" and announced is None:
                count = event.get("test_count")
                if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                    problems.append("a malformed suite event")
                    continue
                announced = count
            elif what in ("ok", "failed"):
                if suite_end is not None:
                    problems.append("more than one suite result")
                suite_end = event
        elif kind == "test" and isinstance(event.get("name"), str):
            t = tests.setdefault(event["name"], _Test())
            if what == "started":
                t.started += 1
            elif what in _RESULT_EVENTS:
                if what == "failed" and event.get("stdout"):
                    readable.append(f"---- {event['name']} ----\n{str(event['stdout']).strip()}")
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
    elif (suite_end.get("passed"), suite_end.get("failed")) != (counts.passed + 1, counts.failed) or any(
        isinstance(suite_end.get(k), bool) for k in ("passed", "failed")
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


_DECODER = json.JSONDecoder()


class UnreadableOutput(ValueError):
    """Output built to make parsing slow: the run is not trusted (the program wrote it)."""


MAX_FAILED_DECODES = 2000  # per run: `{` after `{` that never closes must not cost quadratic time


def _line_objects(line: str, budget: list[int]) -> tuple[list[dict[str, Any]], str]:
    """Every JSON object in ``line``, and the text around them. libtest writes each event as a whole
    line, so an event always ends its line: text the program wrote before it, even an unclosed
    ``{``, cannot hide it, and a forged event beside it is seen as one more."""
    found: list[dict[str, Any]] = []
    rest: list[str] = []
    pos = 0
    while pos < len(line):
        start = line.find("{", pos)
        if start < 0:
            rest.append(line[pos:])
            break
        try:
            obj, end = _DECODER.raw_decode(line, start)
        except (ValueError, RecursionError):  # the program can print anything, nested 100k deep too
            budget[0] -= 1
            if budget[0] <= 0:
                raise UnreadableOutput from None
            rest.append(line[pos : start + 1])
            pos = start + 1
            continue
        rest.append(line[pos:start])
        if isinstance(obj, dict):
            found.append(obj)
        pos = end
    return found, "".join(rest).strip()


def _events(
    text: str, marker: str, nonce_positions: list[int], readable: list[str]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line position, event) for every JSON object on stdout; records where the nonce line is."""
    budget = [MAX_FAILED_DECODES]
    for position, raw in enumerate(text.splitlines()):
        line = raw.strip()
        if line == marker:
            nonce_positions.append(position)
            continue
        objects, other = _line_objects(line, budget)
        if other:
            readable.append(other)
        for obj in objects:
            yield position, obj


def _count(tests: Iterable[_Test]) -> TestCounts:
    passed = failed = ignored = 0
    for t in tests:
        passed += t.outcome == "passed"
        failed += t.outcome == "failed"
        ignored += t.outcome == "ignored"
    return TestCounts(passed=passed, failed=failed, ignored=ignored)
