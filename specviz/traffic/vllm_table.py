"""Traffic runs as vLLM's `--speculative-config`: at each batch size the runs' steps went through, the draft length
whose steps served the most tokens per second there (0 where plain decoding's did), written as vLLM's draft length per
range of batch sizes (serving/batch_table.py, from what the drafter's kind declares)."""

from collections import defaultdict

from ..drafters.registry import serving_of
from ..events import PLAIN
from ..models.offline import production_name
from ..serving.batch_table import VllmAdvice, vllm_advice
from ..settings import drafter_of
from .traffic_view import TrafficView

MIN_STEPS = 5  # steps at one batch size and γ before their speed is trusted


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


def best_gammas(view: TrafficView, drafter: str) -> dict[int, int]:
    """batch size -> the fastest draft length there among plain's steps and this drafter's lanes' (0: plain)."""
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


def traffic_vllm_advice(view: TrafficView, draft_model: str = "") -> list[VllmAdvice]:
    """One piece of advice per drafter that ran: its measured best draft length per batch size, as vLLM takes it."""
    drafters = dict.fromkeys(drafter_of(lane) for lane in view.lanes if lane != PLAIN and lane not in view.notes)
    draft, out = production_name(draft_model), []
    for d in drafters:
        if best := best_gammas(view, d):
            advice = vllm_advice(d, serving_of(d), best, draft)
            measured = ", ".join(f"{b}: {k}" for b, k in sorted(best.items()))
            note = f"the fastest draft length at each batch size the runs' steps went through ({measured})"
            out.append(VllmAdvice(d, advice.config, note if advice.config else advice.note))
    return out
