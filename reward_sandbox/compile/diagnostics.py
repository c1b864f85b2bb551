"""Parse rustc's JSON diagnostics (``--error-format=json`` or cargo's ``compiler-message``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from ..results import Diagnostic

_NOISE_PREFIXES = ("aborting due to", "For more information about", "Some errors have detailed")
MAX_RENDERED = 2000
_SUMMARY = re.compile(r"^\d+ warnings? emitted|generated \d+ warnings?")


def counted_messages(output: bytes) -> Iterator[tuple[str, dict[str, Any]]]:
    """(raw JSON line, diagnostic) for each error or warning in compiler output that a verdict
    counts: summaries ("aborting due to", "N warnings emitted") are left out."""
    for raw in output.decode(errors="replace").splitlines():
        raw = raw.strip()
        if not raw.startswith("{"):
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if data.get("reason") == "compiler-message":
            data = data.get("message", {})
        if data.get("$message_type", "diagnostic") != "diagnostic" or data.get("level") not in ("error", "warning"):
            continue
        message = data.get("message", "")
        if message.startswith(_NOISE_PREFIXES) or _SUMMARY.search(message):
            continue
        yield raw, data


def primary_span(diag: dict[str, Any]) -> dict[str, Any] | None:
    """The span a diagnostic points at (its primary one, else its first)."""
    spans = diag.get("spans") or []
    return next((s for s in spans if s.get("is_primary")), spans[0] if spans else None)


def parse_diagnostics(output: bytes, skip_files: frozenset[str] = frozenset()) -> list[Diagnostic]:
    """Errors and warnings from compiler output, dropping summaries and messages located in
    ``skip_files`` (our generated test and sentinel files, which the program did not write)."""
    found: list[Diagnostic] = []
    for _, data in counted_messages(output):
        primary = primary_span(data)
        file = primary.get("file_name", "") if primary else ""
        if file.rsplit("/", 1)[-1] in skip_files:
            continue
        code = (data.get("code") or {}).get("code")
        found.append(
            Diagnostic(
                level=data["level"],
                code=code,
                message=data.get("message", ""),
                line=primary.get("line_start") if primary else None,
                file=file.rsplit("/", 1)[-1],
                rendered=(data.get("rendered") or "")[:MAX_RENDERED],
            )
        )
    return found


def dedupe(diags: list[Diagnostic]) -> list[Diagnostic]:
    """The same message can come from several compilations (cargo's lib and test targets)."""
    seen: set[tuple[str, str | None, str, int | None]] = set()
    out = []
    for d in diags:
        key = (d.level, d.code, d.message, d.line)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out
