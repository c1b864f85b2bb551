"""A bare machine: `make setup` installs or names the system packages, and the Python ones are pinned.

scripts/system_packages.sh runs for real with a PATH that lacks some tools (a folder of links to
the ones kept), as root and as an unprivileged user (setpriv).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

import pytest

from .conftest import ROOT

SCRIPT = ROOT / "scripts" / "system_packages.sh"
BASH = shutil.which("bash") or "/bin/bash"


def run_with_tools(tmp_path: Path, keep: list[str], as_user: bool = False) -> subprocess.CompletedProcess[str]:
    """The script with only ``keep`` (and ``id``) on PATH; ``as_user``: as uid/gid 65534 (so the
    links, and a copy of the script, live where that user can reach them: pytest's own temporary
    folders are root's only, and so may be the checkout, e.g. a clone in ``mktemp -d``)."""
    bin_dir = Path(tempfile.mkdtemp(prefix="bin-", dir=tmp_path if not as_user else None))
    bin_dir.chmod(0o755)
    script = bin_dir / SCRIPT.name
    shutil.copyfile(SCRIPT, script)
    script.chmod(0o644)
    for tool in [*keep, "id"]:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed here")
        (bin_dir / tool).symlink_to(found)
    prefix: list[str] = []
    if as_user:
        if os.geteuid() != 0 or shutil.which("setpriv") is None:
            pytest.skip("needs root and setpriv to run the script as another user")
        prefix = [shutil.which("setpriv") or "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    elif os.geteuid() != 0:
        pytest.skip("the root path of the script needs root")
    try:
        return subprocess.run(
            [*prefix, BASH, str(script)],
            env={"PATH": str(bin_dir), "LANG": "C"},
            capture_output=True,
            text=True,
            check=False,
            cwd="/",
        )
    finally:
        shutil.rmtree(bin_dir)


def test_nothing_is_said_when_every_package_is_there():
    proc = subprocess.run([BASH, str(SCRIPT)], capture_output=True, text=True, check=False)
    if proc.stdout or proc.stderr:
        pytest.skip(f"this machine lacks some: {proc.stdout}{proc.stderr}")
    assert proc.returncode == 0


def test_a_user_without_bubblewrap_is_told_in_one_line_and_goes_on(tmp_path):
    proc = run_with_tools(tmp_path, ["gcc", "prlimit"], as_user=True)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr == (
        "missing system packages: bubblewrap (continuing; grading falls back to rlimits-only isolation);"
        " install them as root: apt-get install bubblewrap\n"
    )


def test_a_user_without_a_c_toolchain_is_stopped_in_one_line(tmp_path):
    proc = run_with_tools(tmp_path, ["bwrap", "prlimit"], as_user=True)
    assert proc.returncode == 1
    assert proc.stderr == "missing system packages: gcc; install them as root: apt-get install gcc\n"


def test_root_without_apt_and_without_bubblewrap_is_stopped(tmp_path):
    """As root the rlimits fallback refuses to run untrusted code, so bubblewrap is required."""
    proc = run_with_tools(tmp_path, ["gcc", "prlimit"])
    assert proc.returncode == 1
    assert proc.stderr == "missing system packages: bubblewrap; install them with your package manager\n"


def test_make_setup_runs_it_before_demo_and_test():
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make")
    for target in ("demo", "test", "setup"):
        # --no-print-directory: under `make test` the nested make would say "Entering directory" first
        dry = subprocess.run(
            [make, "--no-print-directory", "-n", target], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout
        assert dry.splitlines()[0] == "bash scripts/system_packages.sh", (target, dry)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci and "apt-get" not in ci  # one place installs them: the Makefile's script


def pins() -> dict[str, str]:
    found = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            found[name.strip().lower()] = version.strip()
    return found


def test_every_direct_dependency_is_pinned():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = set()
    for extra, requirements in project["optional-dependencies"].items():
        if extra == "vllm":  # trl[vllm] brings vLLM at the version TRL supports
            continue
        for requirement in requirements:
            wanted.add(re.split(r"[<>=!;\[ ]", requirement, maxsplit=1)[0].lower())
    assert wanted - set(pins()) == set()


def test_the_pins_are_the_versions_installed_here():
    """The suite runs against what constraints.txt says, so the pins are the tested versions."""
    differ = {}
    for name, version in pins().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        if installed.split("+")[0] != version:
            differ[name] = (version, installed)
    assert differ == {}, f"constraints.txt vs installed: {differ}"
