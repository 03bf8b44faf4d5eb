"""A measured sweep written as vLLM's `--speculative-config`: for each drafter vLLM also has, the draft length that
served the most tokens/s at each concurrency level run (0 where plain decoding served more), as the ranges of
`num_speculative_tokens_per_batch_size` ([first batch size, last batch size, draft tokens]). Field and method names
as vLLM's documentation gives them (`vllm.config.speculative.SpeculativeConfig`; "Dynamic Speculative Decoding").
Pure Python."""

import json
from dataclasses import dataclass

from ..drafters.production import Ran, vllm_config
from ..drafters.vllm_methods import METHODS, NOT_IN_VLLM
from ..events import PLAIN
from ..settings import Settings
from .sweep_view import ConcurrencyView as LoadView


@dataclass(frozen=True)
class VllmAdvice:
    drafter: str
    config: dict | None  # the --speculative-config object; None where vLLM has no such method
    note: str  # how it was chosen, or why there is none

    @property
    def flag(self) -> str:
        return "" if self.config is None else f"--speculative-config '{json.dumps(self.config)}'"


def drafter_of(lane: str) -> str:
    return lane.split("@")[0]


def best_gammas(view: LoadView, drafter: str) -> dict[int, int]:
    """level -> the draft length of the fastest of plain decoding and this drafter's lanes there (0: plain)."""
    best = {}
    for level in view.levels:
        plain = view.figures(PLAIN, level)
        options = [(plain.throughput, 0)] if plain is not None else []
        for lane in view.lanes:
            f = view.figures(lane, level)
            if lane == PLAIN or drafter_of(lane) != drafter or f is None or f.gamma is None:
                continue
            fixed = view.fixed.get(lane)
            options.append((f.throughput, fixed if fixed else max(1, round(f.gamma))))
        if options:
            best[level] = max(options)[1]
    return best


def ranges(best: dict[int, int]) -> list[list[int]]:
    """[first, last, γ] per run of levels that chose the same γ; a level's range reaches up to the next level run."""
    levels = sorted(best)
    out = []
    for i, level in enumerate(levels):
        last = levels[i + 1] - 1 if i + 1 < len(levels) else level
        if out and out[-1][2] == best[level]:
            out[-1][1] = last
        else:
            out.append([level, last, best[level]])
    return out


def _swept(view: LoadView) -> dict[str, dict[int, int]]:
    """Each drafter of the sweep that ran at some level: its best_gammas."""
    drafters = dict.fromkeys(drafter_of(lane) for lane in view.lanes if lane != PLAIN and lane not in view.notes)
    return {d: best for d in drafters if (best := best_gammas(view, d))}


def measured_tables(view: LoadView) -> dict[str, tuple]:
    """Each drafter vLLM also has that ran at some level: its fastest draft length per range of batch sizes."""
    return {d: tuple(map(tuple, ranges(best))) for d, best in _swept(view).items() if d in METHODS}


def vllm_advice(view: LoadView, draft_model: str = "") -> list[VllmAdvice]:
    """One piece of advice per drafter of the sweep that ran at some level (`draft_model`: the run's, for the draft
    model's name)."""
    out, tables = [], measured_tables(view)
    for drafter, best in _swept(view).items():
        if drafter not in tables:
            out.append(VllmAdvice(drafter, None, NOT_IN_VLLM.get(drafter, "vLLM has no such method")))
            continue
        ran = Ran(drafter, Settings(), draft=draft_model, per_batch_size=tables[drafter])
        config = vllm_config(ran)  # as a race's vLLM setting is written, with the measured table
        note = (
            f"the fastest draft length at each level run ({', '.join(f'{b}: {k}' for b, k in sorted(best.items()))}); "
            f"above {max(best)} requests nothing was measured"
        )
        out.append(VllmAdvice(drafter, config, note))
    return out
