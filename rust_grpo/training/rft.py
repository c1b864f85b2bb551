"""Rejection-sampling fine-tuning (RFT): train on the policy's own answers that pass every hidden test.

GRPO pays a rare right answer only relative to its group, one step at a time. RFT (Yuan et al. 2023,
"expert iteration") samples many answers per training problem at once from the cold-started
policy, keeps those the sandbox verifies (every hidden test passes, answer format intact), and fine-
tunes on them: the model's own correct phrasings, which it can reproduce, rather than reference
solutions it cannot. GRPO then starts from that policy. Only training problems are sampled (the
config refuses files outside ``data.train``) and only the sandbox's verdict selects an answer, so
the stage has the same integrity as the reward: a completion that fools the tests would be trained
on here as it would be paid there. That is why RFT samples the run's canary rows too
(``data.canary_share``, see canaries.py): never trained on, and an answer that passes one stops RFT
(or warns) as it stops training.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..problems.selection import run_format

if TYPE_CHECKING:
    from ..config import RunConfig
    from ..evaluation.scoring import Completion
    from ..problems.schema import Problem

log = logging.getLogger("rust_grpo")


def verified_answers(records: list[dict[str, Any]], texts: list[str], max_per_problem: int) -> list[tuple[str, str]]:
    """``(problem_id, text)`` for each graded completion that is in format and passes every hidden test,
    at most ``max_per_problem`` distinct ones (whitespace aside) per problem, in sampling order."""
    kept: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    per_problem: dict[str, int] = {}
    for record, text in zip(records, texts, strict=True):
        pid = record["problem_id"]
        key = (pid, " ".join(text.split()))
        if not (record["format_ok"] and record["hidden_pass"]) or key in seen:
            continue
        if per_problem.get(pid, 0) >= max_per_problem:
            continue
        seen.add(key)
        per_problem[pid] = per_problem.get(pid, 0) + 1
        kept.append((pid, text))
    return kept


def rft_problems(cfg: RunConfig, problems: list[Problem]) -> list[Problem]:
    """The training problems RFT samples: all of ``problems``, or those from the files ``rft.train`` names."""
    if not cfg.rft.train:
        return list(problems)
    from ..problems.schema import load_problems

    d = cfg.data
    wanted = {
        p.id for spec in cfg.rft.train for p in load_problems(spec, d.split, max_solution_chars=d.max_solution_chars)
    }
    return [p for p in problems if p.id in wanted]


def rft_policy(policy: str, cfg: RunConfig, problems: list[Problem]) -> str:
    """``policy`` fine-tuned on its own verified answers to ``problems`` (see the module doc), cached
    by content so that training and the learning benchmark share it; ``policy`` itself when
    ``rft.samples`` is 0 or no answer passes."""
    if not cfg.rft.samples:
        return policy
    from .tiny import cache_lock

    with cache_lock():  # N ranks of one launch sample and train once: the others wait, then reuse it
        return _rft_policy(policy, cfg, problems)


def _weights_stamp(policy: str) -> list[list[object]]:
    """Name, size and mtime of the policy's weight files: a model retrained in place is a new key."""
    files = sorted(Path(policy).glob("*.safetensors")) + sorted(Path(policy).glob("*.bin"))
    return [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files]


BATCH = 4  # answers per RFT step


