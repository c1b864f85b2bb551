"""Own-test credit means catching wrong versions of the asked function, and the asked function is the
row's (issue 46, item 6): the wrong versions, the asked functions, and the rewards on the real sandbox."""

import pytest

from rust_grpo.problems.schema import Problem, load_problems
from rust_grpo.rewards.argless import asked_function, asked_functions, function_definitions, ignores_arguments
from rust_grpo.rewards.context import RewardContext
from rust_grpo.rewards.functions import reward_values
from rust_grpo.rewards.mutants import has_default, perturbation, return_type, wrong_versions

GRAY_TESTS = "#[test]\nfn case_1() {\n    assert_eq!(gray_code(2), vec![0, 1, 3, 2]);\n}\n"
FIND_TESTS = (
    "#[test]\nfn case_1() {\n    assert_eq!(find(&[4, 9], 9), Some(1));\n}\n"
    "#[test]\nfn case_2() {\n    assert_eq!(find(&[4], 5), None);\n}\n"
)
ADD_TESTS = "#[test]\nfn h1() { assert_eq!(add(2, 3), 5); }\n#[test]\nfn h2() { assert_eq!(add(-1, 1), 0); }\n"


def fenced(code: str) -> str:
    return f"<think>x</think>\n```rust\n{code}\n```"


def own_tests(*bodies: str) -> str:
    tests = "".join(f"\n    #[test]\n    fn t{i}() {{ {body} }}\n" for i, body in enumerate(bodies))
    return f"\n#[cfg(test)]\nmod tests {{\n    use super::*;\n{tests}}}\n"


# --- the asked functions: the row's, never the tests' own nor the program's ---------------------


def test_the_asked_functions_are_called_by_the_tests_and_defined_by_the_reference_not_by_the_tests():
    assert asked_functions(GRAY_TESTS) == ("gray_code",)  # `fn case_1()` is a definition, not a call
    helper = "fn check(n: u32) { assert_eq!(gray_code(n).len(), 1 << n); }\n#[test]\nfn t() { check(3); }\n"
    assert asked_functions(helper) == ("gray_code", "len")  # the tests' own `check` is never asked
    reference = "pub fn gray_code(n: u32) -> Vec<u32> { (0..1u32 << n).map(|i| i ^ (i >> 1)).collect() }"
    assert asked_functions(helper, reference) == ("gray_code",)  # a method of std is not the row's
    struct_tests = "#[test]\nfn t() { let mut a = Account::new(); a.deposit(5); assert_eq!(a.balance(), 5); }\n"
    account = "impl Account { pub fn new() -> Self { todo!() } pub fn deposit(&mut self, n: u64) {} pub fn balance(&self) -> u64 { 0 } fn audit(&self) {} }"
    assert asked_functions(struct_tests, account) == ("new", "deposit", "balance")
    assert asked_functions("") == () and asked_functions("#[test]\nfn t() { assert!(true); }\n") == ()


def test_an_own_test_named_like_a_hidden_test_does_not_become_the_asked_function():
    stub = "pub fn gray_code(n: u32) -> Vec<u32> { Vec::new() }" + own_tests("assert!(gray_code(0).is_empty());")
    stub = stub.replace("fn t0()", "fn case_1()")
    assert "fn case_1()" in stub and asked_function(stub, GRAY_TESTS) == "gray_code"
    assert ignores_arguments(stub, GRAY_TESTS) is True
    # defined first, ahead of the asked function, it is still not the one judged
    first = (
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn case_1() {}\n}\npub fn gray_code(n: u32) -> Vec<u32> { vec![] }"
    )
    assert ignores_arguments(first, GRAY_TESTS) is True


def test_a_body_after_a_return_type_holding_a_semicolon_is_found():
    code = "pub fn parse_ipv4(s: &str) -> Option<[u8; 4]> {\n    s.parse().ok().map(|n: u32| n.to_be_bytes())\n}\n"
    assert list(function_definitions(code)) == ["parse_ipv4"]
    assert ignores_arguments(code, '#[test]\nfn t() { assert_eq!(parse_ipv4("x"), None); }\n') is False


def test_every_shipped_row_asks_for_functions_its_reference_defines():
    """Rows asking for trait impls only (Display) ask for none; every other row's asked functions are
    the reference's, and the reference reads its arguments."""
    rows = load_problems("data/train.jsonl") + load_problems("data/eval.jsonl")
    empty = {r.id for r in rows if not asked_functions(r.tests, r.solution)}
    assert empty <= {"display_error", "temperature_display"}, empty
    for r in rows:
        assert set(asked_functions(r.tests, r.solution)) <= set(function_definitions(r.solution))
        assert ignores_arguments(r.solution, r.tests, r.solution) in (False, None), r.id


