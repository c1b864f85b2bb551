"""A grading job: what to compile and which tests to run, validated before anything runs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

# The curated crate set by name, as code names each crate: what a job's ``crates`` may list. The
# names are part of the contract; where each crate's sources come from and how the set is built
# are the compiler's side (``compile/crateset.py``, ``compile/crates.py``), which reads them here.
CURATED_CRATES = ("itertools", "lazy_static", "md5", "num", "once_cell", "rand", "regex", "serde", "serde_json")
_CRATE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_EDITIONS = ("2015", "2018", "2021", "2024")
MAX_SOURCE_BYTES = 512 * 1024
MAX_TIMEOUT_S = 300.0


class TestMode(str, Enum):
    """How a job's ``tests`` are joined to its ``source``."""

    __test__ = False  # not a pytest test class

    UNIT = "unit"  # tests become a module of the crate with `use super::*`
    INTEGRATION = "integration"  # tests are a separate crate that does `use <crate_name>::*` (Exercism)
    MAIN = "main"  # tests are a `fn main` full of asserts (MultiPL-E)


class InvalidCrate(ValueError):
    """A ``crates`` list or a ``crate_name`` the sandbox cannot build. The message says what is wrong
    but not where: the caller (a job record, a dataset row, a config key) adds that."""


def normalize_crate(name: str) -> str:
    """Code names crates with ``_``; packages and manifests often with ``-``."""
    return name.replace("-", "_")


