"""The scoreboard: per prompt kind, each library's plain decoding and its fastest method in whole-call tokens/s, and
what specviz's best makes of transformers' best and of transformers' prompt lookup. The geometric means are given
with the kinds behind named beside them, so that no kind is averaged away. Pure Python over BenchRows."""

import statistics
from dataclasses import dataclass

from ..events import PLAIN
from .rows import drafter_of
from .tally import drafters, fastest, groups, markdown_table, mean, overlap, spread

HF_PLAIN = "transformers plain"
PROMPT_LOOKUP = "transformers prompt lookup"
BEST_OVER_BEST = 1.2  # specviz's best over transformers' best, on every kind
PLAIN_OVER_PLAIN = 0.95  # specviz's plain over transformers' plain, on every kind


@dataclass(frozen=True)
class Pick:
    """The fastest method of one library on one kind: its name and γ, mean tokens/s over the kind's prompts, the
    slowest and fastest of its repeats, and whether every greedy output equalled its library's plain decoding."""

    name: str
    gamma: object
    tps: float
    spread: tuple[float, float]
    same: bool | None

    def label(self) -> str:
        gamma = "" if self.gamma is None else f", γ {self.gamma}"
        return f"{self.tps:.2f} ({self.name}{gamma})" + (" ≠ plain" if self.same is False else "")


@dataclass(frozen=True)
class Line:
    """One kind at one temperature."""

    kind: str
    temperature: float
    prompt_tokens: int
    plain: Pick
    hf_plain: Pick | None
    best: Pick
    hf_best: Pick | None
    lookup: Pick | None  # transformers' prompt lookup at its fastest γ

    @property
    def where(self) -> str:
        """The kind as the verdicts name it (with its temperature where it is not greedy)."""
        return self.kind if self.temperature == 0 else f"{self.kind} T {self.temperature:g}"


def pick(rows) -> Pick | None:
    """The fastest (name, γ) among the rows, by mean tokens/s over prompts."""
    if not rows:
        return None
    (name, gamma), best = fastest(rows)
    same = [r.same_as_plain for r in best if r.same_as_plain is not None]
    return Pick(name, gamma, mean(r.tps for r in best), spread(best), all(same) if same else None)


def lines(rows) -> list[Line]:
    """The scoreboard's lines, per kind and temperature in the order the rows ran; kinds without specviz drafting
    are left out."""
    tools = drafters().tools
    out = []
    for (kind, t), rs in groups(rows, "kind", "temperature").items():
        ours = [r for r in rs if r.library == "specviz" and drafter_of(r.method) not in tools]
        theirs = [r for r in rs if r.library == "transformers"]
        plain = pick([r for r in ours if r.method == PLAIN])
        best = pick([r for r in ours if r.method != PLAIN])
        if plain is None or best is None:
            continue
        out.append(
            Line(
                kind,
                t,
                rs[0].prompt_tokens or 0,
                plain,
                pick([r for r in theirs if r.method == HF_PLAIN]),
                best,
                pick(theirs),
                pick([r for r in theirs if r.method == PROMPT_LOOKUP]),
            )
        )
    return out


def _ratio(a: Pick | None, b: Pick | None) -> str:
    """a's tokens/s over b's, marked where their repeats' spreads overlap (these runs do not settle it)."""
    if a is None or b is None:
        return ""
    return f"{a.tps / b.tps:.2f}" + ("~" if overlap(a.spread, b.spread) else "")


def scoreboard_table(rows) -> str:
    """The table, then the geometric means and the kinds that miss each target by name."""
    found = lines(rows)
    if not found:
        return ""
    titles = ["kind", "T", "prompt tokens", "specviz plain", "transformers plain", "plain ÷ plain", "specviz best",
              "transformers best", "best ÷ best", "best ÷ prompt lookup"]  # fmt: skip
    table = [
        [x.kind, f"{x.temperature:g}", x.prompt_tokens, f"{x.plain.tps:.2f}",
         f"{x.hf_plain.tps:.2f}" if x.hf_plain else "", _ratio(x.plain, x.hf_plain), x.best.label(),
         x.hf_best.label() if x.hf_best else "", _ratio(x.best, x.hf_best), _ratio(x.best, x.lookup)]
        for x in found
    ]  # fmt: skip
    notes = ["`~`: the two cells' repeats overlap, so these runs do not settle the comparison."]
    return markdown_table(titles, table) + "\n\n" + "\n".join(f"- {line}" for line in [*verdicts(found), *notes])


def verdicts(found: list[Line]) -> list[str]:
    """The geometric means over kinds, and each target with the kinds that miss it named."""
    raced = [x for x in found if x.hf_plain and x.hf_best]
    if not raced:
        return []
    over_plain = [x.best.tps / x.hf_plain.tps for x in raced]
    over_best = [x.best.tps / x.hf_best.tps for x in raced]
    return [
        f"specviz's best over transformers' plain, geometric mean over {len(raced)} kinds × temperatures: "
        f"{statistics.geometric_mean(over_plain):.2f}x (range {min(over_plain):.2f}–{max(over_plain):.2f})",
        f"specviz's best over transformers' best, geometric mean: {statistics.geometric_mean(over_best):.2f}",
        _missing("best ÷ best", BEST_OVER_BEST, {x.where: x.best.tps / x.hf_best.tps for x in raced}),
        _missing("plain ÷ plain", PLAIN_OVER_PLAIN, {x.where: x.plain.tps / x.hf_plain.tps for x in raced}),
        _missing(
            "best ÷ transformers' prompt lookup", 1.0, {x.where: x.best.tps / x.lookup.tps for x in raced if x.lookup}
        ),
    ]


def _missing(what: str, target: float, ratios: dict[str, float]) -> str:
    """Which kinds fall short of a target, each with its figure; or that none does."""
    short = {k: v for k, v in ratios.items() if v < target}
    named = ", ".join(f"{k} {v:.2f}" for k, v in short.items())
    return f"{what} ≥ {target:g} on {len(ratios) - len(short)} of {len(ratios)} kinds" + (
        f"; behind: {named}" if short else ""
    )
