"""The answer formats a policy is asked for, defined in one place: the system prompt that asks for
it, the instruction added to each problem, how a reference answer is written in it (warm start),
and what counts as following it (the ``format`` reward).

- ``think`` (our default): reasoning inside ``<think>...</think>``, then exactly one ```rust block
  with the code and its ``#[cfg(test)] mod tests`` (DeepSeek-R1 style).
- ``oxen`` (the public Oxen.ai run): no tags; the reasoning goes in ``///`` comments above the
  function, then the tests as a ``mod tests`` of ``assert!``/``assert_eq!`` lines, all in exactly
  one ```rust block.
"""

from __future__ import annotations

from dataclasses import dataclass

from .parsing import ParsedCompletion


@dataclass(frozen=True)
class AnswerFormat:
    name: str
    system_prompt: str
    instruction: str  # appended to every problem's user message
    needs_think: bool  # whether <think>...</think> must come first
    # crates of the sandbox's set every prompt offers besides a row's own (``data.offer_crates``): carried
    # here so that training, the warm start and ``rust-grpo eval --config`` all ask the same question
    crates: tuple[str, ...] = ()

    def follows(self, parsed: ParsedCompletion) -> bool:
        """The completion has the requested shape (one ```rust block, and reasoning first if asked)."""
        return parsed.format_ok if self.needs_think else parsed.lone_block

    def render(self, reasoning: str, code: str) -> str:
        """A reference answer in this format (the warm start trains on these)."""
        if self.needs_think:
            return f"<think>\n{reasoning}\n</think>\n```rust\n{code}\n```"
        comments = "\n".join(f"/// {line}" for line in reasoning.splitlines())
        return f"```rust\n{comments}\n{code}\n```"


THINK = AnswerFormat(
    name="think",
    system_prompt=(
        "You are a careful Rust programmer. Think through the problem inside <think>...</think>, then answer "
        "with exactly one ```rust code block holding the complete solution and a #[cfg(test)] mod tests with "
        "#[test] functions whose asserts check your code. Use only the standard library."
    ),
    instruction=(
        "Answer format: first your reasoning inside <think>...</think>, then exactly one ```rust code block with "
        "the complete solution and a #[cfg(test)] mod tests holding #[test] functions that check it with asserts."
    ),
    needs_think=True,
)

OXEN = AnswerFormat(
    name="oxen",
    system_prompt=(
        "You write simple, readable Rust and you like test-driven development. Solve the task with a Rust function "
        "that builds with `cargo build` and passes `cargo clippy`, using only the standard library and plain types. "
        "Reason about the solution in /// comments directly above the function. After it, add a #[cfg(test)] "
        "mod tests that does `use super::*;` and holds #[test] functions made of several assert! or assert_eq! "
        "lines, one per line, with a short comment saying what each checks. Reply with one ```rust block and "
        "nothing else: no main function."
    ),
    instruction="Reply with exactly one ```rust block: the function with its /// reasoning, then its tests.",
    needs_think=False,
)

FORMATS = {f.name: f for f in (THINK, OXEN)}


def answer_format(name: str) -> AnswerFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown answer format {name!r}; known: {', '.join(FORMATS)}") from None
