"""Where reward_sandbox keeps its files on the host: results, the crate set's build, helper binaries.

A module of its own, importing nothing of the package, so that the compile and isolation layers
ask for the directory without importing the result cache that sits above them."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$REWARD_SANDBOX_CACHE``, else ``reward-sandbox`` in ``$XDG_CACHE_HOME`` (``~/.cache``)."""
    base = os.environ.get("REWARD_SANDBOX_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "reward-sandbox"
    )
    return Path(base)
