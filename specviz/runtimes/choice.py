"""Which runtime computes the pair on this device, priced from measured costs, with its reason in words, and checked
against what a run then measures.

Every runtime is priced the same way, from a forward's cost over k tokens V(k) and a drafted token's d, at a prior
acceptance rate α: the best of plain decoding and every γ, since adaptive γ decodes plainly where no draft pays,

    tokens/s = max(1 / V(1), max over γ of E(α, γ) / (γ·d + V(γ + 1))),   E(α, γ) = (1 − α^(γ+1)) / (1 − α).

How each runtime measures its V(k) and d is its own (its module's `plan`). A runtime whose plain step is fast may find
a multi-token verify relatively dear (a quantised GGUF streams a quarter of bfloat16's bytes): the same draft may pay
on one runtime and lose on another, which is what the reason says. What a run measures then checks the prediction
(`Check`): the costs' prediction at the run's own α within CHECK_MARGIN of its measured tokens/s, or the choice says
it was a guess.
"""

from dataclasses import dataclass, field

from ..events import summarize
from ..models.kernel_costs import CostTable
from ..models.precision_choice import GAMMAS, PRIOR_ALPHA, expected_tokens

CHECK_MARGIN = 0.15  # a prediction within this share of the measured tokens/s stands; further off, a guess


def at(curve: dict[int, float], k: int) -> float:
    """A forward of k tokens from a curve measured at some widths: between them on the line, past them in proportion."""
    return CostTable("", {"": curve}).at("", k)


def speed(curve: dict[int, float], draft_s: float, alpha: float, gammas=GAMMAS) -> tuple[float, int]:
    """(tokens/s, γ) at the best γ for a forward costing curve[k] seconds over k tokens and a draft token draft_s:
    γ 0 (plain decoding) where no γ beats it."""
    best = (1.0 / curve[1], 0)
    for gamma in gammas:
        rate = expected_tokens(alpha, gamma) / (gamma * draft_s + at(curve, gamma + 1))
        best = max(best, (rate, gamma))
    return best


@dataclass(frozen=True)
class RuntimePlan:
    """One runtime's promise on this device: its path (a precision, or the GGUF's quantisation), plain decoding's
    tokens/s, the best γ and the tokens/s it promises, and its costs in one-token forwards."""

    runtime: str
    path: str
    plain: float  # tokens/s of plain decoding
    speed: float  # predicted tokens/s at the prior α and the best γ (plain decoding's where no γ pays)
    gamma: int  # the best γ; 0: no draft pays here
    verify_5: float  # a verify of 5 tokens in one-token forwards
    draft: float  # a drafted token in one-token forwards (0 without a draft model)
    curve: dict = field(default_factory=dict, compare=False)  # seconds by k
    draft_s: float = 0.0
    measured: object = field(default=None, compare=False)  # what the runtime priced it from (a precision choice)

    def as_dict(self) -> dict:
        return {
            "runtime": self.runtime,
            "path": self.path,
            "plain_tok_s": round(self.plain, 2),
            "predicted_tok_s": round(self.speed, 2),
            "gamma": self.gamma,
            "verify_5_forwards": round(self.verify_5, 2),
            "draft_forwards": round(self.draft, 3),
        }

    def predict(self, alpha: float, draft_s: float | None = None) -> float:
        """Tokens/s these costs predict at acceptance `alpha` (the best γ, or plain), for a drafted token costing
        `draft_s` (default: the pair's draft model's)."""
        return speed(self.curve, self.draft_s if draft_s is None else draft_s, alpha)[0]


def plan_from(
    runtime: str, path: str, curve: dict[int, float], draft_s: float, alpha=PRIOR_ALPHA, measured=None
) -> RuntimePlan:
    """A runtime's plan from its forward curve (seconds by k tokens) and a drafted token's seconds."""
    rate, gamma = speed(curve, draft_s, alpha)
    one = curve[1]
    return RuntimePlan(
        runtime,
        path,
        1.0 / one,
        rate,
        gamma,
        at(curve, 5) / one,
        draft_s / one,
        dict(curve),
        draft_s,
        measured,
    )


