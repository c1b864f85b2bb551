"""The curated crate set by name: which crates graded programs may use, and where their sources come from.

A job's ``crates`` field, a dataset row's and an importer's checks read only these names; how the
set is built into rlibs and which crates a program links is ``crates``.
"""

from __future__ import annotations

from collections.abc import Iterable

# crate name (as code names it) -> (Debian package, cargo dependency extras)
CURATED: dict[str, tuple[str, str]] = {
    "itertools": ("librust-itertools-dev", ""),
    "lazy_static": ("librust-lazy-static-dev", ""),
    "md5": ("librust-md5-dev", ""),
    "num": ("librust-num-dev", ""),
    "once_cell": ("librust-once-cell-dev", ""),
    "rand": ("librust-rand-dev", ""),
    "regex": ("librust-regex-dev", ""),
    "serde": ("librust-serde-dev", ', features = ["derive"]'),  # needs librust-serde-derive-dev too
    "serde_json": ("librust-serde-json-dev", ""),
}
DEBIAN_PACKAGES = (*sorted({pkg for pkg, _ in CURATED.values()}), "librust-serde-derive-dev")


def normalize(name: str) -> str:
    """Code names crates with ``_``; packages and manifests often with ``-``."""
    return name.replace("-", "_")


def unknown_crates_message(names: Iterable[str]) -> str:
    """Why a job naming crates outside the set is refused, listing the set."""
    return f"crate(s) {', '.join(sorted(names))} not in the available set ({', '.join(CURATED)})"
