"""The one ``use``-tree parser (``reward_sandbox/compile/usetree.py``) that the audit's path expansion
and the hidden tests' trait scope share."""

import pytest

from reward_sandbox.compile.lexer import code_tokens
from reward_sandbox.compile.trait_scope import scope_refusal
from reward_sandbox.compile.usetree import Binding, join_paths, use_tree


def tree(declaration: str) -> list[Binding]:
    texts = join_paths([text for _, text in code_tokens(declaration)])
    assert texts[0] == "use"
    bindings, end = use_tree(texts, 1)
    assert texts[end:] == [";"], texts[end:]
    return bindings


@pytest.mark.parametrize(
    ("declaration", "expected"),
    [
        ("use std::process::exit;", [Binding("exit", ("std", "process", "exit"))]),
        ("use std::process as p;", [Binding("p", ("std", "process"))]),
        ("use ::std::fmt::Write as _;", [Binding("_", ("std", "fmt", "Write"))]),
        ("use std::process::*;", [Binding("", ("std", "process"), glob=True)]),
        (
            "use std::io::{self, Read as R, prelude::*};",
            [
                Binding("io", ("std", "io")),
                Binding("R", ("std", "io", "Read")),
                Binding("", ("std", "io", "prelude"), glob=True),
            ],
        ),
        ("use {a::B, c::D as _};", [Binding("B", ("a", "B")), Binding("_", ("c", "D"))]),
        ("use r#crate_x::r#type;", [Binding("type", ("crate_x", "type"))]),
        ("use $crate::Tr as _;", [Binding("_", ("*", "Tr"))]),
        ("use a::b as $name;", [Binding("*", ("a", "b"))]),
    ],
)
def test_what_a_use_declaration_binds(declaration, expected):
    assert tree(declaration) == expected


def test_a_token_it_cannot_parse_in_a_group_is_skipped_not_fatal():
    assert tree("use a::{B, 3, C};") == [Binding("B", ("a", "B")), Binding("C", ("a", "C"))]


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("use std::fmt::Write as _;", False),
        ("use std::io::{self, Write as _};", False),
        ("use {core::fmt::Write as _, std::io::Read as _};", False),
        ("mod inner { pub trait Sure {} } use inner::Sure as _;", True),
        ("use {std::io::Read as _, crate::inner::Sure as _};", True),
        ("macro_rules! m { () => { use $crate::Sure as _; } }", True),
        ("use std::io::Read as _ inner::Sure as _;", True),  # an `as _` the tree cannot place
    ],
)
def test_anonymous_imports_outside_std_are_refused(source, refused):
    assert (scope_refusal(source) is not None) is refused


def test_an_anonymous_import_of_no_path_is_refused():
    assert scope_refusal("mod m { pub trait T {} use {self as _}; }") is not None
