"""What each backend runs for a job: the steps, and which step answers which question.

``fast`` (the default) grades with as few compiler passes as possible and no cargo process:
- with tests: one ``clippy-driver --test`` pass builds one test binary holding the program, its
  own tests and the hidden tests, and lints it; the binary then runs twice, filtered: once for
  the hidden tests, once for the program's own tests, each run with its own sentinel check;
- when that pass fails (not when it ran out of time), a metadata-only check of the program alone
  says whether the program builds, and if it does, the hidden tests are built once more against
  the program with its own tests off, so a broken own test never costs the hidden verdict;
- without tests: the metadata-only check alone (no codegen, no linking);
- integration mode: ``clippy-driver`` builds the library as an rlib (build + lint), ``rustc
  --test`` builds the separate test crate against it, and the program's own tests, if any, are
  built and run on their own.
Lints are forced to warnings (``--force-warn``): source attributes cannot silence them, and a
deny-by-default clippy lint never decides whether a program builds or whether tests run.
``cargo`` runs real ``cargo build``, ``cargo clippy --all-targets`` and ``cargo test`` in a
project, for parity checks and for users who want cargo's exact behaviour.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from .compile.assemble import Assembly
from .compile.crates import CratesUnavailable, job_crates
from .compile.crates import current as current_crates
from .compile.sentinel import extern_flags
from .compile.toolchain import direct_link, find_toolchain, host_triple, link_flags
from .isolation.layout import Layout
from .isolation.limits import Limits
from .isolation.process import Step
from .jobs import Job, TestMode

FAST = "fast"
CARGO = "cargo"
BACKENDS = (FAST, CARGO)
DIAG_BYTES = 4 * 1024 * 1024
FORCED_LINTS = ["--force-warn", "clippy::all", "--force-warn", "unused"]
# no FFI, no raw fds, no link-section constructors: the harness's output stays its own
NO_UNSAFE = ["-F", "unsafe_code"]
SEALED_DIR = ".rgbin"  # root-owned 0711: test binaries sit here, exec-only, before any test runs


def sealed_name() -> str:
    """A sealed binary's name: random, so a test's ``argv[0]`` is the same shape in every run (the
    program's own and its wrong versions', hidden or own, unit or integration mode) and no test can
    find out by name which binaries lie next to its own."""
    return secrets.token_hex(8)


def own_run_args(asm: Assembly) -> list[str]:
    """The own run's filter, one shape whether or not the binary holds hidden tests: own-test credit
    compares this run with the same run of wrong versions of the program (``rust_grpo/rewards/mutants.py``),
    which have none, and a test that read its command line must find nothing to tell them apart."""
    return ["--skip", f"{asm.hidden_module}::"]


@dataclass(frozen=True)
class Plan:
    steps: list[Step]
    build: list[str]  # steps whose success means "the program builds" (first one that ran decides)
    lint: list[str]  # steps whose warnings count as clippy warnings (first one that ran)
    hidden_compile: list[str]  # steps that build the hidden tests (first that ran and passed, else last that ran)
    own_compile: str | None  # step that builds the program's own tests
    run_hidden: str | None
    run_own: str | None
    # copies of the sources the slot uid made, removed before tests run
    uid_secrets: list[str] = field(default_factory=list)
    # test binaries (path or glob) -> their sealed path: root's, exec-only, unreplaceable
    seals: list[tuple[str, str]] = field(default_factory=list)


def compile_step(
    name: str, argv: list[str], limits: Limits, when: str = "always", env: dict[str, str] | None = None
) -> Step:
    return Step(
        name=name,
        argv=argv,
        kind="compile",
        wall_s=limits.compile_wall_s,
        cpu_s=limits.compile_cpu_s,
        memory_mb=limits.compile_memory_mb,
        procs=limits.compile_procs,
        file_size_mb=limits.file_size_mb,
        open_files=max(limits.open_files, 1024),
        stack_mb=limits.stack_mb,
        output_bytes=DIAG_BYTES,
        when=when,
        env=env or {},
    )


# One malloc arena and no cache of thread stacks: once a program's threads have ended, the process's
# address space is back where it was, and threads do not use up RLIMIT_AS with arenas of their own.
RUN_ALLOCATOR_ENV = {"MALLOC_ARENA_MAX": "1", "GLIBC_TUNABLES": "glibc.pthread.stack_cache_size=0"}


def run_step(name: str, argv: list[str], limits: Limits, when: str, cwd: str = "") -> Step:
    """Tests run from a directory holding the crate's Cargo.toml, as under `cargo test`; argv[0] is a
    sealed binary (see ``Plan.seals``)."""
    return Step(
        name=name,
        argv=argv,
        kind="run",
        wall_s=limits.run_wall_s,
        cpu_s=limits.run_cpu_s,
        memory_mb=limits.run_memory_mb,
        procs=limits.run_procs,
        file_size_mb=limits.file_size_mb,
        open_files=limits.open_files,
        stack_mb=limits.stack_mb,
        output_bytes=limits.output_kb * 1024,
        env={"RUSTC_BOOTSTRAP": "1", "RG_NO_PROCESSES": "1", **RUN_ALLOCATOR_ENV},
        when=when,
        cwd=cwd,
    )


def libtest_args(job: Job) -> list[str]:
    """JSON events (RUSTC_BOOTSTRAP lets a stable test binary accept them), one test at a time."""
    args = ["--format", "json", "-Z", "unstable-options", "--test-threads=1"]
    return args + (["--include-ignored"] if job.include_ignored else [])


def codegen_flags(job: Job) -> list[str]:
    return ["--error-format=json", "-C", "debuginfo=0", "-C", f"opt-level={job.opt_level}"]


def crate_flags(job: Job, layout: Layout) -> list[str]:
    """``-L dependency=`` and ``--extern`` for the prebuilt crates the job links (``crates.py``);
    nothing for a std-only job. The paths are where the steps see the set (``layout.crates``)."""
    names = job_crates(job)
    if not names:
        return []
    built = current_crates()
    if built is None:
        raise CratesUnavailable(f"the crate set ({', '.join(names)} needed) was not made ready before grading")
    return built.flags(names, layout.crates)


def crate_dependencies(job: Job) -> str:
    """The cargo backend's ``[dependencies]`` lines: the same crates and versions as the rlibs."""
    names = job_crates(job)
    built = current_crates() if names else None
    return built.cargo_dependencies(names) if built is not None else ""


