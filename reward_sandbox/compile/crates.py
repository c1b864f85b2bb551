"""The curated crate set graded programs may use, built once per toolchain into rlibs.

Real Rust uses crates, but the sandbox has no network and must stay fast. Debian ships crate
sources as ``librust-<name>-dev`` packages under ``/usr/share/cargo/registry``; this module turns
the curated set's sources (``crateset``) into rlibs once (one host-side ``cargo build --offline`` with a
directory-source replacement), keeps them in ``crates-<key>/`` next to the result cache, and hands
out the ``--extern`` / ``-L dependency=`` flags that link a program against them, so a
crate-using program costs about what a std-only one does.

- ``key`` covers the toolchain, every crate version in the registry and this recipe: a verdict
  or rlib built with other crate versions is never reused (``cache.job_key`` takes it too).
- the build happens in a temporary directory renamed into place, under a file lock, so two
  workers (or two processes) never build it twice and nobody sees a half-built set.
- ``crates-<key>/`` holds the rlibs (``lib/``), the vendored sources of exactly the set's
  dependency closure (``vendor/``, for the cargo backend's source replacement) and
  ``cargo-config.toml``; the sandbox binds this directory read-only at its host path (so the same
  flags hold inside and outside it) and reads nothing else of the registry.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..cachedir import default_cache_dir
from ..jobs import normalize_crate
from .crateset import CURATED, DEBIAN_PACKAGES
from .lexer import LexError, code_only

if TYPE_CHECKING:
    from ..jobs import Job

REGISTRY = Path(os.environ.get("REWARD_SANDBOX_CRATE_REGISTRY", "/usr/share/cargo/registry"))
RECIPE_VERSION = "1"  # bump when the build below changes what the rlibs are
BUILD_TIMEOUT_S = 1800.0


class CratesUnavailable(RuntimeError):
    """The crate set cannot be built here (packages missing, build failed); not the program's fault."""


# --- which crates a program uses ------------------------------------------------------------------

_NAMES = "|".join(CURATED)
_USE = re.compile(rf"(?:\buse\s+(?:::\s*)?|\bextern\s+crate\s+)({_NAMES})\b")
_PATH = re.compile(rf"(?<![\w$])({_NAMES})\s*::")
# items in the type namespace, where a crate's name lives (a `fn md5` does not hide the crate md5)
_LOCAL = re.compile(rf"\b(?:mod|struct|enum|union|trait|type)\s+({_NAMES})\b|\bas\s+({_NAMES})\b(?!\s*::)")


def _path_starts(code: str) -> Iterator[str]:
    """Set names that begin a path (``regex::Regex``, ``::regex::Regex``), not ones inside one
    (``self::regex::x``, ``foo::regex::x``)."""
    for match in _PATH.finditer(code):
        before = code[: match.start()].rstrip()
        if before.endswith("::"):
            rest = before[:-2].rstrip()
            if rest and (rest[-1].isalnum() or rest[-1] in "_>"):
                continue  # a segment of a longer path
        yield match.group(1)


def detect(*texts: str) -> frozenset[str]:
    """The set's crates ``texts`` name as crates (``use regex::``, ``extern crate regex``, a path
    starting ``regex::``). A name the text also declares as an item of its own (``mod rand``) is
    its own, not the crate: linking the crate too would make ``use rand::..`` ambiguous."""
    found: set[str] = set()
    local: set[str] = set()
    for text in texts:
        if not any(name in text for name in CURATED):
            continue
        try:
            code = code_only(text)
        except LexError:
            code = text
        found.update(m.group(1) for m in _USE.finditer(code))
        found.update(_path_starts(code))
        local.update(m.group(1) or m.group(2) for m in _LOCAL.finditer(code))
    return frozenset(found - local)


# --- the installed set ----------------------------------------------------------------------------


def _registry_listing() -> list[str]:
    try:
        return sorted(os.listdir(REGISTRY))
    except OSError:
        return []


def installed_versions() -> dict[str, str]:
    """Set crate -> the highest version the registry holds (crates not installed are absent)."""
    best: dict[str, tuple[tuple[int, ...], str]] = {}
    for entry in _registry_listing():
        name, _, version = entry.rpartition("-")
        if name in CURATED and re.fullmatch(r"\d+\.\d+\.\d+", version):
            parts = tuple(int(p) for p in version.split("."))
            if name not in best or parts > best[name][0]:
                best[name] = (parts, version)
    return {name: v for name, (_, v) in sorted(best.items())}


