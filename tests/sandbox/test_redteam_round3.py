"""Red team, round 3 (after 99576b6): attacks on the crate-path imports (``extern crate self as
std/core/regex``, the 2015 edition, a binding check fooled by a cast), on the per-run namespaces (the
kernel's host-wide inode counter, read through a socket's inode number), on the "no host path" claim
(``/proc/self/mountinfo``) and on the root side's capabilities. Each succeeded when written; each test
asserts it is contained now: ``extern crate self`` and (2015) a program item named like a crate the
tests use are refused (``prelude.crate_refusal``), the binding check reads only the tests' outermost
declarations, runs get no pipe, socket or /proc at all (``runner.c``).

Wrong programs here answer ``area(r) = 3 r^2``, ``add = 0`` or a fake ``Regex`` that matches
anything, and pass only if the hidden tests' paths or assertion macros reach the program's own items.
"""

from __future__ import annotations

import pytest

from reward_sandbox import Grader, Status
from reward_sandbox.cache import ResultCache

from ..conftest import TEST_LIMITS, needs_bwrap
from .batch.test_batched import was_batched

pytestmark = needs_bwrap

FAKE_F64 = "pub mod f64 {\n    pub mod consts {\n        pub const PI: f64 = 3.0;\n    }\n}\n"
WRONG_AREA = "pub fn area(r: f64) -> f64 {\n    3.0 * r * r\n}\n"
STD_TESTS = "#[test]\nfn unit() {\n    assert!((area(1.0) - std::f64::consts::PI).abs() < 1e-9);\n}\n"
CORE_TESTS = "#[test]\nfn unit() {\n    assert!((area(1.0) - core::f64::consts::PI).abs() < 1e-9);\n}\n"
FAKE_REGEX = (
    "pub struct Regex;\n"
    "impl Regex {\n"
    "    pub fn new(_: &str) -> Result<Regex, String> {\n        Ok(Regex)\n    }\n"
    "    pub fn is_match(&self, _: &str) -> bool {\n        true\n    }\n}\n"
)
WRONG_IDENT = 'pub fn ident() -> String {\n    "!!!".to_string()\n}\n'
REGEX_TESTS = '#[test]\nfn word() {\n    assert!(regex::Regex::new("^[a-z]+$").unwrap().is_match(&ident()));\n}\n'

UNIVERSAL = (
    "extern crate std as real;\n"
    "extern crate self as std;\n"
    "pub use real::*;\n"
    "#[macro_export]\nmacro_rules! assert {\n    ($($t:tt)*) => {};\n}\n"
    "#[macro_export]\nmacro_rules! assert_eq {\n    ($($t:tt)*) => {};\n}\n"
    "#[macro_export]\nmacro_rules! assert_ne {\n    ($($t:tt)*) => {};\n}\n"
    "pub fn add(_a: i32, _b: i32) -> i32 {\n    0\n}\n"
)
ADD_TESTS = "#[test]\nfn sums() {\n    assert_eq!(add(1, 2), 3);\n    assert!(add(2, 2) == 4);\n}\n"


@pytest.mark.parametrize("mode", ["unit", "main"])
def test_extern_crate_self_as_std_never_replaces_the_hidden_assertions(grader, mode):
    """The worst one: ``extern crate self as std;`` at the program's root makes ``::std`` the program
    itself in its crate's extern prelude (no ``#![no_std]`` needed, no error against the injected
    ``extern crate std``). The hidden module's own ``use ::std::{assert, assert_eq, ...};`` (and
    ``use ::std::prelude::..``, ``use ::std;``) then import the program's ``#[macro_export]`` look-alikes,
    while ``pub use real::*`` (``extern crate std as real``) keeps every other std path and the
    sentinel working: a program whose ``add`` returns 0 passes every hidden ``assert!``/``assert_eq!``.
    Pre-existing (also passes at 32641b1); not closed by 99576b6. Integration mode is contained (the
    test crate's own ``::std``). A fix that holds (checked by hand with rustc 1.95, the hidden module placed before the
    program's items as ``assemble`` does): items inside the hidden module, ``extern crate std;``
    (``core``, each offered crate the tests name), which load the crate by name and not through the
    extern prelude, and the imports written ``use self::std::{assert, ...};``; or refuse
    ``extern crate self`` in programs."""
    tests = ADD_TESTS if mode == "unit" else "fn main() {\n    assert_eq!(add(1, 2), 3);\n}\n"
    (result,) = grader.grade([{"id": "universal", "source": UNIVERSAL, "tests": tests, "test_mode": mode}])
    assert result.status is not Status.OK and result.tests.hidden.passed == 0, (result.status, result.reason)


