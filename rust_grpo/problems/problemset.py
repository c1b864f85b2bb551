"""The shipped problem set: human-written sources in ``data/source/*.rsp``, built into JSONL.

A source file holds problems separated by ``=== id`` lines; each has a prompt, then
``--- signature``, ``--- solution`` and ``--- tests`` sections. Test blocks separated by blank
lines become separate ``#[test]`` functions, so the hidden-test reward gets partial credit.
``build_dataset`` writes ``train.jsonl`` and ``eval.jsonl`` (every fifth problem goes to eval), and
``demo.jsonl``, a few short training problems for the CPU demo.

A subfolder of the sources is a *tier*, kept out of those files: ``source/basics/*.rsp`` becomes
``basics-train.jsonl`` and ``basics-eval.jsonl`` (every third problem held out). The basics tier is
one-liners a 135M model can sometimes get right, so a CPU run can measure whether training moves
correctness at all; mixing it into the main files would change their split and the demo's problems.
A tier named in ``TRAIN_ONLY_TIERS`` is never held out: ``source/drills/*.rsp`` (std idioms drilled
one at a time) becomes ``drills-train.jsonl`` alone, so adding drills never changes a held-out set.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from reward_sandbox.outfiles import OutputPathError, check_output_file, write_lines

from .schema import DataError, Problem

_HEADER = re.compile(r"^=== ([a-z0-9_]+)\s*$", re.MULTILINE)
_SECTION = re.compile(r"^--- (signature|solution|tests)\s*$", re.MULTILINE)
EVAL_EVERY = 5
TIER_EVAL_EVERY = 3  # a tier is small: a third held out gives 16 of the basics' 50
TRAIN_ONLY_TIERS = frozenset({"drills"})  # training data only: the basics' held-out third measures transfer
DEMO_SIZE = 8  # data/demo.jsonl: the training problems with the shortest reference answers (CPU demo)


def render_tests(block_text: str) -> str:
    """Blank-line separated assert groups -> ``#[test] fn case_N()`` functions."""
    groups = [g.strip("\n") for g in re.split(r"\n\s*\n", block_text.strip("\n")) if g.strip()]
    lines = [line for line in groups[0].splitlines() if line.strip()] if len(groups) == 1 else []
    if lines and all(line.lstrip().startswith("assert") and line.rstrip().endswith(";") for line in lines):
        groups = lines  # independent one-line asserts: one test each, for partial credit
    out = []
    for i, group in enumerate(groups, 1):
        body = "\n".join("    " + line if line.strip() else "" for line in group.splitlines())
        out.append(f"#[test]\nfn case_{i}() {{\n{body}\n}}\n")
    return "\n".join(out)


def parse_source(text: str, origin: str) -> list[Problem]:
    problems = []
    headers = list(_HEADER.finditer(text))
    for n, header in enumerate(headers):
        end = headers[n + 1].start() if n + 1 < len(headers) else len(text)
        chunk = text[header.end() : end]
        problem_id = header.group(1)
        parts = _SECTION.split(chunk)
        prompt, sections = parts[0].strip(), dict(zip(parts[1::2], (p.strip("\n") for p in parts[2::2])))
        missing = {"signature", "solution", "tests"} - set(sections)
        if missing or not prompt:
            raise DataError(f"{origin}: problem {problem_id}: missing {sorted(missing) or ['prompt']}")
        problems.append(
            Problem(
                id=problem_id,
                prompt=prompt,
                signature=sections["signature"].strip(),
                solution=sections["solution"].rstrip() + "\n",
                tests=render_tests(sections["tests"]),
            )
        )
    return problems


def load_sources(source_dir: Path) -> list[Problem]:
    sources = sorted(Path(source_dir).glob("*.rsp"))
    if not sources:
        raise DataError(f"{source_dir}: no problem sources (*.rsp) there; the shipped ones are in data/source")
    problems: list[Problem] = []
    for path in sources:
        problems += parse_source(path.read_text(), path.name)
    ids = [p.id for p in problems]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise DataError(f"duplicate problem ids: {duplicates}")
    return problems


def split_every(problems: list[Problem], every: int) -> dict[str, list[Problem]]:
    """Every ``every``-th problem (in source order) to eval, the rest to train."""
    splits: dict[str, list[Problem]] = {"train": [], "eval": []}
    for i, p in enumerate(problems):
        splits["eval" if i % every == every - 1 else "train"].append(p)
    return splits


def build_dataset(source_dir: Path, out_dir: Path, *, overwrite: bool = False) -> dict[str, int]:
    """The main split and demo from ``source_dir/*.rsp``, then one train/eval pair per tier folder.
    Ids must be unique across all of them: a tier problem must never be a main held-out one.

    Writes only ``NAME.jsonl`` files into ``out_dir`` and deletes nothing. One that exists is replaced
    only with ``overwrite``; without it every name is checked before anything is written, so a
    refused build leaves the folder as it was (:class:`OutputPathError` names the files)."""
    problems = load_sources(source_dir)
    splits = split_every(problems, EVAL_EVERY)
    splits["demo"] = sorted(splits["train"], key=lambda p: len(p.solution) + len(p.tests))[:DEMO_SIZE]
    seen = {p.id for p in problems}
    for tier in sorted(d for d in Path(source_dir).iterdir() if d.is_dir()):
        rows = load_sources(tier)
        if clash := sorted(seen & {p.id for p in rows}):
            raise DataError(f"{tier}: ids also used elsewhere in {source_dir}: {clash}")
        seen |= {p.id for p in rows}
        tier_splits = {"train": rows} if tier.name in TRAIN_ONLY_TIERS else split_every(rows, TIER_EVAL_EVERY)
        for split, tier_rows in tier_splits.items():
            splits[f"{tier.name}-{split}"] = tier_rows
    targets = [out_dir / f"{name}.jsonl" for name in splits]
    if not overwrite and (existing := [t.name for t in targets if t.exists() or t.is_symlink()]):
        raise OutputPathError(
            f"{out_dir}: already holds {', '.join(existing)}; pass --overwrite to replace them, or choose another --out"
        )
    for target in targets:
        check_output_file(target, overwrite=True)
    for name, rows in splits.items():
        write_lines(out_dir / f"{name}.jsonl", (json.dumps(p.to_dict()) for p in rows))
    return {name: len(rows) for name, rows in splits.items()}
