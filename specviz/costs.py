"""What a target forward costs: V(k), the time of one forward over k new tokens after a given prefix.

Measured directly (no sampling, no verification, no bookkeeping), so a benchmark can say what a run *should*
have taken and the difference is the engine's own overhead. See theory.predicted_speedup.
"""

import statistics

import torch

from .cached_lm import CachedLM
from .engine import make_clock
from .models import LoadedModel


def forward_costs(target: LoadedModel, prefix: list[int], ks: list[int], repeats: int = 3) -> dict[int, float]:
    """Median seconds of one forward over k tokens (for each k) after `prefix`, the cache rolled back each time."""
    clock = make_clock(target.device)
    lm = CachedLM(target.model)
    lm.extend(torch.tensor(prefix), last_only=True)
    base = lm.length
    filler = torch.tensor((prefix * (max(ks) // len(prefix) + 1))[: max(ks)])
    lm.extend(filler[:1])  # one untimed forward: first-call costs out of the way
    lm.truncate(base)
    times = {k: [] for k in ks}
    for _ in range(repeats):
        for k in ks:  # interleaved, so a drift of the machine's speed spreads over every k alike
            start = clock()
            lm.extend(filler[:k])
            times[k].append(clock() - start)
            lm.truncate(base)
    return {k: statistics.median(ts) for k, ts in times.items()}
