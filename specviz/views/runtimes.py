"""Why the same drafter pays in one runtime and not in another, read off a Grand Prix that raced it on both: each
runtime's plain decoding, the drafter's speedup over it, how often its drafts held (α), what a drafted token cost
(c, in plain steps) and what a verify of k tokens cost (V(k)/V(1)), all as the race measured them, and one sentence.

A speedup is E(α, γ) / (γ·c + V(γ + 1)/V(1)): the same α and γ can pay where a verify of several tokens costs about
one forward (bfloat16 with AMX, a GPU) and lose where it costs several (a quantised model on a CPU, whose one-token
forward is fast). Where a lane never drafted (adaptive γ found nothing that could pay), its runtime's verify costs come
from the curve measured before the race, when one was (`curves`). Pure Python.
"""

import statistics
from dataclasses import dataclass

from ..events import PLAIN, summarize
from .grand_prix import GrandPrixView, RaceLane

VERIFY_AT = 5  # the verify the sentence quotes: γ 4 and its root


@dataclass(frozen=True)
class RuntimeSide:
    runtime: str
    lane: str  # the drafter's lane on this runtime
    plain_tok_s: float | None
    speedup: float | None
    alpha: float | None
    c: float | None  # a drafted token's seconds over a plain step's
    verify: dict  # k -> V(k)/V(1), measured in the race (or before it, where the lane never drafted)
    drafted: bool  # whether the lane drafted at all


def _median_step(lane: RaceLane) -> float | None:
    times = [e.verify_s for e in lane.events if e.forward_tokens <= 1 and e.verify_s > 0]
    return statistics.median(times) if times else None


def side(view: GrandPrixView, lane: RaceLane, curve: dict | None, runtime: str) -> RuntimeSide:
    """One runtime's numbers for `lane` (a drafter's lane of that runtime) against its runtime's plain lane."""
    plain = view.plain_of(lane)
    one = _median_step(plain)
    by_width: dict[int, list[float]] = {}
    for e in lane.events:
        if e.forward_tokens > 1:
            by_width.setdefault(e.forward_tokens, []).append(e.verify_s)
    verify = {k: statistics.median(v) / one for k, v in sorted(by_width.items())} if one else {}
    drafted_tokens = sum(len(e.proposed) for e in lane.events)
    c = sum(e.draft_s for e in lane.events) / drafted_tokens / one if one and drafted_tokens else None
    if not verify and curve:
        verify = {int(k): float(v) for k, v in curve.items() if int(k) > 1}
    m = summarize(lane.events) if lane.events else None
    return RuntimeSide(
        runtime,
        lane.name,
        summarize(plain.events).tokens_per_s if plain.events else None,
        view.speedup(lane),
        m.acceptance_rate if m else None,
        c,
        verify,
        bool(drafted_tokens),
    )


def compared(view: GrandPrixView, own: str, curves: dict | None = None) -> dict[str, list[RuntimeSide]]:
    """Each drafter raced on more than one runtime: its side on each, the race's own runtime (named `own`) first.
    `curves`: runtime -> V(k)/V(1) measured before the race (for a lane that never drafted)."""
    curves = curves or {}
    by_drafter: dict[str, list[RuntimeSide]] = {}
    for lane in view.lanes:
        if lane.drafter == PLAIN or not lane.runs or not lane.events:
            continue
        runtime = lane.runtime or own
        by_drafter.setdefault(lane.drafter, []).append(side(view, lane, curves.get(runtime), runtime))
    return {d: sides for d, sides in by_drafter.items() if len({s.runtime for s in sides}) > 1}


def at(verify: dict, k: int) -> float | None:
    """V(k)/V(1) at k, between the widths measured on the line through them (None with nothing measured)."""
    if not verify:
        return None
    if k in verify:
        return verify[k]
    ks = sorted(verify)
    lo, hi = max([w for w in ks if w < k], default=ks[0]), min([w for w in ks if w > k], default=ks[-1])
    if lo == hi:
        return verify[lo]
    return verify[lo] + (verify[hi] - verify[lo]) * (k - lo) / (hi - lo)


def sentence(drafter: str, sides: list[RuntimeSide]) -> str:
    """Why the drafter's speedup differs between the runtimes, in one sentence of the race's own numbers."""

    def part(s: RuntimeSide) -> str:
        verify = at(s.verify, VERIFY_AT)
        costs = []
        if verify is not None:
            costs.append(f"a verify of {VERIFY_AT} tokens cost {verify:.1f} plain steps")
        if s.c is not None:
            costs.append(f"a drafted token {s.c:.2f}")
        speed = "–" if s.speedup is None else f"{s.speedup:.2f}×"
        if not s.drafted:
            how = f"{speed}: no draft could pay there, so it decoded plainly"
        elif s.alpha is not None:
            how = f"at α {s.alpha:.2f} that made {speed}"
        else:
            how = speed
        return f"on {s.runtime} {' and '.join(costs) or 'its costs went unmeasured'}, {how}"

    return f"{drafter}: " + "; ".join(part(s) for s in sides) + "."
