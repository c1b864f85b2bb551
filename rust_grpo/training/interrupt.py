"""Ctrl-C during training stops the run at the latest at the end of the current step.

Python turns SIGINT into a KeyboardInterrupt raised wherever the main thread happens to be. When
that is a finaliser (``__del__``, a weakref callback) CPython prints "Exception ignored" and drops
it, and so does any library code that swallows BaseException; the run then carries on as if Ctrl-C
had never been pressed. So the signal is also recorded, and a callback raises KeyboardInterrupt at
the next step boundary: however the first one was lost, the second reaches the CLI, which exits 130.
The SFT cold start, a loop of its own, checks the same record at each step (`raise_if_interrupted`).

A process that starts with SIGINT ignored (a shell's background job, `nohup`) keeps it ignored: that
is the caller's choice, not a lost signal. (It is also what made the Ctrl-C test fail in test suites
started in the background, 2026-12-06: the child inherited the ignored SIGINT; the tests now start
their runs as a terminal would.)
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from transformers import TrainerCallback


class StopOnInterrupt(TrainerCallback):
    """Raises KeyboardInterrupt at the end of a step once a SIGINT has been recorded."""

    def __init__(self) -> None:
        self.interrupted = False

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.interrupted:
            raise KeyboardInterrupt

    on_substep_end = on_step_end  # gradient accumulation: the same boundary, sooner


_active: StopOnInterrupt | None = None  # the one interrupt_at_step_end is recording into, if any


def raise_if_interrupted() -> None:
    """For loops outside the Trainer (the SFT cold start): the same step-end guard, so a Ctrl-C
    lost there stops the loop at its next step instead of after it has trained and cached a model."""
    if _active is not None and _active.interrupted:
        raise KeyboardInterrupt


@contextlib.contextmanager
def interrupt_at_step_end(stop: StopOnInterrupt) -> Iterator[None]:
    """While active, SIGINT both raises KeyboardInterrupt (as Python's own handler does) and sets
    ``stop.interrupted``. Only Python's default handler is replaced, and it is put back on exit: a
    SIGINT the caller ignores (a background job) or handles itself stays theirs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        yield
        return

    def record_and_raise(signum: int, frame: FrameType | None) -> None:
        stop.interrupted = True
        raise KeyboardInterrupt

    global _active
    signal.signal(signal.SIGINT, record_and_raise)
    _active = stop
    try:
        yield
    finally:
        _active = None
        signal.signal(signal.SIGINT, previous)
