"""Files shipped inside the package (``data/...``, ``configs/...``), found from any directory.

A leaf: the config loader (presets) and the problem loader (datasets) both resolve names here.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent  # rust_grpo/: its data/ and configs/


def shipped_path(spec: str) -> Path:
    """``spec`` itself when it exists; else the copy shipped inside the package (``data/...`` and
    ``configs/...``), so presets work from any directory and from an installed wheel."""
    path = Path(spec)
    if path.exists() or path.is_absolute():
        return path
    shipped = PACKAGE_DIR / path
    return shipped if shipped.exists() else path
