"""Output folders a command may write into, and the rule that keeps users' files safe.

A command never deletes or overwrites what it did not create. Each output folder it makes gets a
marker file naming the kind of output it holds (a training run, a report); a later command writes
into a folder only when it is new, empty, or marked with the same kind, and then only to continue
it (``resume``) or to replace it (``overwrite``), both asked for explicitly. Anything else is
refused before any work starts, so a late failure never costs the work either.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from reward_sandbox.outfiles import OutputPathError, check_writable, write_text

MARKER = ".rust-grpo-output"
KINDS = ("run", "report")  # run: train, demo; report: score, eval


def marked_kind(path: Path) -> str | None:
    """The kind of rust-grpo output ``path`` holds, or None when it holds none (or is no folder)."""
    try:
        return str(json.loads((Path(path) / MARKER).read_text(encoding="utf-8"))["kind"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def claim_output_dir(path: Path, kind: str, *, resume: bool = False, overwrite: bool = False) -> Path:
    """Make ``path`` this command's output folder of ``kind``, or raise :class:`OutputPathError`.

    New or empty: created and marked. Marked with ``kind``: kept as it is with ``resume``, emptied
    with ``overwrite``, refused otherwise. Anything else (the user's files, another kind of output,
    a file where the folder should be) is refused, with or without ``overwrite``.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown output kind {kind!r}")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{path}: is a file, not a folder; choose a folder for the {kind}")
    if path.is_dir() and any(path.iterdir()):
        marked = marked_kind(path)
        if marked is None:
            raise OutputPathError(
                f"{path}: not empty and not a rust-grpo output folder (nothing there was touched); "
                "choose a new or empty folder"
            )
        if marked != kind:
            raise OutputPathError(f"{path}: holds a rust-grpo {marked}, not a {kind}; choose another folder")
        check_writable(path)
        if resume:
            return path
        if not overwrite:
            more = " --resume to continue it, or" if kind == "run" else ""
            raise OutputPathError(f"{path}: holds an earlier {kind}; pass{more} --overwrite to replace it")
        for entry in path.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot create it ({exc.strerror or exc}); choose another folder") from None
    check_writable(path)
    write_text(path / MARKER, json.dumps({"kind": kind}) + "\n")
    return path
