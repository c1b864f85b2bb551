"""``rust-grpo eval --repair-turns N``: every sample is a repair episode of up to N answers, and the
report gives the pass rate after each turn (turn 0 = single shot), so users see what repair buys.

The headline rates and pass@k of the report are those of each episode's *final* answer; the
``repair`` section has, per turn t, the hidden-test pass@1 and the build rate of each episode's
answer at turn t (its last one when it passed earlier). ``completions.jsonl`` and ``results.jsonl``
hold every turn of every episode with the feedback it got.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..evaluation.sampling import SamplingSettings, resolve_backend
from ..evaluation.scoring import Completion, score_record, summarize
from ..problems.answer_format import THINK, AnswerFormat
from ..problems.schema import Problem, chat_prompt
from ..problems.selection import run_format
from ..rewards.context import RewardContext
from .episodes import Episode, run_episodes

Chat = list[dict[str, str]]
ChatGenerator = Callable[[list[Chat]], list[str]]


class ChatPolicy:
    """A :class:`repair.Policy` over chat messages, for a model that answers whole conversations."""

    def __init__(self, chats: list[Chat], generate: ChatGenerator) -> None:
        self.conversations = [list(c) for c in chats]
        self.generate = generate
        self.last: dict[int, str] = {}

    def answer(self, episodes: list[int]) -> list[str]:
        texts = self.generate([self.conversations[i] for i in episodes])
        self.last.update(zip(episodes, texts))
        return texts

    def tell(self, episode: int, message: str) -> None:
        self.conversations[episode] += [
            {"role": "assistant", "content": self.last[episode]},
            {"role": "user", "content": message},
        ]


def hf_chat_generator(model_path: str, s: SamplingSettings, adapter: str | None = None) -> ChatGenerator:
    """One sampled answer per conversation with transformers, ``batch_problems x samples`` at a time."""
    import torch

    from ..evaluation.sampling import load_hf, sample_hf

    torch.manual_seed(s.seed)
    model, tokenizer, device = load_hf(model_path, adapter, s.dtype)
    size = max(1, s.batch_problems * s.samples)

    def generate(chats: list[Chat]) -> list[str]:
        out: list[str] = []
        for start in range(0, len(chats), size):
            out += sample_hf(model, tokenizer, device, chats[start : start + size], s, 1)
        return out

    return generate


def vllm_chat_generator(model_path: str, s: SamplingSettings, adapter: str | None = None) -> ChatGenerator:
    """One sampled answer per conversation with vLLM's ``LLM.chat`` (one engine for every turn)."""
    from ..evaluation.sampling import vllm_checkpoint, vllm_options, vllm_sampling_params
    from ..vllm_engine import start_engine

    llm = start_engine(vllm_checkpoint(model_path, adapter), s.seed, **vllm_options(s))
    params = vllm_sampling_params(s, 1)

    def generate(chats: list[Chat]) -> list[str]:
        return [result.outputs[0].text for result in llm.chat(chats, params, use_tqdm=False)]

    return generate


def run_repair_eval(
    problems: list[Problem],
    generate: ChatGenerator,
    grader: Any,
    samples: int,
    max_turns: int,
    weights: dict[str, float],
    fmt: AnswerFormat = THINK,
    max_feedback_chars: int = 1200,
) -> list[dict[str, Any]]:
    """One record per episode: the final answer's verdicts (as ``rust-grpo score`` writes them) and
    ``turns``, every answer with its status, verdicts, reward and the feedback it got."""
    rows = [p for p in problems for _ in range(samples)]
    chats = [chat_prompt(p, fmt) for p in rows]
    # the default min_tests and the grader's own limit (eval's --timeout), as `rust-grpo score` grades
    context = RewardContext.from_config(None, grader, problems, fmt)
    episodes = run_episodes(ChatPolicy(chats, generate), rows, context, weights, max_turns, max_feedback_chars)
    records = []
    for k, (problem, episode) in enumerate(zip(rows, episodes)):
        record = score_record(Completion(problem.id, episode.final.text, k % samples), episode.final.evaluation)
        record["turns"] = _turns(episode)
        records.append(record)
    return records