def set_key(toolchain_version: str) -> str:
    """Changes with the toolchain, any crate version in the registry, or this recipe."""
    blob = json.dumps([RECIPE_VERSION, toolchain_version, _registry_listing(), sorted(CURATED.items())])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def default_base() -> Path:
    """``$REWARD_SANDBOX_CRATES`` or the result cache's default directory."""
    return Path(os.environ.get("REWARD_SANDBOX_CRATES") or default_cache_dir())


@dataclass(frozen=True)
class CrateSet:
    """A built set: ``root`` (``crates-<key>``), the rlib of each crate, the versions."""

    root: Path
    key: str
    rlibs: dict[str, str]  # crate -> file name in lib/
    versions: dict[str, str]

    @property
    def lib(self) -> Path:
        return self.root / "lib"

    @property
    def cargo_config(self) -> Path:
        return self.root / "cargo-config.toml"

    def flags(self, names: Iterable[str], root: str | None = None) -> list[str]:
        """``-L dependency=`` and one ``--extern`` per crate: only the crates named are in scope.
        ``root``: where the compiler sees the set (the sandbox binds it elsewhere); its own path if None."""
        chosen = sorted(set(names))
        if not chosen:
            return []
        missing = [n for n in chosen if n not in self.rlibs]
        if missing:
            raise CratesUnavailable(f"crate(s) {', '.join(missing)} not built in {self.root}")
        lib = f"{root}/lib" if root is not None else str(self.lib)
        out = ["-L", f"dependency={lib}"]
        for name in chosen:
            out += ["--extern", f"{name}={lib}/{self.rlibs[name]}"]
        return out

    def cargo_dependencies(self, names: Iterable[str]) -> str:
        """Manifest lines for the cargo backend (the same versions, from the vendored sources)."""
        return "".join(f'{n} = {{ version = "={self.versions[n]}"{CURATED[n][1]} }}\n' for n in sorted(set(names)))


def passable_by_others(path: Path) -> bool:
    """Whether an unprivileged uid can reach ``path`` (every directory on the way has o+x): the
    rlimits fallback reads the set where it lies, as the slot uid."""
    try:
        return all(p.stat().st_mode & 0o001 for p in [path, *path.parents])
    except OSError:
        return False


def _load(root: Path) -> CrateSet | None:
    try:
        meta = json.loads((root / "manifest.json").read_text())
        return CrateSet(root=root, key=meta["key"], rlibs=meta["rlibs"], versions=meta["versions"])
    except (OSError, ValueError, KeyError):
        return None


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_THREAD_LOCK = threading.Lock()


@functools.cache
def _ensure(base: Path, toolchain_version: str, cargo: str) -> CrateSet:
    key = set_key(toolchain_version)
    root = base / f"crates-{key}"
    with _THREAD_LOCK, _file_lock(base / f".crates-{key}.lock"):
        built = _load(root)
        if built is not None:
            return built
        versions = installed_versions()
        if not versions:
            raise CratesUnavailable(
                f"no crate sources in {REGISTRY}: install them (Debian: apt-get install {' '.join(DEBIAN_PACKAGES)})"
            )
        tmp = Path(tempfile.mkdtemp(prefix=f".crates-{key}-", dir=base))
        try:
            _build(tmp, key, versions, cargo)
            tmp.chmod(0o755)
            os.rename(tmp, root)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        built = _load(root)
        assert built is not None
        return built


def ensure(toolchain_version: str, cargo: str | Path | None, base: Path | None = None) -> CrateSet:
    """The built set for this toolchain, building it first when no process has (lock, temp + rename)."""
    if cargo is None:
        raise CratesUnavailable("cargo is not installed in the toolchain: the crate set is built with it")
    built = _ensure(base or default_base(), toolchain_version, str(cargo))
    _CURRENT[:] = [built]
    return built


def current() -> CrateSet | None:
    """The set this process last made ready with :func:`ensure` (the plans and the sandbox read it):
    compile flags take no toolchain or settings, so the set they link is the process's one."""
    return _CURRENT[0] if _CURRENT else None


