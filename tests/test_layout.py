"""The packages' import rules, read from the source with ``ast``: no import cycle between modules
(imports inside functions included), subpackages that import each other in one direction only, no
module importing another's private (underscore) name, and ``reward_sandbox`` independent of
``rust_grpo`` and of torch."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import ROOT

PACKAGES = ("reward_sandbox", "rust_grpo")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[ast.stmt, str, list[str]]]:
    """Every import statement of the module (function-level ones included), with the module it
    reads from, made absolute, and the names it takes (``[]`` for ``import x``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[ast.stmt, str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            out.append((node, source, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((node, a.name, []) for a in node.names)
    return out


def _graph() -> dict[str, set[str]]:
    """Module -> the modules it imports, wherever the import stands (in a function, under
    ``TYPE_CHECKING``); a package's ``__init__`` counts as a module."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        graph[name] = set()
        for _, source, names in _imports(name, path):
            targets = [f"{source}.{n}" for n in names if f"{source}.{n}" in MODULES] or [source]
            graph[name] |= {t for t in targets if t in MODULES and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join([*stack[stack.index(dep) :], dep]))
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_no_import_cycle() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _subpackage(module: str) -> str | None:
    """``reward_sandbox.compile`` for ``reward_sandbox.compile.lexer``; None for a top-level module."""
    parts = module.split(".")
    is_package = MODULES[module].name == "__init__.py"
    return ".".join(parts[:2]) if len(parts) > 2 or (len(parts) == 2 and is_package) else None


def test_subpackages_import_each_other_in_one_direction() -> None:
    """A subpackage that needs another is never needed by it, even by way of a third."""
    uses: dict[str, set[str]] = {}
    for name, deps in _graph().items():
        for dep in deps:
            a, b = _subpackage(name), _subpackage(dep)
            if a and b and a != b:
                uses.setdefault(a, set()).add(b)
    assert "reward_sandbox.compile" in uses["reward_sandbox.isolation"]  # the check sees real edges
    cycles = _cycles(uses)
    assert not cycles, "subpackages that import each other:\n" + "\n".join(cycles)


# reward_sandbox's leaves: the contract and what every layer shares. They import only each other, and
# the lowest subpackages import no other top-level module, so no layer reaches up to one that uses it.
LEAVES = {f"reward_sandbox.{m}" for m in ("jobs", "results", "status", "cachedir", "cliargs")}
LOW_SUBPACKAGES = ("reward_sandbox.compile", "reward_sandbox.isolation")


def test_leaves_and_low_subpackages_import_no_module_above_them() -> None:
    graph = _graph()
    found = [f"{name} -> {dep}" for name in sorted(LEAVES) for dep in sorted(graph[name]) if dep not in LEAVES]
    found += [
        f"{name} -> {dep}"
        for name, deps in sorted(graph.items())
        if _subpackage(name) in LOW_SUBPACKAGES
        for dep in sorted(deps)
        if dep.startswith("reward_sandbox.") and _subpackage(dep) is None and dep not in LEAVES
    ]
    assert not found, "imports that reach up a layer:\n" + "\n".join(found)


def test_no_private_name_crosses_modules() -> None:
    """What two modules share gets a public name in one of them; the tests, too, use what the
    packages make public (a private helper is tested through what calls it, or made public)."""
    tests = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts): path for path in sorted((ROOT / "tests").rglob("*.py"))
    }
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {source}.{n}"
        for name, path in {**MODULES, **tests}.items()
        for node, source, names in _imports(name, path)
        for n in names
        if n.startswith("_") and not n.startswith("__") and source.startswith(PACKAGES)
    ]
    assert not found, "private names imported from another module:\n" + "\n".join(found)


@pytest.mark.parametrize("forbidden", ["rust_grpo", "torch", "transformers", "trl"])
def test_reward_sandbox_stands_alone(forbidden: str) -> None:
    found = [
        f"{MODULES[name].relative_to(ROOT)}: {source}"
        for name, path in MODULES.items()
        if name.startswith("reward_sandbox")
        for _, source, _ in _imports(name, path)
        if source.split(".")[0] == forbidden
    ]
    assert not found, f"reward_sandbox imports {forbidden}:\n" + "\n".join(found)


def test_every_package_says_what_it_is_for() -> None:
    for name, path in MODULES.items():
        if path.name == "__init__.py":
            assert ast.get_docstring(ast.parse(path.read_text())), f"{name}: no docstring"
