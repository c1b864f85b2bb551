"""Parse rustc's JSON diagnostics (``--error-format=json`` or cargo's ``compiler-message``)."""

from __future__ import annotations

import json
import re

from .results import Diagnostic

_NOISE_PREFIXES = ("aborting due to", "For more information about", "Some errors have detailed")
MAX_RENDERED = 2000
_SUMMARY = re.compile(r"^\d+ warnings? emitted|generated \d+ warnings?")


def parse_diagnostics(output: bytes, skip_files: frozenset[str] = frozenset()) -> list[Diagnostic]:
    """Errors and warnings from compiler output, dropping summaries and messages located in
    ``skip_files`` (our generated test and sentinel files, which the program did not write)."""
    found: list[Diagnostic] = []
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
        if data.get("$message_type", "diagnostic") != "diagnostic" or "level" not in data:
            continue
        level = data["level"]
        message = data.get("message", "")
        if level not in ("error", "warning") or message.startswith(_NOISE_PREFIXES):
            continue
        if _SUMMARY.search(message):
            continue
        spans = data.get("spans") or []
        primary = next((s for s in spans if s.get("is_primary")), spans[0] if spans else None)
        file = primary.get("file_name", "") if primary else ""
        if file.rsplit("/", 1)[-1] in skip_files:
            continue
        code = (data.get("code") or {}).get("code")
        found.append(
            Diagnostic(
                level=level,
                code=code,
                message=message,
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
