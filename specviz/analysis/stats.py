"""Chi-square goodness of fit, self-contained (Wilson-Hilferty approximation of the p-value): what the tests use to
check sampled laws, and what the app uses when it replays a step's acceptance rule. Pure Python."""

import math
from collections import Counter


def chi_square_p(observed: Counter, expected_probs: dict, n: int, min_expected: float = 5.0) -> float:
    """p-value that `observed` (counts over n draws) comes from `expected_probs`; rare cells pooled."""
    stat = 0.0
    cells = 0
    pooled_obs = 0
    pooled_exp = 0.0
    for key, prob in expected_probs.items():
        exp = prob * n
        if exp < min_expected:
            pooled_obs += observed.get(key, 0)
            pooled_exp += exp
            continue
        stat += (observed.get(key, 0) - exp) ** 2 / exp
        cells += 1
    stray = sum(c for k, c in observed.items() if k not in expected_probs)  # outcomes that should be impossible
    pooled_obs += stray
    if pooled_exp > 0 or pooled_obs:
        stat += (pooled_obs - pooled_exp) ** 2 / max(pooled_exp, 1e-9)
        cells += 1
    k = cells - 1
    if k <= 0:
        return 1.0
    z = ((stat / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return 0.5 * math.erfc(z / math.sqrt(2))