def _rft_policy(policy: str, cfg: RunConfig, problems: list[Problem]) -> str:
    import os
    import shutil

    from ..models import default_cache_dir

    r, fmt = cfg.rft, run_format(cfg.data)
    chosen = rft_problems(cfg, problems)
    if not chosen:
        raise RuntimeError(f"rft.train {cfg.rft.train} selects none of the {len(problems)} training problems")
    key: list[object] = [policy, _weights_stamp(policy), [[p.id, p.prompt, p.signature, p.tests] for p in chosen]]
    key += [fmt.name, fmt.system_prompt, cfg.train.seed, json.dumps(vars(r)), cfg.data.canary_share]
    key += [cfg.train.canary_max_rate, cfg.train.canary_action, cfg.reward.timeout_s, list(draw_engine(cfg))]
    out = default_cache_dir() / f"rft-{Path(policy).name}-{hashlib.sha256(json.dumps(key).encode()).hexdigest()[:12]}"
    if (out / "config.json").exists():
        log.info("reusing the RFT policy in %s", out)
        return str(out)
    if (out / "none-passed").exists():
        return policy
    work = out.with_name(out.name + ".partial")  # renamed to ``out`` only once complete
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    draw = sample_verified(policy, cfg, chosen)
    (work / "draw.json").write_text(json.dumps(draw.summary(), indent=2))
    check_draw(draw, cfg, work)
    with open(work / "answers.jsonl", "w", encoding="utf-8") as fh:  # what was trained on, for inspection
        for pid, text in draw.answers:
            fh.write(json.dumps({"problem_id": pid, "completion": text}) + "\n")
    if draw.answers:
        from .warmstart import warm_start

        by_id = {p.id: p for p in chosen}
        steps = max(1, math.ceil(r.epochs * len(draw.answers) / BATCH))
        log.info("RFT: %d steps on %d verified answers to %d problems", steps, len(draw.answers), len(draw.problems))
        warm_start(
            Path(policy),
            [by_id[pid] for pid, _ in draw.answers],
            fmt,
            work,
            steps=steps,
            lr=r.learning_rate,
            batch_size=BATCH,
            seed=cfg.train.seed,
            negatives=0,
            answers=[text for _, text in draw.answers],
        )
    else:
        log.warning("RFT: no sampled answer passed every hidden test; GRPO starts from the cold-started policy")
        (work / "none-passed").touch()
    shutil.rmtree(out, ignore_errors=True)
    os.replace(work, out)
    return str(out) if draw.answers else policy


@dataclass
class Draw:
    """What RFT's sampling found: the answers to train on, and what must stop it."""

    answers: list[tuple[str, str]]  # (problem_id, text), verified and distinct
    sent: int = 0  # answers with code, sent to the sandbox
    sandbox_errors: int = 0  # of those, graded by nobody (the sandbox's fault, never the answer's)
    canaries_seen: int = 0
    canary_passes: list[dict[str, str]] = field(default_factory=list)  # cheats: {"problem_id", "completion"}

    @property
    def problems(self) -> set[str]:
        return {pid for pid, _ in self.answers}

    def summary(self) -> dict[str, int]:
        """The counts saved beside the RFT policy (``draw.json``)."""
        return {
            "answers_kept": len(self.answers),
            "problems_kept": len(self.problems),
            "sent": self.sent,
            "sandbox_errors": self.sandbox_errors,
            "canaries_seen": self.canaries_seen,
            "canary_passes": len(self.canary_passes),
        }


def draw_engine(cfg: RunConfig) -> tuple[str, str]:
    """The engine and precision RFT samples with: on the CPU, the run's own vLLM engine in ``vllm.cpu_dtype``
    when the run samples its groups with one in colocate mode (a draw of 64 answers a problem is what vLLM
    makes cheap); else transformers in the checkpoint's precision. Not vLLM on a GPU: the draw runs in the
    training process, and an engine started there keeps its share of GPU memory after it is dropped, before
    TRL's colocated engine asks for its own."""
    from ..vllm_engine import on_cpu
    from .vllm_colocate import cpu_engine_bf16

    v = cfg.vllm
    if not (v.enabled and v.mode == "colocate" and on_cpu()):
        return "hf", "auto"
    return "vllm", "bfloat16" if cpu_engine_bf16(v.cpu_dtype, cfg.train.bf16) else "float32"


