"""The unbiased pass@k estimator (Chen et al., 2021): with n samples of which c pass,
pass@k = 1 - C(n - c, k) / C(n, k), computed as a stable product."""

from __future__ import annotations

from collections.abc import Iterable


def pass_at_k(n: int, c: int, k: int) -> float:
    if not 0 <= c <= n or k <= 0:
        raise ValueError(f"need 0 <= c <= n and k > 0, got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    result = 1.0
    for i in range(n - c + 1, n + 1):
        result *= 1.0 - k / i
    return 1.0 - result


def curve_ks(samples: int) -> list[int]:
    """The k a pass@k curve is given at with ``samples`` per problem: the powers of two up to it, and it."""
    return sorted({2**i for i in range(samples.bit_length()) if 2**i <= samples} | ({samples} if samples else set()))


def pass_at_k_curve(counts: Iterable[tuple[int, int]]) -> dict[str, float]:
    """``{"1": ..., "2": ..., "4": ..., ..., "<n>": ...}``: the mean over problems of pass@k, for k the powers
    of two up to the fewest samples any problem has, and that number itself. ``counts`` holds one
    ``(samples, passing)`` pair per problem. The curve is the ceiling a sampler can reach with k tries:
    GRPO learns nothing from a problem none of whose samples ever passes."""
    counts = list(counts)
    if not counts:
        return {}
    fewest = min(n for n, _ in counts)
    return {str(k): round(sum(pass_at_k(n, c, k) for n, c in counts) / len(counts), 4) for k in curve_ks(fewest)}
