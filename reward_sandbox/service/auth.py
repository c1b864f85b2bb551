"""The reward server's bearer token: read from an environment variable or a file, never argv.

A token on the command line is visible to every local user in ``ps``; the variable ``NAME`` holds
the token itself and ``NAME_FILE`` names a file holding it (Docker/Kubernetes secrets).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("reward_sandbox")


class TokenError(ValueError):
    """The token source is set but unusable (missing or empty file)."""


def read_token_file(path: str | Path) -> str:
    """The stripped contents of ``path``; an empty or unreadable file is an error, not "no token"."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TokenError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    if not token:
        raise TokenError(f"the token file {path} is empty")
    mode = stat.S_IMODE(Path(path).stat().st_mode)
    if mode & 0o077:  # a secret the group or everyone can read
        log.warning("the token file %s can be read by other users (mode %o); chmod 600 it", path, mode)
    return token


def token_from_env(name: str = "REWARD_SANDBOX_TOKEN") -> str | None:
    """``$NAME``, else the contents of the file named by ``$NAME_FILE``, else None."""
    value = os.environ.get(name)
    if value:
        return value
    path = os.environ.get(f"{name}_FILE")
    return read_token_file(path) if path else None
