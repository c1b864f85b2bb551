"""The program's traits the hidden tests reach are decided by the compiler (compile/trait_scope.py).

Every trait name of the program is shadowed from the hidden tests first; a build that fails only
for want of some of them grades the job again with exactly those back, or refuses it when one is
implemented for a type the program does not own. Each shape is graded batched (several jobs in one
``grade`` call) and alone (a grader that never batches), with real rustc in the real sandbox.
"""

from __future__ import annotations

import pytest

from reward_sandbox import Grader, Status
from reward_sandbox.cache import ResultCache
from reward_sandbox.compile.trait_scope import foreign_impl, shadows

from ..conftest import TEST_LIMITS, needs_bwrap

# ---- what is shadowed and what may come back (no compiler) ------------------------------------------


def test_every_trait_is_shadowed_however_the_tests_write_its_name():
    """Names the tests use as values (a loop variable, a closure parameter, a field value) keep no
    program trait in their scope; only a declaration of theirs in the same scope does."""
    source = "pub trait n {}\npub trait m {}\npub trait value {}\npub trait Shape {}\npub trait Named {}\n"
    tests = (
        "use super::Named;\n#[test]\nfn t() {\n    for n in 0..2 { let _ = n; }\n    let f = |m: usize| m;\n"
        "    struct P { v: usize }\n    let value = f(1);\n    let _ = P { v: value };\n"
        "    fn area<T: Shape>(_: T) {}\n}\n"
    )
    shade = shadows(source, tests)
    assert shade.names == {"n", "m", "value", "Shape"}
    assert "mod Shape {}" in shade.outer and "mod n {}" in shade.outer and "Named" not in shade.outer
    assert shadows(source, tests, keep=frozenset({"Shape"})).names == {"n", "m", "value"}
    assert shadows("pub trait r#type {}\n", "").outer == "#[allow(warnings)] mod r#type {} "


OWN = "pub struct Queen;\npub enum Side { A }\npub trait Piece { fn at(&self) -> i32 { 0 } }\n"


@pytest.mark.parametrize(
    "impls",
    [
        "impl Piece for Queen {}\nimpl Piece for Side {}\n",
        "impl<T> Piece for Wrap<T> {}\npub struct Wrap<T>(T);\n",
        "mod inner {\n    pub struct Own;\n    impl super::Piece for Own {}\n}\n",
    ],
)
def test_a_needed_trait_comes_back_for_the_programs_own_types(impls):
    assert foreign_impl(OWN + impls, {"Piece"}) is None


@pytest.mark.parametrize(
    "impls",
    [
        "impl Piece for Vec<i32> {}\n",
        "impl Piece for &str {}\n",
        "impl Piece for &Queen {}\n",
        "impl Piece for (Queen, Queen) {}\n",
        "impl Piece for [i32; 3] {}\n",
        "impl Piece for Box<Queen> {}\n",
        "type Alias = Vec<i32>;\nimpl Piece for Alias {}\n",
        "impl<T> Piece for T {}\n",
        "impl<Queen> Piece for Queen {}\n",  # a parameter named like the program's struct
        "mod decoy {\n    pub struct Vec;\n}\nimpl Piece for Vec<i32> {}\n",  # a struct of its name elsewhere
        "#[cfg(any())]\npub struct Vec;\nimpl Piece for Vec<i32> {}\n",  # one that does not exist
        "macro_rules! imp {\n    ($t:ty) => {\n        impl Piece for $t {}\n    };\n}\nimp!(Vec<i32>);\n",
        "macro_rules! imp {\n    ($t:ident) => {\n        impl $t for Vec<i32> {}\n    };\n}\nimp!(Piece);\n",
        "use self::Piece as Other;\nimpl Other for Vec<i32> {}\n",
        "fn hidden() {\n    pub struct Queen;\n    impl Piece for Queen {}\n}\n",  # a block's own struct
    ],
)
def test_a_needed_trait_with_an_impl_for_a_foreign_type_is_refused(impls):
    assert foreign_impl(OWN + impls, {"Piece"}) is not None


# ---- graded: batched and alone ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def alone_grader():
    with Grader(workers=2, limits=TEST_LIMITS, cache=ResultCache(), batch=False) as g:
        yield g


def both_ways(grader: Grader, alone: Grader, jobs: list[dict]) -> list[list]:
    """The jobs' results graded together (one batch where the grader batches) and each alone."""
    return [grader.grade(jobs), alone.grade(jobs)]


