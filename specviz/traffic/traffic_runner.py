"""Traffic on loaded models: requests arrive on a schedule and are served by continuous batching (the decode loop with
an Admission: engine/admission.py), plain and with each lane's drafter, at each rate, `rounds` times in turn (so a
drift of the machine reaches every lane alike). Every greedy request is checked against its prompt decoded alone.
What it sends is plain data (traffic_results.TrafficNews)."""

import time
from collections.abc import Callable, Iterator

from ..concurrency.level_runner import batch_step, by_step
from ..drafters.registry import NO_DRAFTER, build_row_drafting
from ..engine import generate, new_generator
from ..engine.admission import Admission
from ..engine.batch_gamma import ForwardCosts
from ..engine.loop import generate_rows
from ..errors import SpecvizError, first_line
from ..events import PLAIN, generated_ids
from ..models.device import check_batch_fits
from ..runs import LaneRun, Pair
from ..settings import Settings
from .latency import RequestTiming
from .traffic_results import Prefill, TrafficNews, TrafficRun

PROGRESS_EVERY_S = 0.5  # a run under way says how far it got at most this often


def prompt_of(request: int, prompts: list) -> int:
    """Which prompt a request asks: the list in turn, again from its start when it runs out."""
    return request % len(prompts)


def serve(
    pair: Pair,
    prompts: list[list[int]],
    lane: LaneRun,
    arrivals: tuple[float, ...],
    max_rows: int,
    costs: ForwardCosts | None = None,
    stop=None,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[int | tuple]:
    """One lane serving requests that arrive at `arrivals` (request r asks prompt r mod len(prompts)), at most
    `max_rows` decoding together: the tokens written so far after each step, then (timings, tokens, steps,
    prefills), each request's time counted from the run's start."""
    asked = [prompt_of(r, prompts) for r in range(len(arrivals))]
    settings, target = lane.settings, pair.target
    generators = [new_generator(target.device, settings.seed + r) for r in range(len(asked))]
    drafting = build_row_drafting(lane.drafter, settings, generators, target, pair.draft, lane.options, concurrent=True)
    admission = Admission(list(arrivals), max_rows, clock=clock)
    first, last, tokens, steps, prefills = {}, {}, [[] for _ in asked], [], []
    rows = generate_rows(
        target, [prompts[p] for p in asked], settings, drafting, generators, stop, False, costs, admission, lane.table
    )
    for step in by_step(rows):
        now = admission.now()
        joined = [r for r, e in step if r not in first]
        if joined:  # their prompts were read together before this step
            read = sum(len(prompts[asked[r]]) for r in joined)
            prefills.append(Prefill(read, len(joined), next(e.prefill_s for r, e in step if r == joined[0])))
        for r, event in step:
            first.setdefault(r, now)
            last[r] = now
            tokens[r].extend(event.tokens)
        steps.append(batch_step(step))
        yield sum(map(len, tokens))
    served = [r for r in range(len(asked)) if r in first]
    timings = [
        RequestTiming(asked[r], arrivals[r], admission.admitted[r], first[r], last[r], len(tokens[r])) for r in served
    ]
    yield tuple(timings), tuple(tuple(tokens[r]) for r in served), tuple(steps), tuple(prefills)


def traffic(
    pair: Pair,
    prompts: list[list[int]],
    settings: Settings,
    lanes: list[LaneRun],
    schedules: dict[float, tuple[float, ...]],
    max_rows: int,
    rounds: int = 1,
    stop=None,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[TrafficNews]:
    """Every rate's schedule (rate -> arrival times), plain and each lane, `rounds` times: a line before each run,
    the run after it, and once, for a lane that cannot decode a batch, why not. Refused in one line before any
    decoding when `max_rows` rows do not fit the device."""
    widest = 1 + max((lane.settings.gamma for lane in lanes), default=0)
    longest = max(map(len, prompts)) + settings.max_new_tokens
    check_batch_fits(pair.target.model, max_rows, longest, widest, f"{max_rows} rows at once")
    plain = LaneRun(PLAIN, NO_DRAFTER, settings, None)
    costs = ForwardCosts()  # the target's forward seconds by tokens, shared by every run; drafting's, by drafter
    alone, refused = {}, set()
    if settings.greedy:  # each prompt decoded alone: what every request of it must write
        for p in sorted({prompt_of(r, prompts) for times in schedules.values() for r in range(len(times))}):
            yield TrafficNews("message", f"decoding prompt {p + 1} alone: the reference every request of it must equal")
            alone[p] = tuple(generated_ids(generate(pair.target, prompts[p], settings, explain=False)))
    for rate, arrivals in schedules.items():
        for turn in range(rounds):
            for lane in [plain, *lanes]:
                if lane.name in refused:
                    continue
                if stop is not None and stop.is_set():
                    yield TrafficNews("end", "stopped: the runs so far stay")
                    return
                what = f"{lane.name}: {len(arrivals)} requests at {rate:g}/s"
                yield TrafficNews("message", f"{what} (round {turn + 1}/{rounds})", lane=lane.name)
                said, total, out = clock(), len(arrivals) * settings.max_new_tokens, None
                try:
                    priced = costs.for_drafter(lane.drafter)
                    for out in serve(pair, prompts, lane, arrivals, max_rows, priced, stop, clock):
                        if isinstance(out, int) and clock() - said >= PROGRESS_EVERY_S:
                            said = clock()
                            yield TrafficNews("progress", f"{what}: {out}/{total} tokens", lane=lane.name)
                except SpecvizError as exc:  # this lane cannot decode a batch: it says why, once
                    refused.add(lane.name)
                    yield TrafficNews("note", first_line(exc), lane=lane.name)
                    continue
                timings, tokens, steps, prefills = out
                stopped = stop is not None and stop.is_set()
                run = TrafficRun(lane.name, rate, turn, max_rows, timings, tokens, steps, prefills, stopped)
                same = tuple(t == alone[x.prompt] for x, t in zip(timings, tokens)) if alone and not stopped else None
                yield TrafficNews("run", lane=lane.name, run=run, same=same)
    yield TrafficNews("end", "done")
