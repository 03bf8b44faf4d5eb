"""Means and groupings over BenchRows for the reports, and the drafters the reports single out (asked of the
registry as a report is drawn, so that importing a report loads no drafter)."""

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ASSISTED = "transformers assisted"  # transformers' assisted generation: the model drafters' counterpart


@dataclass(frozen=True)
class Drafters:
    """The drafters the report's tables and targets single out, by what each declares it does."""

    counterparts: Mapping[str, str]  # drafter -> transformers' method raced against it
    model: tuple[str, ...]  # those drafting with the pair's draft model, raced against assisted generation
    draft_model: str | None  # of those, the one that only drafts with it ("the draft model")
    hybrid: str | None  # of those, the one that copies where it can (its share of copied steps is shown)
    lookups: tuple[str, ...]  # those that only copy, in reverse menu order: the runs-in-order table's columns
    across_runs: str | None  # of those, the one that copies from earlier runs too (suffix decoding)
    tools: tuple[str, ...]  # measuring tools run per set acceptance rate (the oracle), left out of the targets
    serving: Mapping[str, Any]  # drafter -> what it is in the serving engines (serving/declaration.Serving)


def drafters() -> Drafters:
    """What the registry's kinds declare, read once per table or list of targets."""
    from ..drafters.registry import kinds

    every = kinds()
    model = [k for k in every if k.needs_draft]
    lookups = [k for k in reversed(every) if k.listing.lookup and not k.needs_draft]
    return Drafters(
        counterparts={k.name: k.listing.counterpart for k in every if k.listing.counterpart},
        model=tuple(k.name for k in model),
        draft_model=next((k.name for k in model if not k.listing.lookup), None),
        hybrid=next((k.name for k in model if k.listing.lookup), None),
        lookups=tuple(k.name for k in lookups),
        across_runs=next((k.name for k in lookups if k.remembers), None),
        tools=tuple(k.name for k in every if k.listing.sets_alpha),
        serving={k.name: k.serving for k in every},
    )


def mean(values):
    """The mean of the values that are not None; None if none are."""
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def markdown_table(titles, rows) -> str:
    """A markdown table: the titles, the rule under them, then each row of cells."""
    lines = ["| " + " | ".join(str(c) for c in cells) + " |" for cells in rows]
    return "\n".join(["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles), *lines])


def figure(x, suffix="") -> str:
    """A number as the tables show it: two decimals, or nothing where there is none."""
    return "" if x is None else f"{x:.2f}{suffix}"


def groups(rows, *keys):
    """Rows grouped by the given keys, in first-seen order."""
    out = {}
    for r in rows:
        out.setdefault(tuple(getattr(r, k) for k in keys), []).append(r)
    return out


def fastest(rows, key: str = "tps"):
    """((name, γ), rows) of the name and γ with the highest mean of `key` over prompts."""
    return max(groups(rows, "name", "gamma").items(), key=lambda kv: mean(getattr(r, key) for r in kv[1]))


def spread(rs) -> tuple[float, float]:
    """The slowest and fastest tokens/s over these rows' repeats (a row without repeats counts its own figure)."""
    ranges = [r.tps_range or (r.tps, r.tps) for r in rs]
    return min(low for low, _ in ranges), max(high for _, high in ranges)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two (slowest, fastest) spreads share a value: their comparison is not settled by these runs."""
    return a[0] <= b[1] and b[0] <= a[1]


def unsettled(a, b) -> str:
    """A note for a comparison of two groups of rows whose repeats' spreads overlap: these runs do not settle it."""
    return " [spreads overlap: not settled]" if overlap(spread(a), spread(b)) else ""


def best_cell(rs):
    """(γ, mean tokens/s over prompts) of the fastest γ among these rows; None if there are none."""
    by_gamma = {g: mean(r.tps for r in grs) for (g,), grs in groups(rs, "gamma").items()}
    return max(by_gamma.items(), key=lambda kv: kv[1]) if by_gamma else None
