"""What both command lines share: one-line usage errors, defaults in ``--help``, checked numbers,
lists of server URLs.

Every expected mistake on a command line gets one line on stderr naming the option and the reason,
and exit code 2, before any work starts; a number outside its range is such a mistake, never
silently replaced by a default.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` shows each option's default, except for flags and options without one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        unset = default is None or default is False or default is argparse.SUPPRESS or default == []
        if "%(default)" in text or unset or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``prog: error: ...``) and exit 2."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer ``>= low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, high]``."""
    at_least = int_at_least(low)

    def parse(text: str) -> int:
        value = at_least(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"{value} is above {high}")
        return value

    parse.__name__ = f"integer in [{low}, {high}]"
    return parse


def float_in(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value > high or value < low or (low_open and value == low):
            raise argparse.ArgumentTypeError(f"{text} is outside {'(' if low_open else '['}{low:g}, {high:g}]")
        return value

    parse.__name__ = f"number in {'(' if low_open else '['}{low:g}, {high:g}]"
    return parse


def split_urls(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"http://a:8808, http://b:8808"`` or a list of URLs -> a tuple of URLs without trailing slashes:
    ``--server`` and a config's server URL say it the same way the HTTP client takes it."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    return tuple(p.strip().rstrip("/") for p in parts if p.strip())