def compile_flags(job: Job, layout: Layout) -> list[str]:
    """The flags every compilation of the job's program gets (a batch's too)."""
    return [
        "--edition",
        job.edition,
        "--crate-name",
        job.crate_name,
        *codegen_flags(job),
        *([] if job.allow_unsafe else NO_UNSAFE),
        *crate_flags(job, layout),
    ]


def dynamic_std(layout: Layout) -> list[str]:
    """Link std dynamically, found at run time through the binary's rpath into the read-only
    toolchain (bound at ``layout.toolchain`` in the sandbox, the host's own path in the fallback),
    by the toolchain's lld called directly where that works here (``toolchain.direct_link``).
    Measured on the mixed corpus: ~20 ms less compiler CPU per test build (of ~100 ms) for the
    shared std, nearly all of it in the linker (a 2.5 MB binary instead of 6.9 MB), and ~5 ms more
    without ``cc`` and ``collect2`` in between; what the tests do and print is the same.
    Every test binary the fast backend builds, single or batched, is linked this way, so a program
    runs alike alone, in a batch and as its own wrong versions (own-test credit)."""
    host = host_triple(find_toolchain())
    if not host:
        return []
    return link_flags(direct_link(), layout.toolchain, host)


def fast_plan(job: Job, asm: Assembly, layout: Layout, limits: Limits, check_first: bool = False) -> Plan:
    """The fast backend's steps. ``check_first``: for a program whose errors a batch's build has just
    shown (``batch.BatchOutcome.broken``), the metadata check runs before the test build, and the
    test build only if the check passes. The verdict reads the same steps as in the usual order: a
    program that does not build fails both, and the check's errors decide (``grader.classify``); one
    that does runs the usual test build after it. It saves the failing test build (~35 ms CPU)."""
    clippy = f"{layout.toolchain}/bin/clippy-driver"
    rustc = f"{layout.toolchain}/bin/rustc"
    src, work = layout.src, layout.work
    sentinel = extern_flags([asm.sentinel_crate], src) if asm.sentinel_crate else []  # every --test build's
    codegen = [*codegen_flags(job), *dynamic_std(layout), *sentinel]
    common = compile_flags(job, layout)
    linked = [*common, *dynamic_std(layout), *sentinel]  # what builds a test binary (the check links nothing)
    check = [
        clippy,
        *common,
        *FORCED_LINTS,
        "--crate-type",
        "lib",
        "--emit=metadata",
        f"{src}/lib.rs",
        "-o",
        f"{work}/lib.rmeta",
    ]
    tests = libtest_args(job)
    if job.test_mode is TestMode.INTEGRATION:
        lib = [clippy, *common, *FORCED_LINTS, "--crate-type", "lib", f"{src}/lib.rs", "--out-dir", work]
        test_crate = [
            rustc,
            "--test",
            "--edition",
            job.edition,
            "--crate-name",
            f"{asm.tag}_tests",
            *codegen,
            "-L",
            work,
            "--extern",
            f"{job.crate_name}={work}/lib{job.crate_name}.rlib",
            *crate_flags(job, layout),  # the library's crates, which the tests may use too
            f"{src}/{asm.test_path}",
            "-o",
            f"{work}/test_bin",
        ]
        steps = [
            compile_step("lib", lib, limits),
            compile_step("testc", test_crate, limits, when="ok:lib"),
        ]
        own_compile = run_own = None
        if asm.has_own_tests:
            own = [rustc, "--test", *linked, f"{src}/lib.rs", "-o", f"{work}/own_bin"]
            steps.append(compile_step("ownc", own, limits, when="ok:lib"))
            own_compile = "ownc"
        hidden_bin, own_bin = f"{work}/{SEALED_DIR}/{sealed_name()}", f"{work}/{SEALED_DIR}/{sealed_name()}"
        seals = [(f"{work}/test_bin", hidden_bin)]
        if asm.has_own_tests:  # first: nothing of the hidden run can reach it (see below)
            steps.append(run_step("run_own", [own_bin, *own_run_args(asm), *tests], limits, when="ok:ownc", cwd=src))
            seals.append((f"{work}/own_bin", own_bin))
            run_own = "run_own"
        steps.append(run_step("run_hidden", [hidden_bin, *tests], limits, when="ok:testc", cwd=src))
        return Plan(steps, ["lib"], ["lib"], ["testc"], own_compile, "run_hidden", run_own, seals=seals)
    has_hidden = asm.hidden_root is not None
    if not has_hidden and not asm.has_own_tests:
        return Plan([compile_step("check", check, limits)], ["check"], ["check"], [], None, None, None)
    test_build = [clippy, "--test", *linked, *FORCED_LINTS, f"{src}/lib.rs", "-o", f"{work}/test_bin"]
    steps = [
        compile_step("testc", test_build, limits),
        compile_step("check", check, limits, when="erred:testc"),  # not after a timeout: it would time out too
    ]
    if check_first:
        steps = [compile_step("check", check, limits), compile_step("testc", test_build, limits, when="ok:check")]
    hidden_compile = ["testc"] if has_hidden else []
    sealed = f"{work}/{SEALED_DIR}/{sealed_name()}"
    run_own = None
    # The own run comes first, and every run starts from a fresh /tmp (process.py): nothing the
    # program wrote while the hidden tests ran (their inputs, their messages) can reach the own
    # run's output, which repair feedback shows; and the own run is the first run, as it is for the
    # wrong versions that own-test credit compares it with.
    if asm.has_own_tests:
        steps.append(run_step("run_own", [sealed, *own_run_args(asm), *tests], limits, when="ok:testc", cwd=src))
        run_own = "run_own"
    if has_hidden:
        hidden_only = [
            rustc,
            "--test",
            *linked,
            f"{src}/{asm.hidden_root}",
            "-o",
            f"{work}/test_bin",
        ]
        steps.insert(2, compile_step("hiddenc", hidden_only, limits, when="failed:testc&ok:check"))
        hidden_compile.append("hiddenc")
        steps.append(
            run_step(
                "run_hidden",
                [sealed, f"{asm.hidden_module}::", *tests],
                limits,
                when="ok:testc|ok:hiddenc",
                cwd=src,
            )
        )
    return Plan(
        steps,
        ["testc", "check"],
        ["testc", "check"],
        hidden_compile,
        "testc" if asm.has_own_tests else None,
        "run_hidden" if has_hidden else None,
        run_own,
        seals=[(f"{work}/test_bin", sealed)],
    )


