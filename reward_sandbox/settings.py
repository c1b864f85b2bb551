"""Everything a grader is opened with, defined and validated once.

Both CLIs, the HTTP server and ``rust_grpo``'s ``[reward]`` table build a :class:`Settings` and
call :func:`open_grader`; a bad value fails here, at load time, with the field's name, instead of
turning every job into ``invalid_input`` later.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

from .backends import BACKENDS, FAST
from .isolation.levels import CHOICES as ISOLATION_CHOICES
from .isolation.limits import Limits
from .jobs import MAX_TIMEOUT_S, InvalidJob, Job
from .results import Result


class GraderLike(Protocol):
    """What rewards and scoring need from a grader: the local :class:`~reward_sandbox.Grader`, the HTTP
    :class:`~reward_sandbox.service.client.RemoteGrader`, or anything else with this shape."""

    def grade(self, items: Sequence[Job | dict[str, Any] | InvalidJob]) -> list[Result]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...


def _f(default: Any, help: str, **kwargs: Any) -> Any:
    if callable(default) and not isinstance(default, (str, int, float)):
        return field(default_factory=default, metadata={"help": help}, **kwargs)
    return field(default=default, metadata={"help": help}, **kwargs)


@dataclass(frozen=True)
class Settings:
    """How to grade: where (local pool or servers), how isolated, with which limits and cache."""

    isolation: str = _f(
        "auto", "auto (bubblewrap, else the rlimits fallback, said loudly), strict (bubblewrap or fail), rlimits"
    )
    backend: str = _f(FAST, "fast (clippy-driver + test binary, no cargo) or cargo (real cargo build/clippy/test)")
    workers: int = _f(
        0, "parallel jobs (0 = all cores, divided among the ranks of a multi-process launch on this node)"
    )
    batch: bool = _f(
        True,
        "grade jobs that share tests and settings in one compiler run (same verdicts as alone; bubblewrap + fast only)",
    )
    limits: Limits = _f(Limits, "resource limits of every job (see Limits)")
    cache_dir: str = _f("", "on-disk result cache directory ('' = in memory only)")
    cache_memory_mb: float = _f(64.0, "in-memory result cache size in MB (results held as JSON text)")
    cache_disk_mb: float = _f(1024.0, "on-disk result cache bound in MB (the least recently used results go first)")
    server_urls: tuple[str, ...] = _f(
        (), "grade on these `reward-sandbox serve` URLs instead of a local pool (a batch is spread over them)"
    )
    server_token_env: str = _f("REWARD_SANDBOX_TOKEN", "environment variable holding the servers' bearer token")
    server_timeout_s: float = _f(300.0, "HTTP timeout for one batch")
    server_retries: int = _f(2, "retries of a failed batch before its results become sandbox errors")

    def __post_init__(self) -> None:
        if self.isolation not in (*ISOLATION_CHOICES, "bwrap"):
            raise ValueError(f"isolation must be one of {', '.join(ISOLATION_CHOICES)}, got {self.isolation!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ValueError(f"workers must be 0 (all cores) or a positive integer, got {self.workers!r}")
        if not isinstance(self.batch, bool):
            raise ValueError(f"batch must be true or false, got {self.batch!r}")
        if not isinstance(self.limits, Limits):
            raise ValueError("limits must be a Limits")
        if self.limits.run_cpu_s > MAX_TIMEOUT_S:
            raise ValueError(
                f"the test run's CPU time must be at most {MAX_TIMEOUT_S:g} s, got {self.limits.run_cpu_s}"
            )
        if not self.cache_memory_mb >= 0:
            raise ValueError(f"cache_memory_mb must be at least 0, got {self.cache_memory_mb!r}")
        if not self.cache_disk_mb > 0:
            raise ValueError(f"cache_disk_mb must be positive, got {self.cache_disk_mb!r}")
        if self.server_timeout_s <= 0 or self.server_retries < 0:
            raise ValueError("server_timeout_s must be positive and server_retries at least 0")

    def with_run_timeout(self, timeout_s: float) -> Settings:
        """The same settings with the test run limited to ``timeout_s`` CPU seconds (wall: twice that)."""
        if not 0 < timeout_s <= MAX_TIMEOUT_S:
            raise ValueError(f"the test timeout must be in (0, {MAX_TIMEOUT_S:g}] seconds, got {timeout_s!r}")
        return replace(self, limits=self.limits.with_run_timeout(timeout_s))

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata["help"] for f in fields(cls)}


def add_arguments(parser: argparse.ArgumentParser, *, local_only: bool = False) -> None:
    """The grading options of a command line, with the help text of :class:`Settings`."""
    helps = Settings.help()
    from dataclasses import fields

    from .cliargs import float_in, int_at_least

    parser.add_argument("--workers", "-j", type=int_at_least(0), default=0, help=helps["workers"])
    parser.add_argument("--isolation", choices=ISOLATION_CHOICES, default="auto", help=helps["isolation"])
    parser.add_argument("--backend", choices=BACKENDS, default=FAST, help=helps["backend"])
    parser.add_argument(
        "--no-batch", action="store_true", help="grade every job alone (batching: " + helps["batch"] + ")"
    )
    keys = ", ".join(f"{f.name} ({f.default})" for f in fields(Limits))
    parser.add_argument(
        "--limits", default=None, help=f"JSON object overriding limits, e.g. '{{\"run_cpu_s\": 5}}'; keys: {keys}"
    )
    parser.add_argument("--cache-dir", default=None, help=helps["cache_dir"] + " (default: ~/.cache/reward-sandbox)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the on-disk result cache")
    parser.add_argument("--cache-memory-mb", type=float_in(0, 1 << 20), default=64.0, help=helps["cache_memory_mb"])
    parser.add_argument("--cache-disk-mb", type=float_in(0, 1 << 24), default=1024.0, help=helps["cache_disk_mb"])
    if not local_only:
        parser.add_argument("--server", action="append", default=[], help=helps["server_urls"] + " (repeatable)")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """:class:`Settings` from the options :func:`add_arguments` added."""
    import json

    from .cachedir import default_cache_dir
    from .cliargs import split_urls

    limits = Limits()
    if getattr(args, "limits", None):
        try:
            limits = Limits.from_dict(json.loads(args.limits))
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"--limits {args.limits!r}: not JSON ({exc.msg}); give an object such as '{{\"run_cpu_s\": 5}}'"
            ) from None
        except (ValueError, TypeError, AttributeError) as exc:
            raise ValueError(f"--limits {args.limits!r}: {exc}") from None
    cache_dir = "" if getattr(args, "no_cache", False) else str(getattr(args, "cache_dir", None) or default_cache_dir())
    return Settings(
        isolation=args.isolation,
        backend=args.backend,
        workers=args.workers or 0,
        batch=not getattr(args, "no_batch", False),
        limits=limits,
        cache_dir=cache_dir,
        cache_memory_mb=getattr(args, "cache_memory_mb", 64.0),
        cache_disk_mb=getattr(args, "cache_disk_mb", 1024.0),
        server_urls=tuple(u for given in getattr(args, "server", ()) or () for u in split_urls(given)),
    )


def open_grader(settings: Settings) -> GraderLike:
    """The one way to open a grader: the HTTP client when servers are set, else a local pool."""
    if settings.server_urls:
        from .service.client import RemoteGrader

        return RemoteGrader(
            settings.server_urls,
            token_env=settings.server_token_env,
            timeout_s=settings.server_timeout_s,
            retries=settings.server_retries,
        )
    from .cache import ResultCache
    from .grader import Grader

    cache = ResultCache(
        Path(settings.cache_dir) if settings.cache_dir else None,
        memory_bytes=int(settings.cache_memory_mb * 1024 * 1024),
        disk_bytes=max(1, int(settings.cache_disk_mb * 1024 * 1024)),
    )
    return Grader(
        workers=settings.workers or None,
        isolation=settings.isolation,
        backend=settings.backend,
        limits=settings.limits,
        cache=cache,
        batch=settings.batch,
    )
