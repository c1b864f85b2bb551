import pytest

from rust_grpo.problems.parsing import completion_text, parse_completion
from rust_grpo.rewards.audit import audit_code, code_view

GOOD = "<think>\nAdd them.\n</think>\n```rust\npub fn add(a: i32, b: i32) -> i32 { a + b }\n```\n"


def test_well_formed_answer():
    p = parse_completion(GOOD)
    assert p.format_ok and p.think == "Add them." and p.rust_blocks == 1
    assert p.code == "pub fn add(a: i32, b: i32) -> i32 { a + b }\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("```rust\nfn f() {}\n```", "no <think>"),
        ("<think>x</think> no code here", "no fenced code block"),
        ("<think>x</think>\n```rust\nfn f() {", "unterminated"),
        ("<think>x</think>\n```rust\nfn a() {}\n```\n```rust\nfn b() {}\n```", "2 rust blocks"),
        ("<think>x</think>\n```python\nprint(1)\n```", "not tagged ```rust"),
        ("```rust\nfn f() {}\n```\n<think>late</think>", "before </think>"),
        ("<think>x", "unclosed <think>"),
        # the shape is read from positions and counts, never from a mention (issue 46, item 7)
        ("<think>\n```rust\nfn f() {}\n```\n</think>\nThe ```rust block above.\n", "inside <think>"),
        (GOOD + "and ```python extra```\n", "another fence"),
        (GOOD + "```rust,ignore\nfn g() {}\n```\n", "another fence"),
        (GOOD + "~~~rust\nfn g() {}\n~~~\n", "another fence"),
        (GOOD + "~~~\nnotes\n~~~\n", "another fence"),
        (GOOD + "<think>\n", "a stray <think>"),
        ("<think>a</think>\n</think>\n```rust\nfn f() {}\n```\n", "a stray <think> or </think>"),
    ],
)
def test_malformed_answers_are_not_format_ok(text, problem):
    p = parse_completion(text)
    assert not p.format_ok
    assert any(problem in msg for msg in p.problems), p.problems


@pytest.mark.parametrize(
    "extra", ["and ```python extra```\n", "```rust,ignore\nfn g() {}\n```\n", "~~~rust\nfn g() {}\n~~~\n"]
)
def test_no_format_pays_for_a_block_beside_another_fence(extra):
    """Neither the half format reward, the code_block reward, nor the oxen format's "one block"."""
    from rust_grpo.problems.answer_format import answer_format

    bare = "```rust\npub fn f() {}\n```\n"
    assert parse_completion(bare).lone_block and answer_format("oxen").follows(parse_completion(bare))
    assert not parse_completion(bare + extra).lone_block
    assert not answer_format("oxen").follows(parse_completion(bare + extra))


def test_doc_test_fences_inside_the_rust_block_are_the_codes_own():
    text = "<think>\nx\n</think>\n```rust\n/// ```\n/// assert!(f());\n/// ```\npub fn f() -> bool { true }\n```\n"
    assert parse_completion(text).format_ok


def test_windows_newlines_and_untagged_single_block():
    p = parse_completion("<think>a</think>\r\n```\r\nfn f() {}\r\n```\r\n")
    assert p.code == "fn f() {}\n" and not p.format_ok


def test_conversational_completions():
    assert completion_text([{"role": "assistant", "content": "hi"}]) == "hi"
    assert completion_text("plain") == "plain"


CODE = """
pub fn add(a: i32, b: i32) -> i32 { a + b } // "}" in a comment
pub struct P;
impl P { pub fn go(&self) -> u8 { 1 } }
#[cfg(test)]
mod tests {
    use super::*;
    #[test] fn real() { assert_eq!(add(1, 2), 3); }
    #[test] fn always_true() { assert!(true); }
    #[test] fn self_equal() { let x = add(1, 1); assert_eq!(x, x); }
    #[test] fn literals_only() { assert_eq!(1 + 1, 2); }
    #[test] fn method() { assert_eq!(P.go(), 1); }
    #[test] #[should_panic] fn panics() { add(i32::MAX, 1); }
    #[test] fn braces_in_strings() { let s = "{"; assert_eq!(add(0, 0), s.len() as i32 - 1); }
    #[test] #[ignore] fn ignored() { assert_eq!(add(1, 1), 2); }
    #[test] fn no_assert() { add(1, 1); }
}
"""