# name -> (wrong program, hidden tests, test mode, edition)
WRONG_PASSES: dict[str, tuple[str, str, str, str]] = {
    # `extern crate self as NAME` at the root puts NAME in the crate's extern prelude: the hidden
    # module's `use ::core;` then imports the program itself
    "extern crate self as core": ("extern crate self as core;\n" + WRONG_AREA + FAKE_F64, CORE_TESTS, "unit", "2021"),
    "extern crate self as core, main mode": (
        "extern crate self as core;\n" + WRONG_AREA + FAKE_F64,
        "fn main() {\n    assert!((area(1.0) - core::f64::consts::PI).abs() < 1e-9);\n}\n",
        "main",
        "2021",
    ),
    # the same for an offered crate: `use ::regex;` is the program
    "extern crate self as regex": (
        "extern crate self as regex;\n" + WRONG_IDENT + FAKE_REGEX,
        REGEX_TESTS,
        "unit",
        "2021",
    ),
    # `#![no_std]` drops the injected `extern crate std`, so `extern crate self as std` is allowed and
    # `use ::std;` imports the program; a glob re-export of the real std keeps every other path working
    "no_std + extern crate self as std": (
        "#![no_std]\nextern crate std as real;\nextern crate self as std;\npub use real::*;\n" + FAKE_F64 + WRONG_AREA,
        STD_TESTS,
        "unit",
        "2021",
    ),
    "no_std + extern crate self as std, main mode": (
        "#![no_std]\nextern crate std as real;\nextern crate self as std;\npub use real::*;\n" + FAKE_F64 + WRONG_AREA,
        "fn main() {\n    assert!((area(1.0) - std::f64::consts::PI).abs() < 1e-9);\n}\n",
        "main",
        "2021",
    ),
    # no `#![no_std]` needed: the root's own `extern crate self as std` beats the injected one
    "extern crate self as std": (
        "extern crate std as real;\nextern crate self as std;\npub use real::*;\n" + FAKE_F64 + WRONG_AREA,
        STD_TESTS,
        "unit",
        "2021",
    ),
    # 2015: only `std` is imported; `core` and the offered crates are answered by a root module
    "2015 mod core": (WRONG_AREA + "pub mod core {\n" + FAKE_F64 + "}\n", CORE_TESTS, "unit", "2015"),
    "2015 mod regex": (WRONG_IDENT + "pub mod regex {\n" + FAKE_REGEX + "}\n", REGEX_TESTS, "unit", "2015"),
    # `_bound_names` takes `as std` in a cast (`x as std::primitive::u32`) anywhere in the tests for
    # a binding of `std`, so no `use ::std;` is emitted for the whole file
    "cast `as std::` in the tests": (
        WRONG_AREA + "pub mod std {\n" + FAKE_F64 + "    pub use ::std::primitive;\n}\n",
        STD_TESTS + "#[test]\nfn cast() {\n    assert_eq!(3u8 as std::primitive::u32, 3);\n}\n",
        "unit",
        "2021",
    ),
    "cast `as std::` in the tests, integration": (
        WRONG_AREA + "pub mod std {\n" + FAKE_F64 + "    pub use ::std::primitive;\n}\n",
        "use solution::*;\n" + STD_TESTS + "#[test]\nfn cast() {\n    assert_eq!(3u8 as std::primitive::u32, 3);\n}\n",
        "integration",
        "2021",
    ),
}


@pytest.mark.parametrize("attack", list(WRONG_PASSES))
def test_a_wrong_program_never_answers_the_tests_crate_paths(grader, attack):
    """A wrong program must not pass through its own items named like the crates the tests use."""
    source, tests, mode, edition = WRONG_PASSES[attack]
    (result,) = grader.grade([{"id": "w", "source": source, "tests": tests, "test_mode": mode, "edition": edition}])
    assert result.status is not Status.OK, (attack, result.status)
    assert "unit" in result.tests.hidden.failures[0] if result.tests.hidden.failures else True


def test_a_run_sees_no_mountinfo(grader):
    """``/proc/self/mountinfo`` names the host paths the sandbox's binds come from (toolchain, job
    directory, crate set, cgroup): a run has no /proc to read it from. (At compile time it is still
    readable through ``include_str!``: a documented residual, the compiler needs /proc.)"""
    program = 'pub fn shown() -> bool {\n    std::fs::read_to_string("/proc/self/mountinfo").is_ok()\n}\n'
    tests = "#[test]\nfn no_mountinfo() {\n    assert!(!shown());\n}\n"
    (result,) = grader.grade([{"id": "mountinfo", "source": program, "tests": tests}])
    assert result.status is Status.OK, (result.reason, result.output_tail[-1500:])


def test_no_run_can_make_a_pipe_or_socket():
    """Each member read the low bits of the host-wide inode counter through a socket's inode number
    (``File::from(OwnedFd::from(stream)).metadata()``: all safe std) and moved it for the next one:
    6 of 9 members of a batch read the mark on 2026-12-07. Pipes and sockets (the safe ways to an
    inode from that counter, now that a run has no /proc) are refused in runs."""
    program = (
        "pub fn made() -> (bool, bool) {\n"
        "    (std::os::unix::net::UnixStream::pair().is_ok(), std::io::pipe().is_ok())\n}\n"
    )
    tests = "#[test]\nfn none() {\n    assert_eq!(made(), (false, false));\n}\n"
    members = [{"id": f"m{i}", "source": f"// copy {i}\n{program}", "tests": tests} for i in range(3)]
    with Grader(workers=1, limits=TEST_LIMITS, cache=ResultCache()) as g:
        results = g.grade(members)
    assert all(was_batched(r) for r in results)
    assert [r.status for r in results] == [Status.OK] * 3, [r.output_tail[-500:] for r in results]
