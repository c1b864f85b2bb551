"""Output files: checked before the work, written whole or not at all, never over the user's own.

A command that grades for minutes must not learn only at the end that it cannot write its output,
and must not replace a file the user did not ask it to replace.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


class OutputPathError(ValueError):
    """An output path that cannot be used; the message names the path and what to do."""


def check_writable(folder: Path) -> None:
    """Raise :class:`OutputPathError` unless a file can be created in ``folder``."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise OutputPathError(f"{folder}: cannot write there ({exc.strerror or exc}); choose another place") from None


def check_output_file(path: Path, *, overwrite: bool = False) -> Path:
    """Refuse, before any work, an output file that exists (without ``overwrite``) or cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"{path}: is a folder; give a file name for the output")
    if path.exists() and not overwrite:
        raise OutputPathError(f"{path}: exists; pass --overwrite to replace it, or choose another name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(
            f"{path.parent}: cannot create it ({exc.strerror or exc}); choose another place"
        ) from None
    check_writable(path.parent)
    return path


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary name, so a reader never sees half a file and a
    failure leaves any earlier file as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; an output is as readable as any file the user makes
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask, read without setting it (os.umask would change it for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_lines(path: Path, lines: Iterable[str]) -> None:
    """``lines`` (without their newlines) to ``path``, whole or not at all (see :func:`write_text`)."""
    write_text(path, "".join(line + "\n" for line in lines))
