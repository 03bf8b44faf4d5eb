"""A measured sweep as vLLM's `--speculative-config`: for each drafter of the sweep, the draft length that served the
most tokens/s at each concurrency level run (0 where plain decoding served more), written as vLLM's draft length per
range of batch sizes by the serving package (serving/batch_table.py) from what the drafter's kind declares. It asks
the registry, so it is written where the sweep ran (the CLI, the app's backend) and recorded with it: the screen and
the snapshot page only show it."""

from ..drafters.registry import serving_of
from ..events import PLAIN
from ..models.offline import production_name
from ..serving.batch_table import VllmAdvice, per_batch_size, ranges
from ..serving.batch_table import vllm_advice as advice_for
from ..serving.vllm_setting import in_vllm
from ..settings import drafter_of
from .sweep_view import ConcurrencyView

__all__ = ["VllmAdvice", "best_gammas", "measured_tables", "ranges", "vllm_advice"]


def best_gammas(view: ConcurrencyView, drafter: str) -> dict[int, int]:
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


def _swept(view: ConcurrencyView) -> dict[str, dict[int, int]]:
    """Each drafter of the sweep that ran at some level: its best_gammas."""
    drafters = dict.fromkeys(drafter_of(lane) for lane in view.lanes if lane != PLAIN and lane not in view.notes)
    return {d: best for d in drafters if (best := best_gammas(view, d))}


def measured_tables(view: ConcurrencyView) -> dict[str, tuple]:
    """Each drafter vLLM also has that ran at some level: its fastest draft length per range of batch sizes."""
    return {d: per_batch_size(best) for d, best in _swept(view).items() if in_vllm(serving_of(d))}


def vllm_advice(view: ConcurrencyView, draft_model: str = "") -> list[VllmAdvice]:
    """One piece of advice per drafter of the sweep that ran at some level (`draft_model`: the run's, named as vLLM
    loads it)."""
    draft = production_name(draft_model)
    return [advice_for(d, serving_of(d), best, draft) for d, best in _swept(view).items()]
