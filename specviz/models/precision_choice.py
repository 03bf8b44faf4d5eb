"""Which precision the target runs in on this device, chosen from measured forward costs (kernel_costs), with its
reason in words.

Speculative decoding pays where a verify forward of γ + 1 tokens costs little more than one token's forward. So for
each path the choice prices a step (γ draft tokens and one verify) against the tokens it is expected to write,
E(α, γ) = (1 − α^(γ+1)) / (1 − α), at a prior acceptance rate, and takes the best γ:

    tokens/s(path) = max over γ of E(α, γ) / (γ · draft + forward(path, γ + 1))

The target's own precision (bfloat16, or float32 where that is faster) is kept unless the int8 path is markedly
faster (QUANTISED_MARGIN): an int8 target is a slightly different model (its agreement with bfloat16 is measured in
docs/benchmark-log.md), worth it where it makes the race several times faster, not for a few percent. bfloat16 runs in
exact mode where pairing a one-row product with a zero row costs little (EXACT_COST); elsewhere it runs the
kernels as they are, and a greedy race may part from plain decoding at a near tie, which the badge names. The int8
path is exact by construction (integer products: quantize.RowInt8Linear).
"""

from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoConfig

from .kernel_costs import CostTable, Shape, costs_for, device_name
from .offline import cache_root

PRIOR_ALPHA = 0.8  # acceptance rate assumed before a run has measured one (a draft model on everyday prompts)
GAMMAS = range(1, 9)
QUANTISED_MARGIN = 1.5  # the int8 target must promise this many times the full precision's tokens/s
EXACT_COST = 1.15  # bfloat16 exact mode, where its paired one-row product costs at most this many plain ones


def expected_tokens(alpha: float, gamma: int) -> float:
    """Tokens a step of γ drafts writes on average: E = (1 − α^(γ+1)) / (1 − α)."""
    return gamma + 1.0 if alpha >= 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


@dataclass(frozen=True)
class PathPlan:
    path: str
    exact: bool
    plain: float  # seconds per plain token
    gamma: int
    speed: float  # predicted speculative tokens/s at the best γ

    def verify_ratio(self, table: CostTable, gamma: int = 4) -> float:
        """A verify of γ + 1 tokens in one-token forwards (as this path runs one token)."""
        return table.at(self.path, gamma + 1) / self.plain


def plan(table: CostTable, path: str, draft_cost: float, alpha: float = PRIOR_ALPHA) -> PathPlan:
    """The best γ for the target in `path`, and what it promises."""
    one = table.at(path, 1)
    two = table.at(path, 2)
    exact = path == "int8" or (path == "bfloat16" and two <= EXACT_COST * one)
    plain = two if path == "bfloat16" and exact else one  # exact bfloat16 pairs a token's row with a zero row
    speed, gamma = max((expected_tokens(alpha, g) / (g * draft_cost + table.at(path, g + 1)), g) for g in GAMMAS)
    return PathPlan(path, exact, plain, gamma, speed)


@dataclass(frozen=True)
class PrecisionChoice:
    """The target's precision, whether exact mode holds for it at little cost, the γ the costs favour, and why."""

    dtype: str
    exact: bool
    gamma: int
    reason: str
    plans: dict = field(default_factory=dict, compare=False)  # path → PathPlan
    device: str = ""
    draft_s: float = 0.0  # seconds per drafted token the choice priced (the draft model's, int8)
    table: CostTable | None = field(default=None, compare=False, repr=False)  # the costs it was chosen from

    def as_dict(self) -> dict:
        plain = {key: getattr(self, key) for key in ("dtype", "exact", "gamma", "reason", "device")}
        return {
            **plain,
            "paths": {
                p: {"plain_s": round(v.plain, 4), "gamma": v.gamma, "predicted_tok_s": round(v.speed, 2)}
                for p, v in self.plans.items()
            },
        }


def choose(table: CostTable, draft_cost: float, alpha: float = PRIOR_ALPHA) -> PrecisionChoice:
    """The target's precision from measured costs; `draft_cost`: seconds per draft token."""
    plans = {path: plan(table, path, draft_cost, alpha) for path in table.forward}
    full = [plans[p] for p in ("bfloat16", "float32") if p in plans]
    best_full = max(full, key=lambda p: p.speed) if full else None
    quantised = plans.get("int8")
    if best_full is None or (quantised and quantised.speed >= QUANTISED_MARGIN * best_full.speed):
        chosen = quantised
    else:
        chosen = best_full
    reason = _reason(table, chosen, plans)
    return PrecisionChoice(chosen.path, chosen.exact, chosen.gamma, reason, plans, table.device, draft_cost, table)


def _reason(table: CostTable, chosen: PathPlan, plans: dict) -> str:
    verify = ", ".join(f"{p} {v.verify_ratio(table):.1f}" for p, v in plans.items())
    speeds = ", ".join(f"{p} {v.speed:.1f}" for p, v in plans.items())
    because = (
        f"int8 promises {chosen.speed / max(v.speed for p, v in plans.items() if p != 'int8'):.1f}× the "
        f"full precision's speed"
        if chosen.path == "int8"
        else f"int8 would not be {QUANTISED_MARGIN}× faster"
        if "int8" in plans
        else "the fastest here"
    )
    exact = (
        "exact (greedy output is plain decoding's bit for bit)"
        if chosen.exact
        else "not exact (pairing a one-token row costs too much here; a near tie may part, and the badge says so)"
    )
    return (
        f"{chosen.path} on {table.device}: a verify of 5 tokens costs this many one-token forwards: {verify}; "
        f"predicted tok/s at the best γ: {speeds}; {chosen.path} because {because}; {exact}"
    )


def for_pair(target_source: str, draft_source: str, where: torch.device, local_only: bool, report=lambda _: None):
    """The choice for a pair (folders or Hub ids; `draft_source` empty for a lookup drafter), from its configs alone:
    no weights are read. On a GPU bfloat16, which GPUs run natively, without measuring."""
    if where.type != "cpu":
        name = device_name(where)
        return PrecisionChoice("bfloat16", False, 4, f"bfloat16 on {name}: a GPU's native precision", device=name)

    def shape_of(source: str) -> Shape:
        if source.endswith(".gguf"):  # an offline preset not yet converted: its config read from the GGUF
            path = Path(source)
            return Shape.of(AutoConfig.from_pretrained(path.parent, gguf_file=path.name))
        return Shape.of(AutoConfig.from_pretrained(source, local_files_only=local_only))

    try:
        shape = shape_of(target_source)
        draft = shape_of(draft_source) if draft_source else None
    except (AttributeError, OSError, ValueError) as exc:  # a config without the usual fields: today's default
        return PrecisionChoice("bfloat16", True, 4, f"bfloat16: the model's shape could not be read ({exc})")
    table = costs_for(shape, where, cache_root(), report)
    draft_cost = costs_for(draft, where, cache_root(), report, paths=("int8",)).at("int8", 1) if draft else 0.0
    return choose(table, draft_cost)