def cargo_manifest(job: Job) -> str:
    return (
        f'[package]\nname = "{job.crate_name}"\nversion = "0.1.0"\nedition = "{job.edition}"\n\n'
        '[lib]\npath = "src/lib.rs"\n\n[dependencies]\n' + crate_dependencies(job)
    )


def cargo_files(job: Job, asm: Assembly) -> dict[str, str]:
    """The assembly laid out as a cargo project under ``proj/``."""
    files = {"proj/Cargo.toml": cargo_manifest(job)}
    for path, text in asm.files.items():
        if path == asm.hidden_root:
            continue
        if path == asm.test_path:
            files[f"proj/tests/{path}"] = text.replace('#[path = "', '#[path = "../src/')
        else:
            files[f"proj/src/{path}"] = text
    return files


def cargo_plan(job: Job, asm: Assembly, layout: Layout, limits: Limits) -> Plan:
    cargo = f"{layout.toolchain}/bin/cargo"
    manifest = ["--manifest-path", "proj/Cargo.toml", "--offline", "--message-format=json"]
    env = {
        "CARGO_HOME": f"{layout.work}/cargo-home",
        "RUSTC": f"{layout.toolchain}/bin/rustc",
        "CARGO_TARGET_DIR": f"{layout.work}/proj/target",
        "RUSTFLAGS": f"-C debuginfo=0 -C opt-level={job.opt_level}"
        + ("" if job.allow_unsafe else " " + " ".join(NO_UNSAFE)),
        "PATH": f"{layout.toolchain}/bin:/usr/bin:/bin",
    }

    def cargo_step(name: str, args: list[str], when: str = "always") -> Step:
        return compile_step(name, [cargo, *args], limits, when, env=env)

    seals: list[tuple[str, str]] = []

    names: dict[str, str] = {}

    def run_tests(name: str, binary: str, extra: list[str], when: str) -> Step:
        sealed = f"{layout.work}/{SEALED_DIR}/{names.setdefault(binary, sealed_name())}"
        if (f"{layout.work}/proj/target/debug/deps/{binary}-*", sealed) not in seals:
            seals.append((f"{layout.work}/proj/target/debug/deps/{binary}-*", sealed))
        # from the sources' copy of the project (its manifest): the work dir is emptied before each run
        return run_step(name, [sealed, *extra, *libtest_args(job)], limits, when, cwd=f"{layout.src}/proj")

    steps = [
        compile_step("copy", ["cp", "-r", f"{layout.src}/proj", "."], limits),
        cargo_step("build", ["build", *manifest], when="ok:copy"),
        cargo_step("clippy", ["clippy", *manifest, "--all-targets", "--", *FORCED_LINTS], when="ok:copy"),
    ]
    uid_secrets = [f"{layout.work}/proj/src", f"{layout.work}/proj/tests"]
    run_hidden = run_own = None
    if asm.hidden_root is None and asm.test_path is None and not asm.has_own_tests:
        return Plan(steps, ["build"], ["clippy"], [], None, None, None, uid_secrets)
    steps.append(cargo_step("testc", ["test", "--no-run", *manifest], when="ok:build"))
    if asm.has_own_tests:  # first, from a fresh /tmp, as in fast_plan
        steps.append(run_tests("run_own", job.crate_name, own_run_args(asm), "ok:testc"))
        run_own = "run_own"
    if asm.test_path is not None:
        steps.append(run_tests("run_hidden", f"{asm.tag}_t", [], "ok:testc"))
        run_hidden = "run_hidden"
    elif asm.hidden_root is not None:
        steps.append(run_tests("run_hidden", job.crate_name, [f"{asm.hidden_module}::"], "ok:testc"))
        run_hidden = "run_hidden"
    own_compile = "testc" if run_own else None
    return Plan(steps, ["build"], ["clippy"], ["testc"], own_compile, run_hidden, run_own, uid_secrets, seals)
