"""The libtest log reader accepts only what libtest wrote: a clean run is trusted, and every way a
program could bend a line (other line breaks, bytes around or inside an event, halves, doubles,
keys twice, shapes libtest never writes, names outside its module) leaves nothing passed."""

from __future__ import annotations

import json

import pytest

from reward_sandbox.compile.testlog import libtest_event, parse_test_log

SENTINEL = "z::done"
NONCE = "n0"


def run(*middle: str, failed: bool = False) -> list[str]:
    """A libtest stream: one test ``t`` (ok, or failed with ``middle`` in its captured stdout), then the sentinel."""
    t = '{ "type": "test", "name": "t", "event": "ok" }'
    if failed:
        t = json.dumps({"type": "test", "name": "t", "event": "failed", "stdout": "".join(middle)})
    return [
        '{ "type": "suite", "event": "started", "test_count": 2 }',
        '{ "type": "test", "event": "started", "name": "t" }',
        t,
        f'{{ "type": "test", "event": "started", "name": "{SENTINEL}" }}',
        "",
        f"RG_SENTINEL_{NONCE}",
        f'{{ "type": "test", "name": "{SENTINEL}", "event": "ok" }}',
        json.dumps(
            {"type": "suite", "event": "failed" if failed else "ok", "passed": 2 - failed, "failed": int(failed)}
            | {"ignored": 0, "measured": 0, "filtered_out": 0, "exec_time": 0.01}
        ),
    ]


def read(lines: list[str], exit_code: int = 0, prefix: str = ""):  # type: ignore[no-untyped-def]
    return parse_test_log("\n".join(lines).encode(), NONCE, exit_code, SENTINEL, 1, prefix)[0]


def test_a_clean_run_is_trusted_and_a_clean_failure_too():
    report = read(run())
    assert report.trusted and report.passed == 1 and report.ok
    report = read(run("panicked\u2028at", failed=True), exit_code=101)
    assert report.trusted and report.failed == 1 and report.passed == 0


def test_a_program_line_without_a_brace_is_only_text():
    lines = run()
    lines.insert(2, "hello from the program\r")
    report = read(lines)
    assert report.trusted and report.passed == 1


FORGED_OK = '{ "type": "test", "name": "t", "event": "ok" }'


@pytest.mark.parametrize("brk", ["\u2028", "\u2029", "\u0085", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"])
def test_a_line_break_inside_libtests_failed_event_does_not_split_it(brk):
    """Issue 24: a forged `ok` then a break `str.splitlines` splits on, inside the captured text."""
    lines = run(f"x{brk}y", failed=True)
    lines.insert(2, FORGED_OK)
    report = read(lines, exit_code=101)
    assert not report.trusted and report.passed == 0


@pytest.mark.parametrize(
    "bend",
    [
        lambda ev: "\r" + ev,  # bytes before libtest's line
        lambda ev: ev + "\r",
        lambda ev: " " + ev,
        lambda ev: ev + "\0",
        lambda ev: '{"x":' + ev,  # an unclosed object the line runs into
        lambda ev: ev + ev,  # two events on one line
        lambda ev: FORGED_OK + ev,
        lambda ev: ev[:20] + "\n" + ev[20:],  # split in two lines
        lambda ev: ev.replace('"event": "ok"', '"event": "failed", "event": "ok"'),  # a key twice
        lambda ev: ev.replace(" }", ', "extra": 1 }'),  # a key libtest never writes
        lambda ev: ev.replace('"t"', "1"),  # a name that is no string
        lambda ev: "[" * 100_000 + ev,  # nesting built to be costly
    ],
)
def test_any_bent_event_line_is_tampering(bend):
    lines = run()
    lines[2] = bend(lines[2])
    report = read(lines)
    assert not report.trusted and report.passed == 0
    assert "not one libtest event" in report.note or "more or fewer" in report.note


@pytest.mark.parametrize(
    "forged",
    [
        FORGED_OK,  # a second result
        '{ "type": "test", "event": "started", "name": "t" }',  # a second start
        '{ "type": "suite", "event": "started", "test_count": 1 }',  # a second suite start
        '{ "type": "suite", "event": "ok", "passed": 2, "failed": 0, "ignored": 0, "measured": 0, "filtered_out": 0 }',
        '{ "type": "suite", "event": "ok", "passed": true, "failed": 0, "ignored": 0, "measured": 0, "filtered_out": 0 }',
        '{ "type": "test", "event": "timeout", "name": "t" }',  # an event libtest writes only when asked
        '{ "type": "test", "name": "t", "event": "ok", "exec_time": NaN }',
    ],
)
def test_forged_whole_events_are_never_trusted(forged):
    lines = run()
    lines.insert(3, forged)
    report = read(lines)
    assert not report.trusted and report.passed == 0


def test_in_a_batch_only_the_programs_own_module_counts():
    """A batch's run names every test under the program's module; its prefix is dropped, and a
    test outside it is not the program's to report."""
    lines = [line.replace('"t"', '"m::t"').replace(f'"{SENTINEL}"', f'"m::{SENTINEL}"') for line in run()]
    report = read(lines, prefix="m::")
    assert report.trusted and report.passes == ("t",)
    lines.insert(3, '{ "type": "test", "event": "started", "name": "other::t" }')
    assert not read(lines, prefix="m::").trusted


def test_libtest_event_takes_exactly_libtests_shapes():
    assert libtest_event(b'{ "type": "test", "name": "a", "event": "failed", "stdout": "x", "message": "m" }')
    assert libtest_event(b'{ "type": "suite", "event": "started", "test_count": 3 }')
    assert libtest_event(b'{ "type": "suite", "event": "started", "test_count": -1 }') is None
    assert libtest_event(b'{ "type": "test", "event": "started", "name": "a", "stdout": "" }') is None
    assert libtest_event('{ "type": "test", "name": "\xff", "event": "ok" }'.encode("latin-1")) is None
