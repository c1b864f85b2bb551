"""A progress bar for long grading commands (``score``, ``eval``, ``data verify``, ``data filter``).

tqdm on stderr with a rate and an ETA; off when stderr is not a terminal or with ``--quiet``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any


class ProgressGrader:
    """Wraps a grader so that every graded job moves a bar; the results are the inner grader's."""

    def __init__(self, inner: Any, desc: str = "grading", enabled: bool | None = None) -> None:
        self.inner = inner
        self.desc = desc
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.level = getattr(inner, "level", "")

    def grade(self, items: Sequence[Any]) -> list[Any]:
        if not self.enabled or not items:
            return list(self.inner.grade(items))
        from tqdm import tqdm

        sized = _sized_terminal()
        shape = {"dynamic_ncols": True} if sized else {"ncols": 80, "nrows": 24}  # tqdm hides a bar past row 0
        with tqdm(total=len(items), desc=self.desc, unit="job", file=sys.stderr, **shape) as bar:
            try:
                return list(self.inner.grade(items, on_result=lambda _i, _r: bar.update(1)))
            except TypeError:  # a grader without progress callbacks (the HTTP client)
                results = list(self.inner.grade(items))
                bar.update(len(items))
                return results

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> ProgressGrader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sized_terminal() -> bool:
    """Whether stderr's terminal reports its size. A pty nobody sized (`script`, some CI and remote
    consoles) reports 0 x 0, and tqdm then draws nothing at all: such a terminal gets a fixed 80 x 24."""
    import os

    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return size.columns > 0 and size.lines > 0


def command_grader(args: Any, desc: str = "grading") -> ProgressGrader:
    """The grader a command line asks for (``--isolation``, ``--workers``, ``--timeout``, ``--quiet``),
    with a progress bar: one place for ``score``, ``eval``, ``eval --repair-turns`` and ``data``."""
    from reward_sandbox import Settings, open_grader

    settings = Settings(isolation=getattr(args, "isolation", "auto"), workers=getattr(args, "workers", 0) or 0)
    grader = open_grader(settings.with_run_timeout(getattr(args, "timeout", 10.0)))
    return ProgressGrader(grader, desc, enabled=False if getattr(args, "quiet", False) else None)
