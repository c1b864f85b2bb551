"""TRL's fused log-probability head on the CPU: score the completion tokens only.

TRL 1.16 computes every per-token log-probability (the old policy's, the reference's and the
loss's) through a fused, chunked LM head (``trl.trainer.utils.add_fused_lm_head``). On CUDA it
projects only the positions that carry a label (the completion tokens); everywhere else it
projects *every* position, prompt and padding included, and zeroes the unlabelled ones afterwards,
so that a compiler sees one tile shape per batch shape (its comment names Neuron). On a CPU there
is no such compiler, and the prompt is most of each sequence: SmolLM2's 49k-token head ran over
~3.5x more positions than it scores, and that head was a third of a GRPO step on 2 cores
(``cProfile`` of 6 steps, 2026-12-07: 105 of 300 s in the chunked head's forward and backward).

:func:`score_labelled_positions_only` makes TRL take its compact path on the CPU too. The values are
the same (the unlabelled positions are zero either way); only which rows reach the matrix product
changes. It is applied when a trainer is built and is a no-op where TRL's internals differ."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("rust_grpo")

_MARK = "_rust_grpo_compact_on_cpu"


def score_labelled_positions_only() -> bool:
    """Route TRL's fused LM head to its compact path on CPU devices; True when it is in place."""
    try:
        from trl.trainer import utils
    except ImportError:  # pragma: no cover - trl is a dependency of training
        return False
    original: Callable[[Any], bool] | None = getattr(utils, "_use_triton", None)
    if original is None:  # another TRL: leave it as it is, and say so once
        log.info("TRL's fused LM head has no _use_triton switch here: it scores every position on the CPU")
        return False
    if getattr(original, _MARK, False):
        return True

    def compact(device: Any) -> bool:
        # In trl.trainer.utils this name decides one thing only: score labelled rows (True) or all
        # rows (False). The kernels keep their own _use_triton, so the CPU still runs torch tiles.
        return bool(device.type == "cpu" or original(device))

    setattr(compact, _MARK, True)
    utils._use_triton = compact
    return True