_CURRENT: list[CrateSet] = []


def _project(versions: dict[str, str]) -> str:
    deps = "".join(f'{n} = {{ version = "={v}"{CURATED[n][1]} }}\n' for n, v in versions.items())
    return (
        '[package]\nname = "rg_crates"\nversion = "0.0.0"\nedition = "2021"\n\n[lib]\npath = "lib.rs"\n\n'
        f"[dependencies]\n{deps}\n[profile.release]\ndebug = 0\n"
    )


def cargo_replacement(directory: Path) -> str:
    """Cargo configuration that takes every crates.io dependency from the vendored ``directory``."""
    return f'[source.crates-io]\nreplace-with = "rg-crates"\n\n[source.rg-crates]\ndirectory = "{directory}"\n'


def _build(tmp: Path, key: str, versions: dict[str, str], cargo: str) -> None:
    """One ``cargo build --release --offline`` of a crate depending on the whole set; its rlibs
    (and proc-macro dylibs) go to ``lib/``, the sources it used to ``vendor/``."""
    proj = tmp / "build"
    (proj / ".cargo").mkdir(parents=True)
    (proj / "lib.rs").write_text("")
    (proj / "Cargo.toml").write_text(_project(versions))
    (proj / ".cargo" / "config.toml").write_text(cargo_replacement(REGISTRY))
    env = {**os.environ, "CARGO_TARGET_DIR": str(proj / "target"), "CARGO_HOME": str(tmp / "cargo-home")}
    env.pop("RUSTFLAGS", None)
    env["PATH"] = f"{Path(cargo).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    try:
        proc = subprocess.run(
            [cargo, "build", "--release", "--offline", "--message-format=json", "--quiet"],
            cwd=proj,
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CratesUnavailable(f"building the crate set failed: {exc}") from exc
    if proc.returncode != 0:
        raise CratesUnavailable(f"building the crate set failed: {proc.stderr.strip()[-2000:]}")
    lib = tmp / "lib"
    lib.mkdir()
    rlibs: dict[str, str] = {}
    used: set[str] = set()
    for line in proc.stdout.splitlines():
        msg = json.loads(line) if line.startswith("{") else {}
        if msg.get("reason") != "compiler-artifact":
            continue
        package = msg["package_id"]
        used.add(package)
        for filename in msg.get("filenames", []):
            path = Path(filename)
            if path.suffix in (".rlib", ".so") and path.parent.name == "deps":
                shutil.copy2(path, lib / path.name)
                target = normalize_crate(msg["target"]["name"])
                owner = normalize_crate(package.rsplit("#", 1)[-1].rpartition("@")[0])
                if target in versions and path.suffix == ".rlib" and owner == target:
                    rlibs[target] = path.name
    vendor = tmp / "vendor"
    vendor.mkdir()
    for entry in _registry_listing():
        name, _, version = entry.rpartition("-")
        if any(p.endswith(f"#{name}@{version}") for p in used):
            shutil.copytree(REGISTRY / entry, vendor / entry, symlinks=False)
    (tmp / "cargo-config.toml").write_text(cargo_replacement(tmp.parent / f"crates-{key}" / "vendor"))
    shutil.rmtree(proj)
    shutil.rmtree(tmp / "cargo-home", ignore_errors=True)
    missing = sorted(set(versions) - set(rlibs))
    if missing:
        raise CratesUnavailable(f"the crate set build made no rlib for {', '.join(missing)}")
    for path in tmp.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    meta = {"key": key, "rlibs": rlibs, "versions": versions}
    (tmp / "manifest.json").write_text(json.dumps(meta, indent=1, sort_keys=True))


@functools.lru_cache(maxsize=4096)
def job_crates(job: Job) -> tuple[str, ...]:
    """The crates a job links: those it declares and those its program or tests name. Only these
    are in scope (each ``--extern`` puts a name in every module's path resolution). Each text's own
    items hide a name only from that text: a program's ``mod regex`` never unlinks the crate the
    hidden tests name (they import it explicitly, ``prelude.crate_imports``, so it beats the module)."""
    return tuple(sorted(set(job.crates) | detect(job.source) | detect(job.tests)))
