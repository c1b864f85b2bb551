"""The reward components: each maps one :class:`~.verdict.Evaluation` to a reward in [0, 1] (or None).

TRL calls one reward function per component with the same batch (``trl_rewards.py``); all of them
read one grading of each completion (``context.py``). When the sandbox cannot grade a completion,
*every* component is None for it (:func:`reward_value`): TRL drops a completion only when all of
them are, so a fault never reads as a bad (or a good) program. Own tests earn credit only when they
would catch wrong versions of the asked function (``mutants.py`` and
:attr:`Evaluation.catching_tests`). :data:`REWARDS` is the one registry: its order is the order of
the components everywhere (TRL's reward functions, ``reward.weights``, reports).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .audit import code_view, matching_brace
from .verdict import Evaluation

_TEST_MOD = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]\s*(?:pub\s+)?mod\s+\w+\s*\{")


# --- The components: each maps one Evaluation to a reward in [0, 1], or None (unknown) -------
# reward_value turns every component into None when the sandbox could not grade the completion.


def format_reward(e: Evaluation) -> float:
    """1 when the answer follows the run's format (think: <think>...</think> then exactly one ```rust
    block; oxen: exactly one ```rust block); 0.5 for the block alone in the think format."""
    if e.format_ok:
        return 1.0
    return 0.5 if e.parsed.lone_block else 0.0


def _test_module(code: str) -> str | None:
    """The text of the program's ``#[cfg(test)] mod`` (found in the code view: not in comments or
    strings), if any."""
    clean = code_view(code)
    match = _TEST_MOD.search(clean)
    if match is None:
        return None
    return code[match.start() : matching_brace(clean, match.end() - 1) + 1]


def non_empty_reward(e: Evaluation) -> float:
    """1 when the code block and a test module are there and the code has at least 3 lines that are not
    comments or blank (Oxen's "non-empty")."""
    code = e.parsed.code or ""
    if e.parsed.rust_blocks != 1 or _test_module(code) is None:
        return 0.0
    lines = [line.strip() for line in code.splitlines()]
    return 1.0 if sum(len(line) >= 2 and not line.startswith("//") for line in lines) >= 3 else 0.0


def test_block_reward(e: Evaluation) -> float:
    """1 when the code holds a ``#[cfg(test)] mod`` (Oxen's "test block")."""
    return 1.0 if e.parsed.code and _test_module(e.parsed.code) is not None else 0.0


def asserts_reward(e: Evaluation) -> float:
    """0.25 for each distinct ``assert!``/``assert_eq!`` line in the test module, up to 1 (Oxen's)."""
    module = _test_module(e.parsed.code or "") if e.parsed.code else None
    if module is None:
        return 0.0
    asserts = {line.strip() for line in module.splitlines() if line.strip().startswith(("assert!(", "assert_eq!("))}
    return min(1.0, 0.25 * len(asserts))


def code_block_reward(e: Evaluation) -> float:
    """1 for exactly one ```rust block."""
    return 1.0 if e.parsed.lone_block else 0.0


def tests_present_reward(e: Evaluation) -> float:
    """Own tests that would catch a bug (pass here, fail on every wrong version), up to ``e.min_tests``."""
    return min(len(e.catching_tests), e.min_tests) / e.min_tests


def build_reward(e: Evaluation) -> float:
    """1 when the program compiles as an answer (see :attr:`Evaluation.builds`; lints never decide this)."""
    return 1.0 if e.builds else 0.0


def clippy_reward(e: Evaluation) -> float:
    """1 with no warning, 0.5 with one, 0.1 less for each more; 0 when it does not build. Lints are
    forced in the sandbox, so source attributes cannot raise this."""
    if e.result is None or not e.builds:
        return 0.0
    warnings = e.result.clippy.warnings
    return 1.0 if warnings == 0 else max(0.0, 0.5 - 0.1 * (warnings - 1))


def own_tests_reward(e: Evaluation) -> float:
    """Share of the program's own tests that would catch a bug, out of at least ``e.min_tests``."""
    if e.audit is None:
        return 0.0
    return len(e.catching_tests) / max(len(e.audit.tests), e.min_tests)


def hidden_tests_reward(e: Evaluation) -> float | None:
    """Share of the row's hidden tests passed (of all it holds); None for rows without hidden tests."""
    if not e.has_hidden:
        return None
    if e.result is None:
        return 0.0
    hidden = e.result.tests.hidden
    if e.hacked or not hidden.trusted:
        return 0.0
    total = max(hidden.total, hidden.expected)
    return hidden.passed / total if total else 0.0


def gated_build_reward(e: Evaluation) -> float:
    """``build`` as a gate rather than a prize: 1 when the program builds as an answer *and* passes at
    least one of the row's hidden tests honestly (rows without hidden tests: when it builds). A stub
    that compiles and ignores its arguments (``Vec::new()`` for ``gray_code``) fails them all, so it
    earns nothing here, where ``build`` pays it in full."""
    if not e.builds or e.result is None:
        return 0.0
    if not e.has_hidden:
        return 1.0
    hidden = e.result.tests.hidden
    return 1.0 if hidden.trusted and hidden.passed > 0 and not e.hacked else 0.0


def all_hidden_reward(e: Evaluation) -> float | None:
    """A bonus for being right: 1 when every hidden test of the row passes (see
    :attr:`Evaluation.hidden_pass`); None for rows without hidden tests."""
    if not e.has_hidden:
        return None
    return 1.0 if e.hidden_pass else 0.0


def build_using_args_reward(e: Evaluation) -> float:
    """``build`` for answers that read their input: 1 when the program builds as an answer and the
    asked function (the row's, ``argless.asked_function``) names at least one of its parameters (or
    takes none); else 0.
    Never more than ``build`` pays, so nothing ``build`` closes reopens here; a stub that only names
    an argument (``let _ = n;``) still earns it, so ``rates/argless_builds`` and the hidden tests,
    not this reward, say whether the policy is right."""
    return 1.0 if e.builds and not e.argless else 0.0


REWARDS: dict[str, Callable[[Evaluation], float | None]] = {
    "format": format_reward,
    "code_block": code_block_reward,
    "tests_present": tests_present_reward,
    "build": build_reward,
    "clippy": clippy_reward,
    "own_tests": own_tests_reward,
    "hidden_tests": hidden_tests_reward,
    "non_empty": non_empty_reward,
    "test_block": test_block_reward,
    "asserts": asserts_reward,
    # rewards that pay for being right (issue 27), after the components above
    "gated_build": gated_build_reward,
    "all_hidden": all_hidden_reward,
    "build_using_args": build_using_args_reward,
}
REWARD_NAMES: tuple[str, ...] = tuple(REWARDS)


def reward_value(name: str, e: Evaluation) -> float | None:
    """One component's reward for ``e``: None for every component when the sandbox failed on it."""
    return None if e.unknown else REWARDS[name](e)


def reward_values(e: Evaluation) -> dict[str, float | None]:
    """Every component by name (what ``rust-grpo score`` writes under ``rewards``)."""
    return {name: reward_value(name, e) for name in REWARD_NAMES}
