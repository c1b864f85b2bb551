"""Repair episodes inside GRPO training, through TRL's ``rollout_func``.

Why ``rollout_func`` and not ``environment_factory``/``tools``: TRL's tool loop continues an episode
only when the *model* emits a tool call, and renders tool results as ``tool`` messages, which needs
a chat template with tool support and a policy trained to call tools. Here the environment decides:
every answer is graded, and a failing one gets a *user* turn with the sandbox's feedback, whatever
the model wrote. ``rollout_func`` lets us build exactly that sequence and its mask.

One episode is one completion for TRL: ``completion_ids`` = answer 1, the feedback turn's tokens
(the chat template's user turn and the next assistant header), answer 2, ... and ``env_mask`` is 1
on the model's tokens and 0 on the feedback's, so the loss (TRL multiplies its completion mask by
``env_mask``) trains only what the model wrote. Token ids are concatenated, never re-tokenized: the
model is trained on exactly the tokens it conditioned on. Each answer may use up to
``max_completion_length`` new tokens (the episode holds at most ``max_turns`` of them plus the
feedback). Generation goes through the trainer's own single-turn generator, so the same code serves
transformers' ``generate`` on a CPU and vLLM (colocate or server) on a GPU; with vLLM the sampling
log-probabilities are kept for the model's tokens and set to 0 on the feedback's (as TRL does for
tool results).

The rewards TRL computes are those of the *final* answer (the reward functions read the
``repair_final`` column this rollout returns), plus ``repair_bonus``; every turn's rewards are logged
(``repair/*`` metrics, and ``samples.jsonl``).
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from ..config import RepairConfig
from ..problems.schema import DataError, Problem
from ..rewards.context import RewardContext
from .episodes import Episode, run_episodes


def prompt_key(chat: list[dict[str, Any]]) -> str:
    return json.dumps([[m.get("role"), m.get("content")] for m in chat])


def feedback_suffix_ids(tokenizer: Any, message: str, chat_template_kwargs: dict[str, Any] | None = None) -> list[int]:
    """The tokens the chat template puts between the end of an assistant answer (its end-of-turn
    token included) and the start of the next answer, for a user turn holding ``message``."""
    kwargs = chat_template_kwargs or {}
    base = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    prefix = tokenizer.apply_chat_template(base, tokenize=False, **kwargs)
    full = tokenizer.apply_chat_template(
        [*base, {"role": "user", "content": message}], tokenize=False, add_generation_prompt=True, **kwargs
    )
    eos = tokenizer.eos_token
    cut = prefix.rfind(eos) + len(eos) if eos and eos in prefix else len(prefix)
    if not full.startswith(prefix[:cut]):
        raise ValueError("the chat template is not prefix-preserving: repair episodes cannot extend a conversation")
    return list(tokenizer(full[cut:], add_special_tokens=False)["input_ids"])


class TokenPolicy:
    """A :class:`repair.Policy` over token ids: generates with ``generate(prompt_ids, n)`` (the
    trainer's single-turn generator) and keeps, per episode, the completion ids, the loss mask
    and the sampling log-probabilities."""

    def __init__(
        self,
        tokenizer: Any,
        prompt_ids: list[list[int]],
        generate: Any,
        num_generations: int,
        eos_ids: list[int],
        chat_template_kwargs: dict[str, Any] | None = None,
        lockstep: bool = False,
    ) -> None:
        self.tokenizer = tokenizer
        self.lockstep = lockstep  # generate for every episode each turn (equal per-process counts), keep the asked
        self.prompt_ids = prompt_ids
        self.generate = generate
        self.num_generations = num_generations
        self.eos_ids = eos_ids
        self.chat_template_kwargs = chat_template_kwargs or {}
        self.completion_ids: list[list[int]] = [[] for _ in prompt_ids]
        self.masks: list[list[int]] = [[] for _ in prompt_ids]
        self.logprobs: list[list[float]] | None = [[] for _ in prompt_ids]
        self._first = True

    def answer(self, episodes: list[int]) -> list[str]:
        asked = list(range(len(self.prompt_ids))) if self.lockstep else episodes
        inputs = [self.prompt_ids[i] + self.completion_ids[i] for i in asked]
        # The first turn holds each prompt num_generations times (vLLM server mode samples a group at once);
        # later turns are all different conversations.
        ids, logprobs = self.generate(inputs, self.num_generations if self._first else 1)
        self._first = False
        if self.lockstep:  # keep the episodes that asked; the others' continuations are dropped
            ids = [ids[i] for i in episodes]
            logprobs = None if logprobs is None else [logprobs[i] for i in episodes]
        texts = []
        for k, i in enumerate(episodes):
            self.completion_ids[i] += list(ids[k])
            self.masks[i] += [1] * len(ids[k])
            if logprobs is None:
                self.logprobs = None
            elif self.logprobs is not None:
                self.logprobs[i] += list(logprobs[k])
            texts.append(self.tokenizer.decode(ids[k], skip_special_tokens=True))
        return texts

    def tell(self, episode: int, message: str) -> None:
        ids = self.completion_ids[episode]
        closing = [] if ids and ids[-1] in self.eos_ids else [self.eos_ids[0]]  # a truncated answer: end its turn
        suffix = closing + feedback_suffix_ids(self.tokenizer, message, self.chat_template_kwargs)
        self.completion_ids[episode] += suffix
        self.masks[episode] += [0] * len(suffix)
        if self.logprobs is not None:
            self.logprobs[episode] += [0.0] * len(suffix)


class RepairRollout:
    """TRL's ``rollout_func``: one repair episode per prompt row, graded in the sandbox."""

    __name__ = "repair_rollout"

    def __init__(
        self,
        context: RewardContext,
        problems: list[Problem],
        chats: list[list[dict[str, Any]]],
        weights: dict[str, float],
        settings: RepairConfig,
    ) -> None:
        self.context = context
        self.weights = weights
        self.settings = settings
        self.by_prompt: dict[str, Problem] = {}
        for problem, chat in zip(problems, chats):
            key = prompt_key(chat)
            if key in self.by_prompt:
                raise DataError(
                    f"problems {self.by_prompt[key].id!r} and {problem.id!r} have the same prompt: repair episodes "
                    "find a prompt's hidden tests by its text, so prompts must differ"
                )
            self.by_prompt[key] = problem
        self.recent: deque[tuple[int, str, Episode]] = deque(maxlen=256)  # (step, problem id, episode), for samples

    def problem_for(self, chat: list[dict[str, Any]]) -> Problem:
        try:
            return self.by_prompt[prompt_key(chat)]
        except KeyError:
            raise DataError("repair rollout: a prompt that is not in the training set") from None

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        kwargs = getattr(trainer, "chat_template_kwargs", {}) or {}
        rows = [self.problem_for(chat) for chat in prompts]
        prompt_ids = [
            list(ids)
            for ids in tokenizer.apply_chat_template(
                prompts, tokenize=True, add_generation_prompt=True, return_dict=True, **kwargs
            )["input_ids"]
        ]

        def generate(ids: list[list[int]], n: int) -> tuple[list[list[int]], Any]:
            completion_ids, logprobs = trainer._generate_single_turn(ids, None, {}, n)  # TRL's HF or vLLM path
            return completion_ids, logprobs

        # With several processes, vLLM generation gathers prompts across them: all must ask alike, every turn.
        lockstep = trainer.accelerator.num_processes > 1
        policy = TokenPolicy(
            tokenizer, prompt_ids, generate, trainer.num_generations, trainer.eos_token_ids, kwargs, lockstep
        )
        episodes = run_episodes(
            policy,
            rows,
            self.context,
            self.weights,
            self.settings.max_turns,
            self.settings.max_feedback_chars,
            lockstep,
        )
        step = trainer.state.global_step
        self.recent.extend((step, p.id, e) for p, e in zip(rows, episodes))
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": policy.completion_ids,
            "logprobs": policy.logprobs,
            "env_mask": policy.masks,
            "repair_final": [e.final.text for e in episodes],
            # None when the sandbox could not grade the final answer: TRL then leaves it unscored, as every reward is None
            "repair_bonus": [
                None if e.final.evaluation.unknown else e.bonus(self.settings.improvement_bonus) for e in episodes
            ],
            "repair_turns": [[(t.reward, t.passed) for t in e.turns] for e in episodes],
        }