def _turns(episode: Episode) -> list[dict[str, Any]]:
    out = []
    for turn, data in zip(episode.turns, episode.to_dicts()):
        data.update(hidden_pass=turn.evaluation.hidden_pass, build_ok=turn.evaluation.builds)
        out.append(data)
    return out


def turn_summary(records: list[dict[str, Any]], max_turns: int) -> list[dict[str, Any]]:
    """Per turn t: hidden-test pass@1 (mean over problems of the share of samples whose answer at t
    passes), build rate and hidden-pass rate over all samples, and how many episodes were still
    going at t (their answer t was written)."""
    out = []
    for t in range(max_turns):
        by_problem: dict[str, list[bool]] = defaultdict(list)
        builds, answered = 0, 0
        for r in records:
            turns = r["turns"]
            at = turns[min(t, len(turns) - 1)]
            by_problem[r["problem_id"]].append(bool(at["hidden_pass"]))
            builds += bool(at["build_ok"])
            answered += len(turns) > t
        n = max(len(records), 1)
        shares = [sum(v) / len(v) for v in by_problem.values()]
        out.append(
            {
                "turn": t,
                "pass@1": sum(shares) / len(shares) if shares else 0.0,
                "hidden_pass_rate": sum(sum(v) for v in by_problem.values()) / n,
                "build_rate": builds / n,
                "episodes_answering": answered,
            }
        )
    return out


def eval_with_repair(args: argparse.Namespace, settings: SamplingSettings) -> int:
    """``rust-grpo eval --repair-turns N`` (N >= 2), sampling with the eval command's ``settings``."""
    from ..config import ConfigError, RepairConfig, RewardConfig, load_run_config
    from ..evaluation.report import write_report
    from ..problems.schema import load_problems
    from ..progress import command_grader

    try:
        RepairConfig(max_turns=args.repair_turns)
    except ConfigError as exc:
        raise ConfigError(f"--repair-turns: {exc}") from None
    problems = load_problems(args.dataset, max_rows=args.limit)
    cfg = load_run_config(args.config) if args.config else None
    fmt = run_format(cfg.data) if cfg else THINK
    weights = cfg.reward.weights if cfg else RewardConfig().weights
    max_chars = cfg.repair.max_feedback_chars if cfg else 1200
    backend = resolve_backend(args.backend)
    make = {"hf": hf_chat_generator, "vllm": vllm_chat_generator}[backend]
    generate = make(args.model, settings, args.adapter)
    with command_grader(args, "grading turns") as grader:
        records = run_repair_eval(problems, generate, grader, args.samples, args.repair_turns, weights, fmt, max_chars)
        level = grader.level
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "completions.jsonl", "w", encoding="utf-8") as fh:
        for r in records:
            turns = [{"completion": t["completion"], "feedback": t["feedback"]} for t in r["turns"]]
            fh.write(json.dumps({"problem_id": r["problem_id"], "sample": r["sample"], "completion": turns[-1]["completion"], "turns": turns}) + "\n")  # fmt: skip
    summary = summarize(records)
    summary["repair"] = {"max_turns": args.repair_turns, "per_turn": turn_summary(records, args.repair_turns)}
    meta = {
        "model": args.model,
        "adapter": args.adapter,
        "dataset": args.dataset,
        "backend": backend,
        "config": args.config,
        "repair_turns": args.repair_turns,
        "isolation": level,
        **settings.__dict__,
    }
    paths = write_report(
        out, records, summary, f"Eval with repair: {Path(args.model).name} on {Path(args.dataset).name}", meta
    )
    per_turn = ", ".join(f"turn {t['turn']} {t['pass@1']:.1%}" for t in summary["repair"]["per_turn"])
    episodes, problems = summary["samples"], summary["problems"]
    print(
        f"{episodes} episode{'' if episodes == 1 else 's'} over {problems} problem{'' if problems == 1 else 's'}; "
        f"hidden-test pass@1 after {per_turn}"
    )
    print(f"report: {paths['markdown']} (also {paths['report'].name}, {paths['plot'].name}, {paths['results'].name})")
    return 0
