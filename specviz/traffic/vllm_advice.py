"""What a run under load measured, as vLLM's `--speculative-config`: for each drafter that ran, the draft length that
served the most tokens/s at each batch size (0 where plain decoding served more), written as vLLM's draft length per
range of batch sizes by the serving package (serving/batch_table.py) from what the drafter's kind declares. A
concurrency sweep reads it off its levels (a level's rows are its batch size); traffic off the batch steps its runs
went through. It asks the registry, so it is written where the run happened (the CLI, the app's backend) and recorded
with it: the screens and the snapshot pages only show it."""

from collections import defaultdict

from ..drafters.registry import serving_of
from ..events import PLAIN
from ..models.offline import production_name
from ..serving.batch_table import VllmAdvice, per_batch_size
from ..serving.batch_table import vllm_advice as advice_for
from ..serving.vllm_setting import in_vllm
from ..settings import drafter_of
from .levels_view import ConcurrencyView
from .rates_view import TrafficView

MIN_STEPS = 5  # steps at one batch size and γ before traffic trusts their speed


def best_gammas(view: ConcurrencyView | TrafficView, drafter: str) -> dict[int, int]:
    """batch size -> the draft length of the fastest of plain decoding and this drafter's lanes there (0: plain)."""
    return by_level(view, drafter) if isinstance(view, ConcurrencyView) else by_batch_step(view, drafter)


def by_level(view: ConcurrencyView, drafter: str) -> dict[int, int]:
    """At each level, the fastest of plain and the drafter's lanes, by the level's throughput."""
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


def by_batch_step(view: TrafficView, drafter: str) -> dict[int, int]:
    """At each batch size traffic's steps went through, the fastest γ among plain's steps and the drafter's lanes'."""
    runs = [run for run, _ in view.order if run.lane == PLAIN or drafter_of(run.lane) == drafter]
    plain = step_speeds([run for run in runs if run.lane == PLAIN])
    drafted = step_speeds([run for run in runs if run.lane != PLAIN])
    best = {}
    for rows in sorted(set(plain) | set(drafted)):
        options = {g: speed for g, speed in drafted.get(rows, {}).items() if g > 0}
        if 0 in plain.get(rows, {}):
            options[0] = plain[rows][0]
        if len(options) > 1:  # a choice was measured: plain and a draft length, or two draft lengths
            best[rows] = max(options, key=options.get)
    return best


def step_speeds(runs) -> dict[int, dict[int, float]]:
    """batch size -> γ -> new tokens per second over every step of `runs` at that size and γ (MIN_STEPS at least).
    Only steps where every row drafted γ, or none did: vLLM's table gives all rows one draft length."""
    tokens, seconds, count = (defaultdict(lambda: defaultdict(float)) for _ in range(3))
    for run in runs:
        for step in run.steps:
            if step.drafting_rows not in (0, step.rows):
                continue
            tokens[step.rows][step.gamma] += step.new_tokens
            seconds[step.rows][step.gamma] += step.step_s
            count[step.rows][step.gamma] += 1
    return {
        rows: {
            g: tokens[rows][g] / seconds[rows][g] for g in by_gamma if count[rows][g] >= MIN_STEPS and seconds[rows][g]
        }
        for rows, by_gamma in tokens.items()
    }


def _measured(view: ConcurrencyView | TrafficView) -> dict[str, dict[int, int]]:
    """Each drafter that ran and measured a choice somewhere: its best_gammas."""
    drafters = dict.fromkeys(drafter_of(lane) for lane in view.lanes if lane != PLAIN and lane not in view.notes)
    return {d: best for d in drafters if (best := best_gammas(view, d))}


def measured_tables(view: ConcurrencyView | TrafficView) -> dict[str, tuple]:
    """Each drafter vLLM also has that measured a choice: its fastest draft length per range of batch sizes."""
    return {d: per_batch_size(best) for d, best in _measured(view).items() if in_vllm(serving_of(d))}


def vllm_advice(view: ConcurrencyView | TrafficView, draft_model: str = "") -> list[VllmAdvice]:
    """One piece of advice per drafter that measured a choice (`draft_model`: the run's, named as vLLM loads it)."""
    draft = production_name(draft_model)
    out = []
    for d, best in _measured(view).items():
        advice = advice_for(d, serving_of(d), best, draft)
        if isinstance(view, TrafficView) and advice.config:
            measured = ", ".join(f"{b}: {k}" for b, k in sorted(best.items()))
            advice = VllmAdvice(d, advice.config, f"the fastest draft length at each batch size the runs' steps went "
                                                  f"through ({measured})")  # fmt: skip
        out.append(advice)
    return out
