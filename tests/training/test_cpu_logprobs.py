"""TRL's fused LM head scores only the completion tokens on the CPU (training/cpu_logprobs.py):
the same log-probabilities and gradients as its every-position path, from fewer rows."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")


def _model_and_batch():  # type: ignore[no-untyped-def]
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=997,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    input_ids = torch.randint(0, 997, (3, 40))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[0, :9] = 0  # left-padded prompt
    attention_mask[1, -5:] = 0  # a completion that ended early
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-12] = -100  # GRPO scores the last 12 tokens (the completion) only
    return model, input_ids, attention_mask, labels


def _scored(model, input_ids, attention_mask, labels):  # type: ignore[no-untyped-def]
    model.zero_grad()
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True)
    (out.log_probs.sum() + out.entropy.sum()).backward()
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    return out.log_probs.detach(), out.entropy.detach(), grads


def test_cpu_scores_only_labelled_positions_with_the_same_values(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import torch
    from trl.trainer import utils

    from rust_grpo.training.cpu_logprobs import score_labelled_positions_only

    model, input_ids, attention_mask, labels = _model_and_batch()
    rows: list[int] = []
    function = utils._ChunkedLogProbFunction

    class Counting:
        @staticmethod
        def apply(hidden, *rest):  # type: ignore[no-untyped-def]
            rows.append(hidden.shape[0])
            return function.apply(hidden, *rest)

    monkeypatch.setattr(utils, "_ChunkedLogProbFunction", Counting)
    from trl.kernels import chunked_logprob

    # TRL's own switch, as imported (a trainer built earlier in this process has already patched it)
    monkeypatch.setattr(utils, "_use_triton", chunked_logprob._use_triton)
    every = _scored(model, input_ids, attention_mask, labels)
    assert score_labelled_positions_only() and score_labelled_positions_only()  # idempotent
    compact = _scored(model, input_ids, attention_mask, labels)

    labelled = int((labels[:, 1:] != -100).sum())
    assert rows == [3 * 39, labelled]  # every shifted position, then only the scored ones (31 of 117)
    torch.testing.assert_close(compact[0], every[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(compact[1], every[1], rtol=1e-5, atol=1e-5)
    assert compact[0].abs().sum() > 0
    assert len(compact[2]) == len(every[2]) > 0
    for a, b in zip(compact[2], every[2]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
