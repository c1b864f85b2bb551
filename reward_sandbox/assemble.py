"""Turn a job into crate files: the program, its tests, and the sentinel test.

The sentinel is a test we add to every test crate. libtest runs tests one at a time in name
order, and the sentinel's name sorts last, so when it prints its secret nonce every other test
has already finished. A run that exits early (``process::exit(0)`` inside a test), aborts, or
prints a forged ``test result: ok`` line never shows the nonce, and its results are not trusted.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from .jobs import Job, TestMode

HIDDEN_FILE = "rg_hidden.rs"
SENTINEL_FILE = "rg_sentinel.rs"
SENTINEL_MODULE = "zzzz_rg_sentinel"
SENTINEL_TEST = f"{SENTINEL_MODULE}::zzzz_rg_done"
HIDDEN_MODULE = "rg_hidden"
TEST_CRATE = "rg_tests"
INTEGRATION_TEST_FILE = f"{TEST_CRATE}.rs"
GENERATED_FILES = frozenset({HIDDEN_FILE, SENTINEL_FILE, INTEGRATION_TEST_FILE})


@dataclass(frozen=True)
class Assembly:
    """Files to write (relative path -> text), and the sentinel nonce to look for."""

    files: dict[str, str]
    nonce: str
    lib_path: str = "lib.rs"
    test_path: str | None = None  # integration mode: the separate test crate root


def _sentinel(nonce: str) -> str:
    return (
        "#![allow(warnings, clippy::all, clippy::pedantic)]\n"
        "#[test]\n"
        "fn zzzz_rg_done() {\n"
        "    use std::io::Write;\n"
        f'    let _ = std::io::stdout().write_all(b"\\nRG_SENTINEL_{nonce}\\n");\n'
        "    let _ = std::io::stdout().flush();\n"
        "}\n"
    )


def _module_decl(path: str, name: str) -> str:
    return f'\n#[cfg(test)]\n#[path = "{path}"]\nmod {name};\n'


def assemble(job: Job) -> Assembly:
    """Lay out ``job`` as a crate. Line numbers of ``source`` are kept (it comes first, unchanged)."""
    nonce = secrets.token_hex(16)
    sentinel = _sentinel(nonce)
    if job.test_mode is TestMode.INTEGRATION:
        test_root = job.tests + "\n" + _module_decl(SENTINEL_FILE, SENTINEL_MODULE)
        return Assembly(
            files={"lib.rs": job.source, INTEGRATION_TEST_FILE: test_root, SENTINEL_FILE: sentinel},
            nonce=nonce,
            test_path=INTEGRATION_TEST_FILE,
        )
    files = {SENTINEL_FILE: sentinel}
    lib = job.source.rstrip("\n") + "\n"
    if job.tests.strip():
        hidden = "#[allow(unused_imports)]\nuse super::*;\n" + job.tests + "\n"
        if job.test_mode is TestMode.MAIN:
            hidden += "\n#[test]\nfn rg_main() {\n    main();\n}\n"
        files[HIDDEN_FILE] = hidden
        lib += _module_decl(HIDDEN_FILE, HIDDEN_MODULE)
    if job.has_tests:
        lib += _module_decl(SENTINEL_FILE, SENTINEL_MODULE)
    files["lib.rs"] = lib
    return Assembly(files=files, nonce=nonce)


def is_hidden_test(name: str) -> bool:
    """Whether a libtest test name belongs to the job's ``tests`` (not the program's own tests)."""
    return name.startswith(HIDDEN_MODULE + "::")