def test_only_meaningful_tests_count():
    audit = audit_code(CODE)
    verdicts = {t.name.split("::")[-1]: t.meaningful for t in audit.tests}
    assert verdicts == {
        "real": True,
        "always_true": False,
        "self_equal": False,
        "literals_only": False,
        "method": True,
        "panics": True,
        "braces_in_strings": True,
        "ignored": False,
        "no_assert": False,
    }
    assert audit.meaningful_tests == 4
    assert {"add", "P", "go"} <= audit.defined and not audit.hacked


@pytest.mark.parametrize(
    ("code", "flag"),
    [
        ("pub fn f() -> i32 { std::process::exit(0) }", "exits the process"),
        ("pub fn f() { std::process::abort() }", "exits the process"),
        ("macro_rules! assert_eq { ($a:expr, $b:expr) => {}; }\npub fn f() {}", "redefines an assert macro"),
    ],
)
def test_cheating_code_is_flagged(code, flag):
    assert flag in audit_code(code).flags


def test_exit_inside_tests_only_is_not_flagged():
    code = "pub fn f() -> i32 { 1 }\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { if super::f() != 1 { std::process::exit(1) } }\n}\n"
    assert not audit_code(code).hacked


def test_strip_keeps_positions():
    code = 'let s = "a // b"; // c\nlet r = r#"x"#; /* y */ let c = \'{\';'
    clean = code_view(code)
    assert len(clean) == len(code) and "//" not in clean and "{" not in clean and clean.count("\n") == 1


@pytest.mark.parametrize(
    "code",
    [
        "use std::process as p;\npub fn f() -> i32 { p::exit(1 - 1) }",
        "use std::process::{exit as e};\npub fn f() -> i32 { e(0) }",
        "use std::process::{self as q, Command};\npub fn f() { q::abort() }",
        "use std::process::*;\npub fn f() -> i32 { exit(1 - 1) }",
        "use std as s;\nuse s::process as p;\npub fn f() { p::abort() }",
        "extern crate std as s;\npub fn f() { s::process::exit(0) }",
        "mod a { pub use std::process::exit as bye; }\npub fn f() { a::bye(0) }",
        "use std::process::r#exit as r#e;\npub fn f() { r#e(0) }",
        "macro_rules! m { ($x:ident) => { std::$x::exit(0) } }\npub fn f() { m!(process) }",
        "macro_rules! m { ($x:ident) => { std::process::$x(0) } }\npub fn f() { m!(exit) }",
        "pub fn f() { let g: fn(i32) -> ! = ::std::process::exit; g(0) }",
        "pub fn f() { std::alloc::handle_alloc_error(std::alloc::Layout::new::<u8>()) }",
    ],
)
def test_exits_are_found_through_use_aliases_and_macros(code):
    assert "exits the process" in audit_code(code).flags


@pytest.mark.parametrize(
    "code",
    [
        'pub fn f() -> &\'static str { "std::process::exit(0)" } // process::exit(0)',
        "pub struct S;\nimpl S { pub fn exit(&self) {} }\npub fn f(s: S) { s.exit() }",
        "pub fn exit(code: i32) -> i32 { code }\npub fn f() -> i32 { exit(0) }",
        'use std::process::Command;\npub fn f() { let _ = Command::new("true"); }',
        "/* use std::process as p; */ pub fn f(p: i32) -> i32 { p }",
    ],
)
def test_what_only_looks_like_an_exit_is_not_flagged(code):
    assert not audit_code(code).hacked