def check_crates(value: Any) -> tuple[str, ...]:
    """A ``crates`` list (a job's, a dataset row's) as the set's names, sorted and unique so equal
    sets give equal cache and batch keys; ``None`` is none. The one check for every caller, so a
    dataset row with a typo fails at load time with the words a job with it would fail with.
    A name outside the set is the input's fault: :class:`InvalidCrate`, listing the set."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise InvalidCrate("'crates' must be a list of crate names")
    names = {normalize_crate(v) for v in value}
    unknown = names - set(CURATED_CRATES)
    if unknown:
        raise InvalidCrate(
            f"crate(s) {', '.join(sorted(unknown))} not in the available set ({', '.join(CURATED_CRATES)})"
        )
    return tuple(sorted(names))


def check_crate_name(name: Any) -> str:
    """A ``crate_name`` as the crate is built: a Rust identifier, ``-`` allowed (Cargo's package
    names) and spelt ``_``, the way tests that ``use <crate_name>::*`` name it. Else :class:`InvalidCrate`."""
    if not isinstance(name, str) or not _CRATE_NAME.match(name):
        raise InvalidCrate(f"'crate_name' must be a Rust identifier, got {name!r}")
    return normalize_crate(name)


class InvalidJob(ValueError):
    """A job record that cannot be graded; the message names the record, the field and the reason."""

    def __init__(self, message: str, job_id: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id


@dataclass(frozen=True)
class Job:
    """One program to grade. ``source`` is a Rust library; it may hold its own tests."""

    id: str
    source: str
    tests: str = ""
    test_mode: TestMode = TestMode.UNIT
    crate_name: str = "solution"
    timeout_s: float | None = None
    edition: str = "2021"
    include_ignored: bool = False
    opt_level: int = 0  # 0 = debug build (fast to compile); 2-3 for suites meant to run in release mode
    allow_unsafe: bool = False  # `unsafe` is forbidden by default: FFI could take over the harness's output
    crates: tuple[str, ...] = ()  # crates of the curated set (crates.py) linked even when the code names none

    def __post_init__(self) -> None:
        # one spelling per set (sorted, unique, hashable): equal sets give equal cache and batch keys
        object.__setattr__(self, "crates", tuple(sorted({normalize_crate(c) for c in self.crates})))

    @property
    def has_tests(self) -> bool:
        """Whether any `#[test]` can exist; without one the harness only type-checks."""
        return "#[test]" in self.source or bool(self.tests.strip())

    @classmethod
    def from_dict(cls, record: Any, index: int | None = None) -> Job:
        """Build a job from a JSON record, raising :class:`InvalidJob` with a reason."""
        where = f"record {index}" if index is not None else "record"
        if not isinstance(record, dict):
            raise InvalidJob(f"{where}: expected a JSON object, got {type(record).__name__}")
        job_id = record.get("id", f"#{index}" if index is not None else "")
        if not isinstance(job_id, (str, int)) or str(job_id) == "":
            raise InvalidJob(f"{where}: 'id' must be a non-empty string")
        where = f"record {index} (id={job_id!s})" if index is not None else f"job {job_id!s}"
        try:
            return cls._parse(record, str(job_id), where)
        except InvalidJob as exc:
            exc.job_id = str(job_id)
            raise

    @classmethod
    def _parse(cls, record: dict[str, Any], job_id: str, where: str) -> Job:

        def text(name: str, required: bool) -> str:
            value = record.get(name)
            if value is None:
                if required:
                    raise InvalidJob(f"{where}: missing required field '{name}'")
                return ""
            if not isinstance(value, str):
                raise InvalidJob(f"{where}: '{name}' must be a string, got {type(value).__name__}")
            try:
                size = len(value.encode())
            except UnicodeEncodeError:
                raise InvalidJob(f"{where}: '{name}' is not valid Unicode (a lone surrogate?)") from None
            if size > MAX_SOURCE_BYTES:
                raise InvalidJob(f"{where}: '{name}' is larger than {MAX_SOURCE_BYTES} bytes")
            if "\x00" in value:
                raise InvalidJob(f"{where}: '{name}' contains a NUL byte")
            return value

        source = text("source", required=True)
        if not source.strip():
            raise InvalidJob(f"{where}: 'source' is empty")
        tests = text("tests", required=False)
        mode_value = record.get("test_mode", TestMode.UNIT.value)
        try:
            mode = TestMode(mode_value)
        except ValueError:
            choices = ", ".join(m.value for m in TestMode)
            raise InvalidJob(f"{where}: 'test_mode' must be one of {choices}, got {mode_value!r}") from None
        if mode is not TestMode.UNIT and not tests.strip():
            raise InvalidJob(f"{where}: test_mode '{mode.value}' needs non-empty 'tests'")
        try:
            crate_name = check_crate_name(record.get("crate_name") or "solution")
        except InvalidCrate as exc:
            raise InvalidJob(f"{where}: {exc}") from None
        timeout = record.get("timeout_s")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT_S
        ):
            raise InvalidJob(f"{where}: 'timeout_s' must be a number in (0, {MAX_TIMEOUT_S:g}], got {timeout!r}")
        edition = record.get("edition", "2021")
        edition = str(edition) if isinstance(edition, (str, int)) and not isinstance(edition, bool) else repr(edition)
        if edition not in _EDITIONS:
            raise InvalidJob(f"{where}: 'edition' must be one of {', '.join(_EDITIONS)}, got {edition!r}")
        opt_level = record.get("opt_level", 0)
        if isinstance(opt_level, bool) or opt_level not in (0, 1, 2, 3):
            raise InvalidJob(f"{where}: 'opt_level' must be 0, 1, 2 or 3, got {opt_level!r}")
        include_ignored = record.get("include_ignored", False)
        if not isinstance(include_ignored, bool):
            raise InvalidJob(f"{where}: 'include_ignored' must be true or false")
        allow_unsafe = record.get("allow_unsafe", False)
        if not isinstance(allow_unsafe, bool):
            raise InvalidJob(f"{where}: 'allow_unsafe' must be true or false")
        try:
            crates = check_crates(record.get("crates"))
        except InvalidCrate as exc:
            raise InvalidJob(f"{where}: {exc}") from None
        return cls(
            crates=crates,
            id=job_id,
            source=source,
            tests=tests,
            test_mode=mode,
            crate_name=crate_name,
            timeout_s=float(timeout) if timeout is not None else None,
            edition=edition,
            include_ignored=include_ignored,
            opt_level=opt_level,
            allow_unsafe=allow_unsafe,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "source": self.source, "test_mode": self.test_mode.value}
        if self.tests:
            out["tests"] = self.tests
        if self.crate_name != "solution":
            out["crate_name"] = self.crate_name
        if self.timeout_s is not None:
            out["timeout_s"] = self.timeout_s
        if self.edition != "2021":
            out["edition"] = self.edition
        if self.include_ignored:
            out["include_ignored"] = True
        if self.opt_level:
            out["opt_level"] = self.opt_level
        if self.allow_unsafe:
            out["allow_unsafe"] = True
        if self.crates:
            out["crates"] = list(self.crates)
        return out