def sample_verified(policy: str, cfg: RunConfig, problems: list[Problem]) -> Draw:
    """Sample ``rft.samples`` answers per problem (and per canary row, when ``data.canary_share`` is
    set) with :func:`draw_engine`, grade them in the sandbox, keep the verified ones."""
    from ..evaluation.sampling import SamplingSettings, generate
    from .canaries import make_canaries

    r = cfg.rft
    backend, dtype = draw_engine(cfg)
    settings = SamplingSettings(
        samples=r.samples,
        max_new_tokens=r.max_new_tokens,
        temperature=r.temperature,
        top_p=1.0,
        seed=cfg.train.seed,
        dtype=dtype,
    )
    sampled = problems + make_canaries(problems, cfg.data.canary_share, cfg.train.seed)  # in memory only
    log.info("RFT: sampling %d answers to each of %d rows with %s", r.samples, len(sampled), backend)
    return grade_draw(generate(backend, policy, sampled, settings, fmt=run_format(cfg.data)), sampled, cfg)


def grade_draw(completions: list[Completion], problems: list[Problem], cfg: RunConfig) -> Draw:
    """Grade ``completions`` as training would (its answer format, test timeout and reward context);
    canary rows (their hidden tests contradict each other) are counted with training's own
    ``passes_canary`` and never trained on: passing one is cheating."""
    from reward_sandbox import Status

    from ..evaluation.scoring import score_record
    from ..rewards.context import RewardContext
    from ..rewards.sandbox import open_run_grader
    from .canaries import is_canary_id, passes_canary

    with open_run_grader(cfg.reward) as grader:
        context = RewardContext.from_config(cfg.reward, grader, problems, run_format(cfg.data))
        evaluations = context.evaluate(
            [c.text for c in completions], context.lookup([c.problem_id for c in completions])
        )
    graded = list(zip(completions, evaluations, strict=True))
    real = [(c, e) for c, e in graded if not is_canary_id(c.problem_id)]
    canary = [(c, e) for c, e in graded if is_canary_id(c.problem_id)]
    records = [score_record(c, e) for c, e in real]
    draw = Draw(
        answers=verified_answers(records, [c.text for c, _ in real], cfg.rft.max_per_problem),
        sent=sum(e.result is not None for _, e in graded),  # answers with code went to the sandbox
        sandbox_errors=sum(e.result is not None and e.result.status is Status.SANDBOX_ERROR for _, e in graded),
        canaries_seen=len(canary),
        canary_passes=[{"problem_id": c.problem_id, "completion": c.text} for c, e in canary if passes_canary(e)],
    )
    log.info(
        "RFT: %d of %d sampled answers pass every hidden test; %d distinct kept (at most %d a problem)%s",
        sum(bool(x["hidden_pass"]) for x in records),
        len(records),
        len(draw.answers),
        cfg.rft.max_per_problem,
        f"; canaries passed {len(draw.canary_passes)} of {len(canary)}" if canary else "",
    )
    return draw


def check_draw(draw: Draw, cfg: RunConfig, out: Path) -> None:
    """Stop RFT when the sandbox failed to grade any answer it was sent, or when canaries were passed above
    ``train.canary_max_rate`` with ``train.canary_action = "stop"`` (the passing completions go to
    ``out/canaries.jsonl`` first, as in training)."""
    if draw.sandbox_errors:  # a verdict the sandbox owes is never read as the answer's, nor cached
        raise RuntimeError(
            f"RFT: the sandbox failed to grade {draw.sandbox_errors} of the {draw.sent} answers it was sent"
            " (sandbox_error); RFT trains only on a complete draw: fix the sandbox or reward server and rerun"
        )
    if not draw.canary_passes:
        return
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "canaries.jsonl", "w", encoding="utf-8") as fh:
        for row in draw.canary_passes:
            fh.write(json.dumps(row) + "\n")
    rate = len(draw.canary_passes) / draw.canaries_seen
    message = (
        f"RFT: {len(draw.canary_passes)} of {draw.canaries_seen} answers to canary rows passed every hidden test"
        f" (tests that contradict each other: cheating); they are in {out / 'canaries.jsonl'}"
    )
    if rate > cfg.train.canary_max_rate and cfg.train.canary_action == "stop":
        raise RuntimeError(message)
    log.warning(message)
