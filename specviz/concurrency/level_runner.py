"""One level of a concurrency sweep on loaded models: `rows` requests decoded together, plain or with one lane's
drafter, every step one target forward for all rows still decoding (engine/loop.generate_rows). A level keeps what
each row wrote and, per batch step, what the step cost and yielded: the figures a sweep shows and the costs its theory
reads."""

import time
from collections.abc import Callable, Iterator

from ..drafters.registry import NO_DRAFTER, build_row_drafting
from ..engine import new_generator
from ..engine.batch_gamma import ForwardCosts
from ..engine.loop import generate_rows
from ..events import StepEvent
from ..models.device import check_batch_fits
from ..runs import LaneRun, Pair
from .sweep_plan import check_rows
from .sweep_results import BatchStep, LevelRun


def rows_of(prompts: list[list[int]], rows: int) -> list[int]:
    """Which prompt each of `rows` requests decodes: the list in turn, again from its start when it runs out."""
    return [r % len(prompts) for r in range(check_rows(rows))]


def decode_level(
    pair: Pair,
    prompts: list[list[int]],
    lane: LaneRun,
    rows: int,
    costs: ForwardCosts | None = None,
    stop=None,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[int | LevelRun]:
    """`rows` requests of `prompts` (in turn) decoded together under the lane's drafter, as it goes: the new tokens
    of every row so far after each batch step, then the LevelRun (so a caller can report progress, and stop the level
    by closing this generator between two steps). Refused in one line before anything is allocated when the device
    has no room for them."""
    chosen = rows_of(prompts, rows)
    settings, target = lane.settings, pair.target
    context = max(len(prompts[p]) for p in chosen) + settings.max_new_tokens
    widest = 1 + (settings.gamma if lane.drafter != NO_DRAFTER else 0)
    check_batch_fits(target.model, rows, context, widest, f"{rows} requests")
    if pair.draft is not None and lane.drafter != NO_DRAFTER:
        check_batch_fits(pair.draft.model, rows, context, 1, f"{rows} requests' drafts")
    generators = [new_generator(target.device, settings.seed + r) for r in range(rows)]
    drafting = build_row_drafting(lane.drafter, settings, generators, target, pair.draft, lane.options, concurrent=True)
    tokens, seconds = [[] for _ in chosen], [0.0] * rows
    steps, prefill_s, began = [], 0.0, clock()
    asked = [prompts[p] for p in chosen]
    for step in by_step(
        generate_rows(target, asked, settings, drafting, generators, stop, False, costs, gamma_table=lane.table)
    ):
        prefill_s = max(prefill_s, max(e.prefill_s for _, e in step))
        for row, event in step:
            tokens[row].extend(event.tokens)
            seconds[row] += event.step_s
        steps.append(batch_step(step))
        yield sum(map(len, tokens))
    wall = clock() - began
    stopped = stop is not None and stop.is_set()
    yield LevelRun(
        lane.name,
        rows,
        tuple(chosen),
        tuple(map(tuple, tokens)),
        tuple(seconds),
        tuple(steps),
        prefill_s,
        wall,
        stopped,
    )


def by_step(events: Iterator[tuple[int, StepEvent]]) -> Iterator[list[tuple[int, StepEvent]]]:
    """The rows' events grouped by the batch step they came from (a step yields one event per row it decoded)."""
    step = []
    for row, event in events:
        step.append((row, event))
        if len(step) == event.batch:
            yield step
            step = []


def batch_step(step: list[tuple[int, StepEvent]]) -> BatchStep:
    first = step[0][1]
    return BatchStep(
        rows=len(step),
        gamma=max(e.gamma for _, e in step),
        forward_tokens=first.batch_tokens,
        draft_s=first.draft_s,
        verify_s=first.verify_s,
        step_s=first.step_s,
        drafted=sum(len(e.proposed) for _, e in step),
        accepted=sum(e.accepted for _, e in step),
        new_tokens=sum(len(e.tokens) for _, e in step),
        read_tokens=sum(e.draft_read for _, e in step),
        drafting=sum(e.gamma > 0 for _, e in step),
    )
