"""Where the curated crates' sources come from: each crate's Debian package and the extras of its
cargo dependency line.

The set's names are the job contract's (``jobs.CURATED_CRATES``), which a job's ``crates``, a
dataset row's and an importer's checks read; how the set is built into rlibs and which crates a
program links is ``crates``.
"""

from __future__ import annotations

from ..jobs import CURATED_CRATES

_EXTRAS = {"serde": ', features = ["derive"]'}  # derive needs librust-serde-derive-dev too


def debian_package(name: str) -> str:
    """Debian's package of a crate's sources: ``librust-<name, with ->-dev``."""
    return f"librust-{name.replace('_', '-')}-dev"


# crate name (as code names it) -> (Debian package, cargo dependency extras)
CURATED: dict[str, tuple[str, str]] = {name: (debian_package(name), _EXTRAS.get(name, "")) for name in CURATED_CRATES}
DEBIAN_PACKAGES = (*sorted({pkg for pkg, _ in CURATED.values()}), "librust-serde-derive-dev")
