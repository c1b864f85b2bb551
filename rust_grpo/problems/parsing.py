"""Parse a completion into its reasoning and its code, tolerating what small models emit.

The expected answer is ``<think>...</think>`` followed by exactly one fenced ```rust block.
We never guess code out of prose: no fenced block means no code (and no build reward).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)
_RUST_TAGS = {"rust", "rs"}
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
# any line that opens or closes a fence, in either spelling (the block pattern above reads only ``` with a
# plain tag): the format pays for exactly two such lines, the one rust block's
_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})", re.MULTILINE)


@dataclass(frozen=True)
class ParsedCompletion:
    think: str | None
    code: str | None  # the first rust block (or the only untagged block)
    rust_blocks: int
    other_blocks: int
    think_first: bool
    format_ok: bool
    problems: tuple[str, ...] = field(default=())
    lone_block: bool = False  # exactly one rust block and no other fence of any spelling anywhere


def completion_text(completion: object) -> str:
    """TRL passes conversational completions as a list of messages; plain ones as strings."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict) and m.get("role") == "assistant")
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return str(completion)


def parse_completion(text: str) -> ParsedCompletion:
    text = text.replace("\r\n", "\n")
    problems: list[str] = []
    thinks = _THINK.findall(text)
    think = thinks[0].strip() if thinks else None
    if not thinks:
        problems.append("no <think>...</think> block" if "<think>" not in text else "unclosed <think>")
    elif len(thinks) > 1:
        problems.append("more than one <think> block")
    after_think = text[text.find("</think>") + len("</think>") :] if thinks else text
    blocks = _FENCE.findall(text)
    rust = [body for tag, body in blocks if tag.lower() in _RUST_TAGS]
    untagged = [body for tag, body in blocks if not tag]
    others = len(blocks) - len(rust)
    code = rust[0] if rust else (untagged[0] if len(untagged) == 1 and not rust else None)
    if not blocks:
        problems.append("no fenced code block" + (" (unterminated ```)" if "```" in text else ""))
    elif len(rust) > 1:
        problems.append(f"{len(rust)} rust blocks, expected one")
    elif not rust:
        problems.append("code block is not tagged ```rust")
    think_first = bool(thinks) and bool(rust) and "```rust" in after_think.lower().replace("```rs\n", "```rust\n")
    if thinks and rust and not think_first:
        problems.append("code comes before </think>")
    # The shape the format reward names, decided by positions and counts, never by a mention: one
    # <think>...</think> pair, the one rust block opening after it, and no other fence of any spelling.
    rust_starts = [m.start() for m in _FENCE.finditer(text) if m.group(1).lower() in _RUST_TAGS]
    after = bool(thinks) and bool(rust_starts) and rust_starts[0] > text.find("</think>")
    if thinks and rust and think_first and not after:
        problems.append("the rust block is inside <think>")
    single_think = text.count("<think>") == 1 and text.count("</think>") == 1
    if thinks and not single_think and len(thinks) == 1:
        problems.append("a stray <think> or </think>")
    marks = text.count("```") + text.count("~~~") - (rust[0].count("```") + rust[0].count("~~~") if rust else 0)
    one_fence = len(_FENCE_LINE.findall(text)) == 2 and marks == 2  # doc-test fences in the code are the code's
    if rust and not others and not one_fence:
        problems.append("another fence besides the rust block")
    format_ok = (
        len(thinks) == 1 and single_think and len(rust) == 1 and others == 0 and after and one_fence and bool(think)
    )
    if thinks and not think:
        problems.append("empty <think> block")
    return ParsedCompletion(
        think=think,
        code=code.strip("\n") + "\n" if code else None,
        rust_blocks=len(rust),
        other_blocks=others,
        think_first=think_first,
        format_ok=format_ok,
        problems=tuple(problems),
        lone_block=len(rust) == 1 and others == 0 and one_fence,
    )
