"""The unbiased pass@k estimator (Chen et al., 2021): with n samples of which c pass,
pass@k = 1 - C(n - c, k) / C(n, k), computed as a stable product."""

from __future__ import annotations


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
