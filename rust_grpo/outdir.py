"""Output folders a command may write into, and the rule that keeps users' files safe.

A command never deletes or overwrites what it did not create. Each output folder it makes gets a
marker file naming the kind of output it holds (a training run, a report) and listing the files the
command wrote there (its manifest). A later command writes into a folder only when it is new, empty
(the marker aside), or marked with the same kind, and then only to continue it (``resume``) or to
replace it (``overwrite``), both asked for explicitly. ``overwrite`` deletes the files the manifest
lists and nothing else: a file the user put in the folder stays, and the command says so. Anything
else is refused before any work starts, so a late failure never costs the work either.

The manifest is "every file in the folder that was not there when the command claimed it", written
by :func:`record_outputs` when the command ends (also on an error or Ctrl-C) and at each training
step, log and checkpoint, so a run killed outright loses at most the files written since from the
list: they are then kept, never deleted, by a later ``overwrite`` (and ``--resume`` takes only the
checkpoints the list holds, so never one cut off mid-save). Residual: a file the user puts into the
folder *while* the command runs joins its manifest; a nested output folder (``eval --out run/eval``)
never does, since it has a marker of its own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reward_sandbox.outfiles import OutputPathError, check_writable, write_text

MARKER = ".rust-grpo-output"
KINDS = ("run", "report")  # run: train, demo; report: score, eval
# Top-level names each kind writes (a trailing * is a prefix). A file of the user's under one of them
# would be written over or rotated away (transformers deletes old checkpoint-* folders), so a folder
# holding one is refused rather than kept.
WRITES = {
    "run": ("README.md", "config.json", "metrics.jsonl", "samples.jsonl", "episodes.jsonl", "canaries.jsonl",
            "summary.md", "training_curves.png", "final", "runs", "checkpoint-*"),
    "report": ("report.md", "report.json", "report.png", "results.jsonl", "completions.jsonl"),
}  # fmt: skip

log = logging.getLogger(__name__)


def _read_marker(path: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads((Path(path) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and isinstance(marker.get("kind"), str) else None


def marked_kind(path: Path) -> str | None:
    """The kind of rust-grpo output ``path`` holds, or None when it holds none (or is no folder)."""
    marker = _read_marker(path)
    return None if marker is None else str(marker["kind"])


def _files(path: Path) -> set[str]:
    """Every file (and link) under ``path``, relative, the marker and its temporary copies aside, and
    nothing inside a nested output folder (another command's, with its own marker)."""
    nested = [p.parent for p in path.rglob(MARKER) if p.parent != path]
    return {
        p.relative_to(path).as_posix()
        for p in path.rglob("*")
        if (p.is_symlink() or not p.is_dir())
        and not p.name.startswith((MARKER, f".{MARKER}"))
        and not any(n in p.parents for n in nested)
    }


def _clashes(kind: str, foreign: set[str]) -> list[str]:
    """The user's top-level entries that this kind of command writes under the same name."""
    tops = {Path(name).parts[0] for name in foreign}
    return sorted(top for top in tops for w in WRITES[kind] if top == w or (w.endswith("*") and top.startswith(w[:-1])))


def _write_marker(path: Path, kind: str, files: set[str], foreign: set[str]) -> None:
    marker = {"kind": kind, "files": sorted(files), "foreign": sorted(foreign)}
    write_text(path / MARKER, json.dumps(marker, indent=0) + "\n")


def _inside(path: Path, name: str) -> bool:
    """Whether ``name`` is a plain relative path under ``path`` that passes through no link: a marker
    edited by hand (``../x``, ``/etc/x``), or a folder of ours the user replaced with a link to one of
    theirs, must never lead a deletion outside the folder."""
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or any(p in ("", ".", "..") for p in parts):
        return False
    return not any((path / Path(*parts[:i])).is_symlink() for i in range(1, len(parts)))


def _delete_listed(path: Path, listed: set[str]) -> None:
    """Delete the listed files under ``path``, then the folders that held them once they are empty."""
    parents: set[Path] = set()
    for name in listed:
        target = path / name
        if not _inside(path, name):
            continue
        if target.is_symlink() or target.is_file():
            target.unlink()
            parents.update(p for p in target.parents if p != path and path in p.parents)
    for folder in sorted(parents, key=lambda p: len(p.parts), reverse=True):
        if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()


def claim_output_dir(
    path: Path, kind: str, *, resume: bool = False, overwrite: bool = False, can_resume: bool = True
) -> Path:
    """Make ``path`` this command's output folder of ``kind``, or raise :class:`OutputPathError`.

    New or empty (the marker aside): created and marked. Marked with ``kind``: kept as it is with
    ``resume``; with ``overwrite``, the files its manifest lists are deleted and any others kept (and
    named in a warning); refused otherwise. Anything else (the user's files, another kind of output,
    a file where the folder should be) is refused, with or without ``overwrite``. ``can_resume``:
    whether the command has a ``--resume`` to suggest (``demo`` has none).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown output kind {kind!r}")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{path}: is a file, not a folder; choose a folder for the {kind}")
    present = _files(path) if path.is_dir() else set()
    foreign: set[str] = set()
    if present:
        marker = _read_marker(path)
        if marker is None:
            raise OutputPathError(
                f"{path}: not empty and not a rust-grpo output folder (nothing there was touched); "
                "choose a new or empty folder"
            )
        if marker["kind"] != kind:
            raise OutputPathError(f"{path}: holds a rust-grpo {marker['kind']}, not a {kind}; choose another folder")
        check_writable(path)
        ours = {f for f in marker.get("files", []) if isinstance(f, str)} & present
        foreign = present - ours
        if clash := _clashes(kind, foreign):
            raise OutputPathError(
                f"{path}: holds {', '.join(clash)} with files its manifest does not list (yours, or a save cut off "
                f"by a kill), where a {kind} writes; move or delete it yourself (nothing was touched)"
            )
        if resume:
            _write_marker(path, kind, ours, foreign)
            return path
        if not overwrite:
            more = " --resume to continue it, or" if kind == "run" and can_resume else ""
            raise OutputPathError(f"{path}: holds an earlier {kind}; pass{more} --overwrite to replace it")
        if "files" not in marker:
            raise OutputPathError(
                f"{path}: written by an older rust-grpo that kept no list of its files, so --overwrite cannot "
                "tell them from yours; delete what you no longer need there yourself, or choose another folder"
            )
        _delete_listed(path, ours)
        if foreign:
            shown = ", ".join(sorted(foreign)[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            log.warning("%s: kept %d file(s) rust-grpo did not write: %s", path, len(foreign), shown)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot create it ({exc.strerror or exc}); choose another folder") from None
    check_writable(path)
    _write_marker(path, kind, set(), foreign)
    return path


def recorded_files(path: Path) -> set[str] | None:
    """The files ``path``'s manifest lists, or None for a folder without one (made before manifests)."""
    marker = _read_marker(path)
    if marker is None or "files" not in marker:
        return None
    return {f for f in marker["files"] if isinstance(f, str)}


def record_outputs(path: Path) -> None:
    """List in the marker every file now in ``path`` that was not there when it was claimed.

    Safe to call any number of times (it only adds); a folder without a marker is left alone."""
    path = Path(path)
    marker = _read_marker(path)
    if marker is None or not path.is_dir():
        return
    foreign = {f for f in marker.get("foreign", []) if isinstance(f, str)}
    _write_marker(path, str(marker["kind"]), _files(path) - foreign, foreign)


@contextmanager
def output_dir(path: Path, kind: str, *, resume: bool = False, overwrite: bool = False) -> Iterator[Path]:
    """:func:`claim_output_dir`, then :func:`record_outputs` when the block ends, however it ends."""
    out = claim_output_dir(path, kind, resume=resume, overwrite=overwrite)
    try:
        yield out
    finally:
        record_outputs(out)
