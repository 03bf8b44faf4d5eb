"""Why a run's speedup came out as it did, from the run's own measurements.

A speculative step costs its drafting, its verify forward (over the last token and every drafted one) and the
engine's bookkeeping; it yields τ tokens. In units of one plain step V(1) (the plain run's own time per token):

    speedup = τ / (draft + verify + overhead)

Leviathan et al.'s model replaces τ by what i.i.d. acceptance at rate α gives a step of γ drafts,
E(α, γ) = (1 − α^(γ+1)) / (1 − α); with each step's own γ and measured costs this is the predicted speedup, and
the gap to the measured one is what the i.i.d. assumption misses. When speculation lost, the term that lost it is
named: acceptance too low (τ near 1), or the largest of the draft's cost, the verify forward's excess over one
plain step, and overhead. The same numbers then say which γ would pay. A block drafter (DFlash) pays one pass
per step whatever γ, so its drafting is counted per pass, not per drafted token. Pure Python.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from ..events import StepEvent
from .theory import drafting_units, drafts_blocks, expected_tokens_per_step, per_token_alpha

GAMMAS = range(0, 17)  # what the suggestion considers; γ 0 is plain decoding


@dataclass(frozen=True)
class Diagnosis:
    measured: float  # speculative tokens/s over plain tokens/s (decode time)
    predicted: float  # E(α, γ_i) per step over the measured costs
    alpha: float
    tau: float  # tokens per speculative step, measured
    draft: float  # per step, in plain steps: the drafter's time (γc)
    verify: float  # the verify forward and the rule, per step
    overhead: float  # the rest of a step
    c: float  # drafting per drafted token; a block drafter: per pass
    verify_slope: float  # extra verify cost per extra token in the forward
    culprit: str  # "" when speculation paid, else acceptance | draft | verify | overhead
    best_gamma: int
    best_predicted: float
    block: int = 0  # a block drafter's block (the positions one pass fills); 0: drafting costs per token

    def line(self) -> str:
        head = (
            f"speedup {self.measured:.2f}× measured, {self.predicted:.2f}× predicted (α {self.alpha:.2f}; per step "
            f"τ {self.tau:.2f} tokens for {self.draft:.2f} draft + {self.verify:.2f} verify + "
            f"{self.overhead:.2f} overhead, in plain steps)"
        )
        if not self.culprit:
            return head
        why = {
            "acceptance": f"acceptance too low: τ {self.tau:.2f} barely beats a plain step",
            "draft": f"the draft is too expensive: {self.draft:.2f} plain steps of drafting per step "
            + (f"(one pass of {self.block} positions)" if self.block else f"(c {self.c:.2f})"),
            "verify": f"the verify forward costs {self.verify:.2f} plain steps for its {self.verify_slope:.2f} per "
            "extra token",
            "overhead": f"overhead: {self.overhead:.2f} plain steps of bookkeeping per step",
        }[self.culprit]
        if self.best_gamma == 0:
            advice = "with these α and costs no γ pays: plain decoding, or a drafter that is cheaper or accepted more"
        else:
            advice = f"the same numbers say γ {self.best_gamma} would give {self.best_predicted:.2f}×"
        return f"{head}; lost to {why}; {advice}"


def _fit(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares line through (k, cost): (intercept, slope); a flat line when every k is the same."""
    n = len(points)
    mean_k = sum(k for k, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((k - mean_k) ** 2 for k, _ in points)
    slope = sum((k - mean_k) * (v - mean_v) for k, v in points) / spread if spread else 0.0
    return mean_v - slope * mean_k, max(slope, 0.0)


def diagnose(plain: Sequence[StepEvent], spec: Sequence[StepEvent], unit: float | None = None) -> Diagnosis | None:
    """None until both sides have steps and the speculative side has drafted. `unit`: seconds of plain decoding per
    token, when the caller measured it better (the benchmark brackets its cells with two plain runs)."""
    drafted = [e for e in spec if e.proposed]
    if not plain or not drafted:
        return None
    unit = unit or sum(e.step_s for e in plain) / sum(len(e.tokens) for e in plain)  # V(1): a plain step per token
    steps = len(spec)
    split = time_split(spec)
    draft, verify, overhead = (seconds / steps / unit for seconds in (split.draft, split.verify, split.overhead))
    tokens = sum(len(e.tokens) for e in spec)
    measured = (tokens / sum(e.step_s for e in spec)) * unit
    alpha = per_token_alpha(spec) or 0.0
    expected = sum(expected_tokens_per_step(alpha, len(e.proposed)) if e.proposed else 1.0 for e in spec)
    predicted = expected / (steps * (draft + verify + overhead))
    block = max(e.block for e in drafted) if drafts_blocks(drafted) else 0
    c = sum(e.draft_s for e in drafted) / drafting_units(drafted) / unit  # per token, or per pass
    base, slope = _fit([(e.forward_tokens, e.verify_s / unit) for e in spec])

    def model(gamma: int) -> float:  # the speedup a fixed γ would give with these α and costs
        if gamma == 0:
            return 1.0
        cost = (c if block else gamma * c) + base + slope * (gamma + 1) + overhead
        return expected_tokens_per_step(alpha, gamma) / cost

    best = max((g for g in GAMMAS if not block or g <= block), key=model)
    culprit = ""
    if measured < 1.0:
        excess = {"draft": draft, "verify": verify - 1.0, "overhead": overhead}
        culprit = "acceptance" if tokens / steps < 1.2 else max(excess, key=excess.get)
    return Diagnosis(
        measured, predicted, alpha, tokens / steps, draft, verify, overhead, c, slope, culprit, best, model(best), block
    )


@dataclass(frozen=True)
class TimeSplit:
    """Where one side's own time went, in seconds."""

    prefill: float
    draft: float
    verify: float  # for plain decoding: its forwards
    overhead: float


def time_split(events: Sequence[StepEvent]) -> TimeSplit:
    return TimeSplit(
        sum(e.prefill_s for e in events),
        sum(e.draft_s for e in events),
        sum(e.verify_s for e in events),
        sum(max(0.0, e.step_s - e.draft_s - e.verify_s) for e in events),
    )
