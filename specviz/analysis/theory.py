"""What the math predicts (Leviathan et al., section 3), and the α and c it needs, read off measured events.

Pure Python: the UI draws these curves without importing torch.
"""

from collections.abc import Iterable, Sequence

from ..events import StepEvent


def expected_tokens_per_step(alpha: float, gamma: int) -> float:
    """E[tokens per target forward] when each draft is accepted independently with probability α."""
    if alpha >= 1.0:
        return gamma + 1.0
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


# Acceptance by draft position, for a drafter whose drafts hold in runs (a copy, a block): decayed counts of how often
# each position held when every one before it did, each position starting from a prior of 0.7 worth two observations.


def count_positions(
    held_at: list, tested_at: list, memory: float, accepted: int, rejected: bool, prior: float = 0.7
) -> None:
    """Positions 0..accepted − 1 held; the one after them was tested and failed, if a draft was rejected. A position
    tested for the first time starts from `prior`, worth two tests."""
    for position in range(accepted + rejected):
        while position >= len(tested_at):
            held_at.append(2.0 * prior)
            tested_at.append(2.0)
        held_at[position] = memory * held_at[position] + (position < accepted)
        tested_at[position] = memory * tested_at[position] + 1


def held_chance(held_at: list, tested_at: list, position: int, beyond: float | None = None) -> float:
    """How often the draft at `position` (0 = the first) held when every one before it did; a position never tested
    holds `beyond` (default 0.7)."""
    if position < len(tested_at):
        return held_at[position] / tested_at[position]
    return 0.7 if beyond is None else beyond


def tokens_by_position(held_at: list, tested_at: list, gamma: int, beyond: float | None = None) -> float:
    """E(γ) = 1 + Σ_{j≤γ} a_1·…·a_j from how often each position held when the ones before it did (a position never
    tested: `beyond`, default 0.7)."""
    tokens = 1.0
    held = 1.0
    for position in range(gamma):
        held *= held_chance(held_at, tested_at, position, beyond)
        tokens += held
    return tokens


def expected_speedup(alpha: float, gamma: int, c: float, block: bool = False) -> float:
    """(1 − α^(γ+1)) / ((1 − α)(γc + 1)): tokens per step over the step's cost in target forwards. A block drafter
    (`block`) pays c once per step, whatever γ: (1 − α^(γ+1)) / ((1 − α)(c + 1))."""
    return expected_tokens_per_step(alpha, gamma) / ((c if block else gamma * c) + 1.0)


def per_token_alpha(events: Iterable[StepEvent]) -> float | None:
    """α as the paper defines it: accepted / tested drafts. A draft after the first rejection is never tested,
    so this is accepted / (accepted + rejections), not accepted / proposed."""
    accepted = rejections = 0
    for e in events:
        accepted += e.accepted
        rejections += e.next_kind == "correction"
    tested = accepted + rejections
    return accepted / tested if tested else None


def target_forward_s(plain: Sequence[StepEvent]) -> float | None:
    """Mean time of one plain decoding step: one target forward for one token."""
    return sum(e.step_s for e in plain) / len(plain) if plain else None


def drafts_blocks(events: Sequence[StepEvent]) -> bool:
    """Whether every drafting step came from one pass of a block drafter (DFlash), which costs the same for any γ."""
    drafted = [e for e in events if e.proposed]
    return bool(drafted) and all(e.block for e in drafted)


def drafting_units(events: Sequence[StepEvent]) -> int:
    """What drafting is paid per: proposed tokens, or for a block drafter the steps (one pass each)."""
    return sum(1 if e.block else len(e.proposed) for e in events if e.proposed)


def cost_ratio(spec: Sequence[StepEvent], plain: Sequence[StepEvent]) -> float | None:
    """c: drafting time per proposed token over one target forward (0 for a free lookup drafter); for a block
    drafter, per drafting step (one pass)."""
    per_target = target_forward_s(plain)
    per = drafting_units(spec)
    if not per_target or not per:
        return None
    return sum(e.draft_s for e in spec) / per / per_target


def best_gamma(alpha: float, c: float, gammas: Iterable[int], block: bool = False) -> int:
    return max(gammas, key=lambda g: expected_speedup(alpha, g, c, block))


def interpolate(costs: dict[int, float], k: float, rising: bool = False) -> float:
    """V(k) from measured points: a measured k is its own point, linear between them, extended along the nearest
    segment past the ends. `rising`: a cost that cannot fall as k grows, so past the ends a falling segment is taken
    as flat, and V is never below 0 (what a few noisy timings would otherwise extend into)."""
    if k in costs:
        return costs[k]
    ks = sorted(costs)
    if len(ks) == 1:
        return costs[ks[0]]
    lo = max([x for x in ks[:-1] if x <= k], default=ks[0])
    hi = ks[ks.index(lo) + 1]
    if rising and not lo <= k <= hi:  # past an end: from that end, along the nearest segment
        end = hi if k > hi else lo
        slope = max(0.0, (costs[hi] - costs[lo]) / (hi - lo))
        return max(0.0, costs[end] + slope * (k - end))
    return costs[lo] + (costs[hi] - costs[lo]) * (k - lo) / (hi - lo)


def predicted_speedup(events: Sequence[StepEvent], relative: dict[int, float], forward_1: float) -> float | None:
    """The speedup a run should show if a step cost only its drafting and one bare target forward:
    tokens · V(1) / Σ (draft_s + V(k)), k = the tokens each step verified, V(k) = V(1) · relative[k] and V(1) the
    plain run's time per token. Measured ÷ this = efficiency."""
    tokens = sum(len(e.tokens) for e in events)
    spent = sum(e.draft_s + forward_1 * interpolate(relative, e.forward_tokens) for e in events)
    return tokens * forward_1 / spent if spent else None


def iid_speedup(events: Sequence[StepEvent], relative: dict[int, float], forward_1: float, gamma: int) -> float | None:
    """The paper's model at the run's own α (accepted / tested) and draft cost c per token (in V(1)), with the
    verify cost growing with k: E(α, γ) / (γc + V(γ + 1)/V(1)). Exact in expectation for the oracle drafter."""
    alpha = per_token_alpha(events)
    block = drafts_blocks(events)  # a block drafter's c is per pass, paid once
    per = drafting_units(events)
    if alpha is None or not per:
        return None
    c = sum(e.draft_s for e in events) / per / forward_1
    return expected_tokens_per_step(alpha, gamma) / ((c if block else gamma * c) + interpolate(relative, gamma + 1))