ITEMS_RIGHT = "pub fn items(n: usize) -> Vec<i32> {\n    (0..n as i32).collect()\n}\n"
ITEMS_WRONG = "pub fn items(n: usize) -> Vec<i32> {\n    Vec::with_capacity(if n == 0 { 7 } else { 0 })\n}\n"
BY_VALUE = (  # a by-value `is_empty` that answers the tests' `items(..).is_empty()` for the wrong items
    "#[allow(non_camel_case_types)]\npub trait {name} {{\n    fn is_empty(self) -> bool;\n}}\n"
    "impl {name} for Vec<i32> {{\n    fn is_empty(self) -> bool {{\n        self.capacity() == 7\n    }}\n}}\n"
)
VALUE_NAMED_TESTS = (
    "#[test]\nfn nonempty() {\n    for n in 0..2 {\n        assert!(!items(n + 3).is_empty());\n    }\n"
    "    let check = |m: usize| items(m).is_empty();\n    assert!(check(0));\n"
    "    struct Probe {\n        v: usize,\n    }\n    let value = 0;\n    let probe = Probe { v: value };\n"
    "    assert!(items(probe.v).is_empty());\n}\n"
)


@pytest.mark.cargo
@pytest.mark.bwrap
@needs_bwrap
@pytest.mark.parametrize("name", ["n", "m", "value"])
def test_a_trait_named_like_a_value_of_the_tests_cannot_answer_their_calls(grader, alone_grader, name):
    """A loop variable, a closure parameter, a struct-literal field value: none keeps the trait."""
    wrong = ITEMS_WRONG + BY_VALUE.format(name=name)
    jobs = [
        {"id": "r", "source": ITEMS_RIGHT, "tests": VALUE_NAMED_TESTS},
        {"id": "w", "source": wrong, "tests": VALUE_NAMED_TESTS},
        {"id": "r2", "source": ITEMS_RIGHT + "\n", "tests": VALUE_NAMED_TESTS},
    ]
    for results in both_ways(grader, alone_grader, jobs):
        assert [r.status for r in results] == [Status.OK, Status.TEST_FAILURE, Status.OK], [
            (r.reason, r.output_tail[-400:]) for r in results
        ]
        assert results[1].tests.hidden.passed == 0


QUEEN = (
    "pub struct Queen(pub i32);\npub trait Piece {\n    fn attacks(&self, other: &Queen) -> bool;\n}\n"
    "impl Piece for Queen {\n    fn attacks(&self, other: &Queen) -> bool {\n        self.0 == other.0\n    }\n}\n"
)
QUEEN_TESTS = "#[test]\nfn same_row() {\n    assert!(Queen(1).attacks(&Queen(1)));\n    assert!(!Queen(1).attacks(&Queen(2)));\n}\n"
SPACE = (
    "pub struct Duration(f64);\nimpl From<u64> for Duration {\n    fn from(s: u64) -> Self {\n        Duration(s as f64)\n    }\n}\n"
    "pub trait Planet {\n    const YEAR: f64;\n    fn years_during(d: &Duration) -> f64 {\n        d.0 / Self::YEAR\n    }\n}\n"
    "pub struct Earth;\npub struct Mars;\nimpl Planet for Earth {\n    const YEAR: f64 = 31_557_600.0;\n}\n"
    "impl Planet for Mars {\n    const YEAR: f64 = 59_354_032.69;\n}\n"
)
SPACE_TESTS = (
    "#[test]\nfn earth() {\n    let d = Duration::from(1_000_000_000);\n    assert!((Earth::years_during(&d) - 31.69).abs() < 0.01);\n}\n"
    "#[test]\nfn mars() {\n    assert!((Mars::years_during(&Duration::from(2_129_871_239)) - 35.88).abs() < 0.01);\n}\n"
)
GREET = 'pub trait Greet {\n    fn hi(&self) -> String;\n}\nimpl Greet for u8 {\n    fn hi(&self) -> String {\n        format!("hi {self}")\n    }\n}\n'
GREET_TESTS = '#[test]\nfn greets() {\n    fn check<T: Greet>(t: T) -> String {\n        t.hi()\n    }\n    assert_eq!(check(3u8), "hi 3");\n}\n'


@pytest.mark.cargo
@pytest.mark.bwrap
@needs_bwrap
def test_helper_traits_the_tests_need_unnamed_come_back(grader, alone_grader):
    """Exercism's queen-attack (a method) and space-age (an associated function) answer through a
    helper trait the tests never name: the compiler says they need it, and it comes back. A trait the
    tests write as a bound comes back too, for a foreign type (the asked trait of a task). Unit and
    integration mode, among programs that need nothing."""
    integration = {"test_mode": "integration", "crate_name": "space_age"}
    jobs = [
        {"id": "queen", "source": QUEEN, "tests": QUEEN_TESTS},
        {"id": "items", "source": ITEMS_RIGHT, "tests": VALUE_NAMED_TESTS},
        {"id": "space", "source": SPACE, "tests": SPACE_TESTS},
        {"id": "greet", "source": GREET, "tests": GREET_TESTS},
        {"id": "space-int", "source": SPACE, "tests": "use space_age::*;\n" + SPACE_TESTS, **integration},
        {
            "id": "queen-int",
            "source": QUEEN,
            "tests": "use queen::*;\n" + QUEEN_TESTS,
            "test_mode": "integration",
            "crate_name": "queen",
        },
    ]
    for results in both_ways(grader, alone_grader, jobs):
        assert [r.status for r in results] == [Status.OK] * len(jobs), [
            (r.id, r.reason, r.output_tail[-600:]) for r in results
        ]


