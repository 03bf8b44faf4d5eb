"""What a target forward costs: V(k) / V(1), the time of one forward over k new tokens after a given prefix,
relative to a forward over one token.

Measured directly (no sampling, no verification, no bookkeeping), so a benchmark can say what a run *should*
have taken and the difference is the engine's own overhead (theory.predicted_speedup). Ratios, taken within
one repeat, because this CPU's speed drifts by 10-30% over minutes while the shape of V(k) does not.
"""

import random
import statistics

import torch

from ..engine import make_clock
from ..models import LoadedModel


def relative_forward_costs(target: LoadedModel, prefix: list[int], ks: list[int], repeats: int = 5) -> dict[int, float]:
    """Median over repeats of V(k) / V(1) after `prefix` (the cache rolled back after each forward)."""
    clock = make_clock(target.device)
    lm = target.open_lm(len(prefix) + max(ks) + 1)
    lm.extend(torch.tensor(prefix), last_only=True)
    base = lm.length
    filler = torch.tensor((prefix * (max(ks) // len(prefix) + 1))[: max(ks)])
    lm.extend(filler[:1])  # one untimed forward: first-call costs out of the way
    lm.truncate(base)
    ks = sorted({1, *ks})
    ratios = {k: [] for k in ks}
    order = random.Random(0)
    for _ in range(repeats):
        seconds = {}
        for k in order.sample(ks, len(ks)):  # one pass over every k, close in time, in a shuffled order
            start = clock()
            lm.extend(filler[:k])
            seconds[k] = clock() - start
            lm.truncate(base)
        for k in ks:
            ratios[k].append(seconds[k] / seconds[1])
    return {k: statistics.median(r) for k, r in ratios.items()}