class RepairBonus:
    """The improvement bonus as a TRL reward function (weight 1), and the per-turn metrics: pass rate
    and mean reward after each turn, turns per episode, share of episodes repaired."""

    __name__ = "repair_bonus"

    def __init__(self, max_turns: int) -> None:
        self.max_turns = max_turns

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
        turns: list[list[tuple[float | None, bool]]] = columns.get("repair_turns") or []
        log = columns.get("log_metric")
        if turns and callable(log):
            for name, value in turn_metrics(turns, self.max_turns).items():
                log(name, value)
        bonus = columns.get("repair_bonus") or [0.0] * len(completions)
        return [None if b is None else float(b) for b in bonus]


def turn_metrics(turns: list[list[tuple[float | None, bool]]], max_turns: int) -> dict[str, float]:
    """Per turn t: the pass rate and mean reward of each episode's answer at t (its last one, when it
    stopped earlier); the mean number of turns; the share of episodes whose first answer failed and
    whose final answer passes."""
    n = max(len(turns), 1)
    out = {"repair/turns": sum(len(t) for t in turns) / n}
    for t in range(max_turns):
        at = [episode[min(t, len(episode) - 1)] for episode in turns if episode]
        known = [r for r, _ in at if r is not None]
        out[f"repair/pass_turn{t}"] = sum(p for _, p in at) / n
        if known:
            out[f"repair/reward_turn{t}"] = sum(known) / len(known)
    out["repair/repaired"] = sum(len(e) > 1 and e[-1][1] and not e[0][1] for e in turns) / n
    return out