WRONG_QUEEN = ITEMS_WRONG + (
    "pub struct Queen(pub i32);\npub trait Piece {\n    fn attacks(&self, other: &Queen) -> bool {\n        true\n    }\n"
    "    fn is_empty(self) -> bool\n    where\n        Self: Sized,\n    {\n        false\n    }\n}\n"
)
FOREIGN = {
    "vec": "impl Piece for Queen {}\nimpl Piece for Vec<i32> {\n    fn is_empty(self) -> bool {\n        self.capacity() == 7\n    }\n}\n",
    "blanket": "impl<T> Piece for T {}\n",
    "alias": "impl Piece for Queen {}\ntype Items = Vec<i32>;\nimpl Piece for Items {}\n",
    "decoy_struct": "impl Piece for Queen {}\nmod decoy {\n    pub struct Vec;\n}\nimpl Piece for Vec<i32> {}\n",
    "macro": "impl Piece for Queen {}\nmacro_rules! imp {\n    ($t:ty) => {\n        impl Piece for $t {}\n    };\n}\nimp!(Vec<i32>);\n",
    "option": "impl Piece for Queen {}\nimpl Piece for Option<usize> {}\n",
    "slice": "impl Piece for Queen {}\nimpl Piece for [i32] {}\n",
    "reference": "impl Piece for Queen {}\nimpl Piece for &Vec<i32> {}\n",
}
NEEDED_TESTS = QUEEN_TESTS + (
    "#[test]\nfn nonempty() {\n    assert!(!items(3).is_empty());\n    assert!(items(0).is_empty());\n}\n"
)


@pytest.mark.cargo
@pytest.mark.bwrap
@needs_bwrap
@pytest.mark.parametrize("shape", list(FOREIGN))
def test_a_needed_trait_implemented_for_a_foreign_type_is_refused(grader, alone_grader, shape):
    """The tests need `attacks` from the trait, which also carries a by-value `is_empty` for a type
    the program does not own: bringing it back would let it answer std's calls, so it is refused."""
    jobs = [
        {"id": "w", "source": WRONG_QUEEN + FOREIGN[shape], "tests": NEEDED_TESTS},
        {"id": "r", "source": QUEEN + ITEMS_RIGHT, "tests": NEEDED_TESTS},
        {"id": "r2", "source": ITEMS_RIGHT + QUEEN, "tests": NEEDED_TESTS},
    ]
    for results in both_ways(grader, alone_grader, jobs):
        assert [r.status for r in results] == [Status.INVALID_INPUT, Status.OK, Status.OK], [
            (r.id, r.reason, r.output_tail[-600:]) for r in results
        ]
        assert "Piece" in results[0].reason and "need" in results[0].reason


@pytest.mark.cargo
@pytest.mark.bwrap
@needs_bwrap
def test_a_needed_trait_comes_back_alone(grader, alone_grader):
    """Only the trait the tests need comes back: another trait's by-value `is_empty` stays out."""
    wrong = ITEMS_WRONG + QUEEN + BY_VALUE.format(name="Sure")
    jobs = [
        {"id": "w", "source": wrong, "tests": NEEDED_TESTS},
        {"id": "r", "source": ITEMS_RIGHT + QUEEN + BY_VALUE.format(name="Sure"), "tests": NEEDED_TESTS},
    ]
    for results in both_ways(grader, alone_grader, jobs):
        assert [r.status for r in results] == [Status.TEST_FAILURE, Status.OK], [
            (r.id, r.reason, r.output_tail[-600:]) for r in results
        ]
        assert results[0].tests.hidden.failed == 1  # `same_row` passes through `Piece`, `nonempty` fails


@pytest.mark.cargo
@pytest.mark.bwrap
@needs_bwrap
def test_the_cargo_backend_brings_needed_traits_back_and_refuses_foreign_ones(cargo_grader):
    jobs = [
        {"id": "queen", "source": QUEEN, "tests": QUEEN_TESTS},
        {
            "id": "space",
            "source": SPACE,
            "tests": "use space_age::*;\n" + SPACE_TESTS,
            "test_mode": "integration",
            "crate_name": "space_age",
        },
        {"id": "w", "source": WRONG_QUEEN + FOREIGN["vec"], "tests": NEEDED_TESTS},
    ]
    results = cargo_grader.grade(jobs)
    assert [r.status for r in results] == [Status.OK, Status.OK, Status.INVALID_INPUT], [
        (r.id, r.reason, r.output_tail[-600:]) for r in results
    ]