@dataclass(frozen=True)
class RuntimeChoice:
    """The runtime a pair runs on, its plan and the others', and why."""

    runtime: str
    reason: str
    plans: dict = field(default_factory=dict)  # runtime -> RuntimePlan
    device: str = ""
    asked: str = "auto"  # what was asked: auto (measured), or the runtime named

    @property
    def plan(self) -> RuntimePlan | None:
        return self.plans.get(self.runtime)

    def as_dict(self) -> dict:
        plain = {key: getattr(self, key) for key in ("runtime", "asked", "reason", "device")}
        return {**plain, "plans": {r: p.as_dict() for r, p in self.plans.items()}}


def choose_fastest(plans: dict[str, RuntimePlan], device: str) -> RuntimeChoice:
    """The runtime whose plan promises the most tokens/s, and the sentence that says why."""
    chosen = max(plans.values(), key=lambda p: p.speed)
    return RuntimeChoice(chosen.runtime, reason_for(chosen, plans, device), plans, device)


def reason_for(chosen: RuntimePlan, plans: dict[str, RuntimePlan], device: str) -> str:
    def words(p: RuntimePlan) -> str:
        spec = f"γ {p.gamma} promises {p.speed:.1f} tok/s" if p.gamma else "no γ pays, so plain decoding"
        draft = f", the draft {p.draft:.2f} of a forward" if p.draft else ""
        return (
            f"{p.runtime} {p.path}: plain {p.plain:.1f} tok/s, a verify of 5 tokens {p.verify_5:.1f} forwards"
            f"{draft}; {spec}"
        )

    others = [p for p in plans.values() if p is not chosen]
    against = "; ".join(words(p) for p in others)
    lead = f"{chosen.runtime} on {device}, measured fastest here: {words(chosen)}"
    return lead + (f" (against {against})" if against else "")


@dataclass(frozen=True)
class Check:
    """A run against the plan it was chosen by: the tokens/s predicted at the prior α and at the run's own α, and
    what the run measured."""

    predicted: float  # at the prior α
    at_run_alpha: float  # the same costs at the run's own α
    measured: float
    alpha: float | None

    @property
    def stands(self) -> bool:
        return abs(self.at_run_alpha - self.measured) <= CHECK_MARGIN * self.measured

    def line(self) -> str:
        alpha = f"α {self.alpha:.2f}" if self.alpha is not None else "no draft"
        verdict = (
            f"within {CHECK_MARGIN:.0%}: the choice stands"
            if self.stands
            else f"off by {abs(self.at_run_alpha - self.measured) / self.measured:.0%}: the choice was a guess"
        )
        return (
            f"predicted {self.predicted:.1f} tok/s at α {PRIOR_ALPHA}; this run {self.measured:.1f} tok/s at {alpha}, "
            f"where the costs predict {self.at_run_alpha:.1f} ({verdict})"
        )

    def as_dict(self) -> dict:
        return {
            "predicted_tok_s": round(self.predicted, 2),
            "predicted_at_run_alpha_tok_s": round(self.at_run_alpha, 2),
            "measured_tok_s": round(self.measured, 2),
            "run_alpha": None if self.alpha is None else round(self.alpha, 3),
            "stands": self.stands,
            "line": self.line(),
        }


def check(plan: RuntimePlan, measured: float, alpha: float | None, draft_s: float | None = None) -> Check:
    """The plan against a run that measured `measured` tokens/s at acceptance `alpha` (None: plain decoding, or no
    draft tested), a drafted token costing `draft_s` (default: the plan's draft model's)."""
    at_run = 1.0 / plan.curve[1] if alpha is None else plan.predict(alpha, draft_s)
    return Check(plan.speed, at_run, measured, alpha)


def in_forwards(curve: dict[int, float]) -> dict[int, float]:
    """A forward curve in one-token forwards: V(k) / V(1)."""
    return {w: s / curve[1] for w, s in curve.items()}


def check_run(plan: RuntimePlan, events) -> Check:
    """`plan` against a finished run's events (StepEvents): its decode tokens/s, its acceptance rate and what a
    drafted token cost it (a draft model's forwards, a lookup's search), at the best γ the costs give."""

    metrics = summarize(events)
    drafted = sum(len(e.proposed) for e in events)
    draft_s = sum(e.draft_s for e in events) / drafted if drafted else None
    return check(plan, metrics.tokens_per_s, metrics.acceptance_rate, draft_s)
