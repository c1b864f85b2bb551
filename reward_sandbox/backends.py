"""What each backend runs for a job: the steps, and which step answers which question.

``fast`` (the default) grades with as few compiler passes as possible and no cargo process:
- with tests: one ``clippy-driver --test`` pass builds the test binary *and* lints, then the
  binary runs; only if that pass fails does a metadata-only ``clippy-driver`` check of the
  library alone say whether the program itself builds;
- without tests: the metadata-only check alone (no codegen, no linking);
- integration mode: ``clippy-driver`` builds the library as an rlib (build + lint), ``rustc
  --test`` builds the separate test crate against it, then it runs.
``cargo`` runs real ``cargo build``, ``cargo clippy --all-targets`` and ``cargo test`` in a
project, for parity checks and for users who want cargo's exact behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

from .assemble import TEST_CRATE, Assembly
from .isolation import Layout
from .jobs import Job, TestMode
from .limits import Limits
from .process import Step
from .toolchain import Toolchain

FAST = "fast"
CARGO = "cargo"
BACKENDS = (FAST, CARGO)
DIAG_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Plan:
    steps: list[Step]
    build: list[str]  # steps whose success means "the program builds" (first one that ran decides)
    lint: list[str]  # steps whose warnings count as clippy warnings (first one that ran)
    test_compile: str | None  # step that builds the test binary
    run: str | None  # step that runs it


def _compile_step(name: str, argv: list[str], limits: Limits, when: str = "always") -> Step:
    return Step(
        name=name, argv=argv, wall_s=limits.compile_wall_s, cpu_s=limits.compile_cpu_s,
        memory_mb=limits.compile_memory_mb, procs=limits.compile_procs, file_size_mb=limits.file_size_mb,
        open_files=max(limits.open_files, 1024), output_bytes=DIAG_BYTES, when=when,
    )  # fmt: skip


def _run_step(argv: list[str], limits: Limits, when: str, cwd: str = "") -> Step:
    """Tests run from a directory holding the crate's Cargo.toml, as under `cargo test`."""
    return Step(cwd=cwd,
        name="run", argv=argv, wall_s=limits.run_wall_s, cpu_s=limits.run_cpu_s, memory_mb=limits.run_memory_mb,
        procs=limits.run_procs, file_size_mb=limits.file_size_mb, open_files=limits.open_files,
        output_bytes=limits.output_kb * 1024, env={"RUSTC_BOOTSTRAP": "1"}, when=when,
    )  # fmt: skip


def libtest_args(job: Job) -> list[str]:
    """JSON events (RUSTC_BOOTSTRAP lets a stable test binary accept them), one test at a time."""
    args = ["--format", "json", "-Z", "unstable-options", "--test-threads=1"]
    return args + (["--include-ignored"] if job.include_ignored else [])


def fast_plan(job: Job, asm: Assembly, layout: Layout, toolchain: Toolchain, limits: Limits) -> Plan:
    clippy = f"{layout.toolchain}/bin/clippy-driver"
    rustc = f"{layout.toolchain}/bin/rustc"
    common = ["--edition", job.edition, "--crate-name", job.crate_name, "--error-format=json", "-C", "debuginfo=0",
              "-C", f"opt-level={job.opt_level}"]  # fmt: skip
    src, work = layout.src, layout.work
    check = [clippy, *common, "--crate-type", "lib", "--emit=metadata", f"{src}/lib.rs", "-o", f"{work}/lib.rmeta"]
    if job.test_mode is TestMode.INTEGRATION:
        lib = [clippy, *common, "--crate-type", "lib", f"{src}/lib.rs", "--out-dir", work]
        test_crate = [
            rustc, "--test", "--edition", job.edition, "--crate-name", TEST_CRATE, "--error-format=json",
            "-C", "debuginfo=0", "-C", f"opt-level={job.opt_level}", "-L", work, "--extern", f"{job.crate_name}={work}/lib{job.crate_name}.rlib",
            f"{src}/{asm.test_path}", "-o", f"{work}/test_bin",
        ]  # fmt: skip
        steps = [
            _compile_step("lib", lib, limits),
            _compile_step("testc", test_crate, limits, when="ok:lib"),
            _run_step([f"{work}/test_bin", *libtest_args(job)], limits, when="ok:testc", cwd=src),
        ]
        return Plan(steps, build=["lib"], lint=["lib"], test_compile="testc", run="run")
    if not job.has_tests:
        return Plan([_compile_step("check", check, limits)], build=["check"], lint=["check"], test_compile=None, run=None)
    test_build = [clippy, "--test", *common, f"{src}/lib.rs", "-o", f"{work}/test_bin"]
    steps = [
        _compile_step("testc", test_build, limits),
        _compile_step("check", check, limits, when="failed:testc"),
        _run_step([f"{work}/test_bin", *libtest_args(job)], limits, when="ok:testc", cwd=src),
    ]
    return Plan(steps, build=["testc", "check"], lint=["testc", "check"], test_compile="testc", run="run")


def cargo_manifest(job: Job) -> str:
    return (
        f'[package]\nname = "{job.crate_name}"\nversion = "0.1.0"\nedition = "{job.edition}"\n\n'
        "[lib]\npath = \"src/lib.rs\"\n\n[dependencies]\n"
    )


def cargo_files(job: Job, asm: Assembly) -> dict[str, str]:
    """The assembly laid out as a cargo project under ``proj/``."""
    files = {"proj/Cargo.toml": cargo_manifest(job)}
    for path, text in asm.files.items():
        if path == asm.test_path:
            files[f"proj/tests/{TEST_CRATE}.rs"] = text.replace('#[path = "', '#[path = "../src/')
        else:
            files[f"proj/src/{path}"] = text
    return files


def cargo_plan(job: Job, asm: Assembly, layout: Layout, toolchain: Toolchain, limits: Limits) -> Plan:
    cargo = f"{layout.toolchain}/bin/cargo"
    manifest = ["--manifest-path", "proj/Cargo.toml", "--offline", "--message-format=json"]
    env = {
        "CARGO_HOME": f"{layout.work}/cargo-home",
        "RUSTC": f"{layout.toolchain}/bin/rustc",
        "CARGO_TARGET_DIR": f"{layout.work}/proj/target",
        "RUSTFLAGS": f"-C debuginfo=0 -C opt-level={job.opt_level}",
    }

    def cargo_step(name: str, args: list[str], when: str = "always") -> Step:
        return _compile_step(name, ["env", *(f"{k}={v}" for k, v in env.items()), cargo, *args], limits, when)

    binary = TEST_CRATE if job.test_mode is TestMode.INTEGRATION else job.crate_name
    find_and_run = (
        f'for f in proj/target/debug/deps/{binary}-*; do if [ -f "$f" ] && [ -x "$f" ]; then exec "$f" "$@"; fi; done; exit 97'
    )
    steps = [
        _compile_step("copy", ["cp", "-r", f"{layout.src}/proj", "."], limits),
        cargo_step("build", ["build", *manifest], when="ok:copy"),
        cargo_step("clippy", ["clippy", *manifest, "--all-targets"], when="ok:copy"),
    ]
    if not job.has_tests:
        return Plan(steps, build=["build"], lint=["clippy"], test_compile=None, run=None)
    steps += [
        cargo_step("testc", ["test", "--no-run", *manifest], when="ok:build"),
        _run_step(["/bin/sh", "-c", f"cd proj && {find_and_run.replace('proj/target', 'target')}", "sh", *libtest_args(job)],
                  limits, when="ok:testc"),
    ]
    return Plan(steps, build=["build"], lint=["clippy"], test_compile="testc", run="run")