# --- the wrong versions: the asked functions only, answering wrongly in more than one way -------

PROGRAM = """pub struct Token(pub u8);

fn token(b: u8) -> Token {
    Token(b)
}

pub const fn double(x: i32) -> i32 {
    x * 2
}

pub fn find(xs: &[i32], x: i32) -> Option<usize> {
    let _ = token(0);
    for (i, &y) in xs.iter().enumerate() {
        if y == x {
            return Some(i);
        }
    }
    None
}
"""


def test_wrong_versions_change_the_asked_functions_and_leave_helpers_as_written():
    versions = wrong_versions(PROGRAM, ["find"])
    assert list(versions) == ["default", "perturbed", "todo"]
    for source in versions.values():
        assert "Token(b)" in source and "x * 2" in source  # helpers as written
    assert "Default::default()" in versions["default"].split("pub fn find")[1]
    assert "return Some(i);" in versions["perturbed"] and "__rg_v" in versions["perturbed"]
    assert versions["todo"].split("pub fn find")[1].count("todo!()") == 1
    # every function when the row names none (no hidden tests); `const fn` loses `const` once changed
    everything = wrong_versions(PROGRAM, None)
    assert "Token(b)" not in everything["todo"] and "pub const fn double" in everything["todo"]  # panics in const
    assert "pub  fn double" in everything["default"] and "pub  fn double" in everything["perturbed"]
    assert "Token(b)" in everything["perturbed"]  # a Token answer cannot be made wrong but by a panic
    assert wrong_versions(PROGRAM, ["gray_code"]) == {}  # nothing asked is defined: no version at all
    # a function returning the program's own type can only panic: no answering version
    assert list(wrong_versions(PROGRAM, ["token"])) == ["todo"]


@pytest.mark.parametrize(
    ("header", "ty", "default", "perturbable"),
    [
        ("(xs: &[i32]) -> Option<usize> ", "Option<usize>", True, True),
        ("<F: Fn(i32) -> i32>(f: F) -> i64 where F: Copy ", "i64", True, True),
        ("(&mut self, n: u64) ", "", True, False),
        ("(s: &str) -> Result<u32, AgeError> ", "Result<u32, AgeError>", False, True),
        ("(self) -> Self ", "Self", False, False),
        ("(a: &str) -> std::cmp::Ordering ", "std::cmp::Ordering", False, True),
        ("(n: u32) -> impl Iterator<Item = u32> ", "impl Iterator<Item = u32>", False, False),
        ("<'a>(s: &'a str) -> (Vec<&'a str>, String) ", "(Vec<&'a str>, String)", True, True),
        ("(p: (A, B)) -> (B, A) ", "(B, A)", False, False),
    ],
)
def test_return_types_decide_which_wrong_answers_can_be_written(header, ty, default, perturbable):
    assert return_type(header) == ty
    assert has_default(ty) is default
    assert (perturbation(ty, "v") is not None) is perturbable


# --- the rewards on the real sandbox --------------------------------------------------------------


def graded(grader, programs: list[str], tests: str, solution: str = ""):
    context = RewardContext(grader)
    row = Problem(id="row", prompt="", tests=tests, solution=solution)
    evaluations = context.evaluate([fenced(p) for p in programs], [row] * len(programs))
    return evaluations, [reward_values(e) for e in evaluations]


@pytest.mark.cargo
def test_tautologies_earn_no_own_test_credit_when_a_helper_has_no_default(grader):
    """(a) A helper returning a type without ``Default`` used to leave only the panicking version,
    which any test that calls the function catches; now the asked function alone changes."""
    tautology = PROGRAM + own_tests(
        "let r = find(&[1, 2], 2); assert!(r.is_some() || r.is_none());",
        "let r = find(&[1], 5); assert!(r.is_none() || r.is_some());",
    )
    honest = PROGRAM + own_tests("assert_eq!(find(&[1, 2], 2), Some(1));", "assert_eq!(find(&[3, 1], 3), Some(0));")
    (taut, right), (taut_r, right_r) = graded(grader, [tautology, honest], FIND_TESTS)
    assert taut.own_tests_pass and taut.hidden_pass and taut.catching_tests == frozenset()
    assert taut_r["own_tests"] == 0.0 and taut_r["tests_present"] == 0.0
    assert {r.build.ok for r in taut.mutant_results} == {True}  # every wrong version built
    assert right.catching_tests == {"tests::t0", "tests::t1"}
    assert right_r["own_tests"] == 1.0 and right_r["tests_present"] == 1.0 and right_r["hidden_tests"] == 1.0


