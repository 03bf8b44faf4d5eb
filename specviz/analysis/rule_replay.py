"""A proof of losslessness you can watch: one sampled step's acceptance rule replayed many times, with no model.

The step recorded, at each position it tested, the target's p and (for a draft model) the drafter's q of a few
leading tokens. The replay takes the position where the step's draft was rejected (else its first): there the
rule had real work to do. The rest of each distribution becomes one more outcome, "everything else", so p and q are two
distributions over the same short list, and the rule is applied to them as the engine applies it to the whole
vocabulary. What it emits is counted: the correct rule's histogram is p (rejection sampling is exact over any
alphabet), and a chi-square test says how well the counts fit; a broken rule pulls away from p and fails the same
test. Pure Python: the UI runs it directly.
"""

import bisect
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..events import StepEvent
from .stats import chi_square_p

REPLAYS = 10_000
REST = "everything else"

Rule = Callable[[list[float], list[float], list[int], random.Random], int]


def _draw(weights: Sequence[float], rng: random.Random) -> int:
    cumulative = []
    total = 0.0
    for w in weights:
        total += max(w, 0.0)
        cumulative.append(total)
    return min(bisect.bisect_right(cumulative, rng.random() * total), len(weights) - 1)


def _residual(p: list[float], q: list[float]) -> list[float]:
    r = [max(0.0, a - b) for a, b in zip(p, q)]
    return r if sum(r) > 0 else p


# A draft model's step: x ~ q, kept with probability min(1, p(x)/q(x)), else the token comes from norm(max(0, p − q)).
def chain_rule(p, q, _, rng):
    x = _draw(q, rng)
    return x if rng.random() * q[x] < p[x] else _draw(_residual(p, q), rng)


def keep_the_draft(p, q, _, rng):
    return _draw(q, rng)


def resample_from_p(p, q, _, rng):
    x = _draw(q, rng)
    return x if rng.random() * q[x] < p[x] else _draw(p, rng)


def keep_when_p_beats_q(p, q, _, rng):
    x = _draw(q, rng)
    return x if p[x] >= q[x] else _draw(_residual(p, q), rng)


# A lookup's step (q a point mass on each candidate): try the candidates in turn, keep one with probability p'(x),
# else remove it from p' (zero it, renormalise); when all fail, the token comes from what is left of p'.
def tree_rule(p, _, candidates, rng):
    left = list(p)
    for x in candidates:
        if rng.random() * sum(left) < left[x]:
            return x
        left[x] = 0.0
    return _draw(left, rng)


def forget_the_rejected(p, _, candidates, rng):
    for x in candidates:
        if rng.random() < p[x]:
            return x
    return _draw(p, rng)


def keep_the_first_candidate(p, _, candidates, rng):
    return candidates[0]


CHAIN_RULES: dict[str, Rule] = {
    "the rule: keep x with min(1, p/q), else draw from the residual": chain_rule,
    "broken: always keep the draft's token": keep_the_draft,
    "broken: after a rejection, draw from p instead of the residual": resample_from_p,
    "broken: keep the draft whenever p ≥ q, no coin": keep_when_p_beats_q,
}
TREE_RULES: dict[str, Rule] = {
    "the rule: keep each candidate with p'(x), removing the rejected": tree_rule,
    "broken: never remove a rejected candidate": forget_the_rejected,
    "broken: always keep the first candidate": keep_the_first_candidate,
}


@dataclass(frozen=True)
class ReplayedStep:
    labels: tuple[str, ...]  # the recorded tokens' texts, then REST
    p: tuple[float, ...]
    q: tuple[float, ...] | None  # a draft model's q; None for a lookup (point masses on the candidates)
    candidates: tuple[int, ...]  # a lookup's candidates at this position, as indices into labels, in the order tried
    position: int  # the draft position replayed, 1-based
    counts: tuple[int, ...]
    rule: str
    p_value: float
    seconds: float

    @property
    def n(self) -> int:
        return sum(self.counts)


def rules_for(event: StepEvent | None) -> dict[str, Rule]:
    """The rules a step can be replayed with: none for a greedy, typical or plain step."""
    if event is None or event.detail is None or event.detail.rule != "lossless" or not event.detail.leading:
        return {}
    k = event.accepted if event.accepted < len(event.proposed) else 0
    return CHAIN_RULES if event.detail.leading[k].q is not None else TREE_RULES


def replay_step(
    event: StepEvent, text_of: Callable[[int], str], rule: str, n: int = REPLAYS, seed: int = 0
) -> ReplayedStep:
    rules = rules_for(event)
    if rule not in rules:
        raise ValueError(f"this step cannot be replayed with {rule!r}")
    began = time.perf_counter()
    k = event.accepted if event.accepted < len(event.proposed) else 0  # 0-based: where a draft was rejected
    lead = event.detail.leading[k]
    ids = list(lead.ids)
    p = [*lead.p, max(0.0, 1.0 - sum(lead.p))]
    q = None if lead.q is None else [*lead.q, max(0.0, 1.0 - sum(lead.q))]
    held = tuple(event.proposed[:k])
    tried = [c[k] for c in (event.candidates or (event.proposed,)) if len(c) > k and tuple(c[:k]) == held]
    candidates = [ids.index(t) for t in dict.fromkeys(tried) if t in ids]  # those whose p was recorded
    apply = rules[rule]
    rng = random.Random(seed)
    counts = [0] * len(p)
    for _ in range(n):
        counts[apply(p, q, candidates, rng)] += 1
    p_value = chi_square_p(dict(enumerate(counts)), dict(enumerate(p)), n)
    return ReplayedStep(
        tuple([*map(text_of, ids), REST]),
        tuple(p),
        None if q is None else tuple(q),
        tuple(candidates),
        k + 1,
        tuple(counts),
        rule,
        p_value,
        time.perf_counter() - began,
    )