@pytest.mark.cargo
def test_own_tests_of_a_helper_alone_earn_nothing_right_or_wrong_asked_function(grader):
    """(b) The wrong versions change the asked function only: tests of a helper never catch them."""
    helper_tests = own_tests("assert_eq!(double(2), 4);", "assert_eq!(double(-3), -6);")
    helper = "pub fn double(x: i32) -> i32 {\n    x * 2\n}\n"
    wrong = helper + "pub fn add(a: i32, b: i32) -> i32 {\n    double(a) - b\n}\n" + helper_tests
    right = helper + "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n" + helper_tests
    both = right.replace("assert_eq!(double(-3), -6);", "assert_eq!(add(2, 3), 5);")
    evaluations, rewards = graded(grader, [wrong, right, both], ADD_TESTS)
    assert [e.own_tests_pass for e in evaluations] == [True, True, True]
    assert [r["own_tests"] for r in rewards] == [0.0, 0.0, 0.5]  # only `add`'s test catches
    assert [r["hidden_tests"] for r in rewards] == [0.0, 1.0, 1.0]


@pytest.mark.cargo
def test_an_own_test_named_case_1_does_not_earn_an_argless_stub_build_using_args(grader):
    """(c) The asked function is the row's, not the first name the hidden tests' text shows."""
    stub = "pub fn gray_code(n: u32) -> Vec<u32> {\n    Vec::new()\n}\n"
    honest = "pub fn gray_code(n: u32) -> Vec<u32> {\n    (0..1u32 << n).map(|i| i ^ (i >> 1)).collect()\n}\n"
    case_1 = own_tests("assert!(gray_code(0).len() <= 1);").replace("fn t0()", "fn case_1()")
    (s, h), (stub_r, honest_r) = graded(grader, [stub + case_1, honest + case_1], GRAY_TESTS, solution=honest)
    assert s.argless and not h.argless
    assert stub_r["build"] == 1.0 and stub_r["build_using_args"] == 0.0
    assert honest_r["build"] == 1.0 and honest_r["build_using_args"] == 1.0 and honest_r["hidden_tests"] == 1.0


@pytest.mark.cargo
def test_a_right_program_with_real_tests_of_several_asked_functions_earns_full_credit(grader):
    """Each answering version changes every asked function it can (``find`` gets a default answer in
    one, ``parse`` a perturbed one in both): a test of either catches both versions."""
    program = (
        "pub fn find(xs: &[i32], x: i32) -> Option<usize> {\n    xs.iter().position(|&y| y == x)\n}\n\n"
        "pub fn parse(s: &str) -> Result<i64, String> {\n    s.parse::<i64>().map_err(|e| e.to_string())\n}\n"
    )
    tests = FIND_TESTS + '#[test]\nfn case_3() {\n    assert_eq!(parse("12"), Ok(12));\n}\n'
    code = program + own_tests(
        "assert_eq!(find(&[1, 2], 2), Some(1));", 'assert_eq!(parse("7"), Ok(7));', 'assert!(parse("x").is_err());'
    )
    (e,), (r,) = graded(grader, [code], tests, solution=program)
    assert e.mutant_kinds == ("default", "perturbed", "todo") and all(m.build.ok for m in e.mutant_results)
    assert e.catching_tests == {"tests::t0", "tests::t1", "tests::t2"}, [m.tests.own for m in e.mutant_results]
    assert r["own_tests"] == 1.0 and r["hidden_tests"] == 1.0


@pytest.mark.cargo
def test_the_wrong_versions_of_every_demo_reference_build_and_its_hidden_tests_catch_them(grader):
    """Build reliability on real answers: each demo row's reference with its hidden tests as its own."""
    problems = load_problems("data/demo.jsonl")
    programs = [p.solution + "\n#[cfg(test)]\nmod tests {\n    use super::*;\n" + p.tests + "}\n" for p in problems]
    context = RewardContext(grader)
    evaluations = context.evaluate([fenced(c) for c in programs], problems)
    for p, e in zip(problems, evaluations):
        assert e.own_tests_pass and e.mutant_results, p.id
        assert all(m.build.ok for m in e.mutant_results), (p.id, [m.reason for m in e.mutant_results])
        assert e.catching_tests, p.id
