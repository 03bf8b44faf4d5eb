"""Many requests on loaded models, in one of two modes: concurrency levels (a level's requests all arrive at 0, a row
for each: the static batch) or request rates (requests arrive on a schedule and are served by continuous batching, at
most `max_rows` decoding together). Both are the decode loop with an Admission (engine/admission.py), plain and with
each lane's drafter, at each point `rounds` times in turn (so a drift of the machine reaches every lane alike); every
greedy request is checked against its prompt decoded alone. What it sends is plain data (results.News), which a view
(levels_view.py, rates_view.py; pure) hears. The CLI's `concurrency` and `traffic` and the app's device calls run it.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..drafters.registry import NO_DRAFTER, build_row_drafting, kind
from ..engine import generate, new_generator
from ..engine.admission import Admission
from ..engine.batch_gamma import ForwardCosts
from ..engine.loop import generate_rows
from ..errors import SpecvizError, first_line
from ..events import PLAIN, StepEvent, generated_ids
from ..models.device import check_batch_fits
from ..runs import LaneRun, lane_runs
from ..runtimes.pair import Pair
from ..settings import Settings
from .latency import RequestTiming
from .levels_view import ConcurrencyView
from .rates_view import TrafficView
from .results import BatchStep, LevelRun, News, Prefill, TrafficRun
from .traffic_plan import Point, Slo, check_levels, requests

PROGRESS_EVERY_S = 0.5  # a run under way says how far it got at most this often


def prompt_of(request: int, prompts: list) -> int:
    """Which prompt a request asks: the list in turn, again from its start when it runs out."""
    return request % len(prompts)


@dataclass
class Served:
    """One lane's run at one point: what each request asked and wrote, when, and what each batch step did."""

    asked: list[int]  # request r asks prompt asked[r]
    arrivals: tuple[float, ...]
    admitted: dict[int, float]
    tokens: list[list[int]]
    row_seconds: list[float]  # each request's own decoding time: the steps it was part of
    first: dict[int, float] = field(default_factory=dict)  # request -> seconds after the start of its first token
    last: dict[int, float] = field(default_factory=dict)
    steps: list[BatchStep] = field(default_factory=list)
    prefills: list[Prefill] = field(default_factory=list)
    prefill_s: float = 0.0  # the longest prompt read of any request
    wall_s: float = 0.0

    def timings(self) -> tuple[RequestTiming, ...]:
        """Each request that got a token, in arrival order of the schedule."""
        return tuple(
            RequestTiming(p, self.arrivals[r], self.admitted[r], self.first[r], self.last[r], len(self.tokens[r]))
            for r, p in enumerate(self.asked)
            if r in self.first
        )


def serve(
    pair: Pair,
    prompts: list[list[int]],
    lane: LaneRun,
    point: Point,
    costs: ForwardCosts | None = None,
    stop=None,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[int | Served]:
    """One lane serving the point's requests (request r asks prompt r mod len(prompts)): the tokens written so far
    after each batch step (so a caller can report progress, and stop the run by closing this generator between two
    steps), then what was Served. Refused in one line before anything is allocated when the device has no room."""
    asked = [prompt_of(r, prompts) for r in range(len(point.arrivals))]
    settings = lane.settings
    target = pair.target
    rows = point.max_rows
    context = max(len(prompts[p]) for p in asked) + settings.max_new_tokens
    check_batch_fits(target.model, rows, context, 1 + (settings.gamma if lane.drafter != NO_DRAFTER else 0),
                     requests(rows))  # fmt: skip
    if pair.draft is not None and lane.drafter != NO_DRAFTER:
        check_batch_fits(pair.draft.model, rows, context, 1, f"{requests(rows)}' drafts")
    generators = [new_generator(target.device, settings.seed + r) for r in range(len(asked))]
    drafting = build_row_drafting(lane.drafter, settings, generators, target, pair.draft, lane.options, concurrent=True)
    admission = Admission(list(point.arrivals), rows, clock=clock)
    served = Served(asked, point.arrivals, admission.admitted, [[] for _ in asked], [0.0] * len(asked))
    began = clock()
    events = generate_rows(
        target, [prompts[p] for p in asked], settings, drafting, generators, stop, False, costs, admission, lane.table
    )
    for step in by_step(events):
        _heard(served, step, admission.now(), prompts)
        yield sum(map(len, served.tokens))
    served.wall_s = clock() - began
    yield served


def _heard(served: Served, step: list[tuple[int, StepEvent]], now: float, prompts: list[list[int]]) -> None:
    """One batch step kept: who joined (their prompts read together before it), each row's tokens and seconds."""
    joined = [r for r, _ in step if r not in served.first]
    if joined:
        read = sum(len(prompts[served.asked[r]]) for r in joined)
        served.prefills.append(Prefill(read, len(joined), next(e.prefill_s for r, e in step if r == joined[0])))
    for r, event in step:
        served.first.setdefault(r, now)
        served.last[r] = now
        served.tokens[r].extend(event.tokens)
        served.row_seconds[r] += event.step_s
        served.prefill_s = max(served.prefill_s, event.prefill_s)
    served.steps.append(batch_step(step))


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


class Levels:
    """The concurrency mode: each point a level, its requests decoded together; a run is a LevelRun."""

    request = "row"  # what a request is called here
    stopped = "stopped: the levels run so far stay"
    device_words = "concurrency sweep"  # what holds the device, as the app's line says it

    def too_many(self, rows: int) -> str:
        return f"{requests(rows)} at once"

    def where(self, lane: LaneRun, point: Point, turn: int, rounds: int) -> str:
        return f"{lane.name} · {requests(point.max_rows)} at once · round {turn + 1}/{rounds}"

    def starting(self, pair: Pair, lane: LaneRun, point: Point, where: str, turn: int, rounds: int) -> News:
        return News("message", f"{where}: {opening(pair, lane, point.max_rows)}")

    def run_of(self, lane: LaneRun, point: Point, turn: int, served: Served, stopped: bool) -> LevelRun:
        tokens = tuple(map(tuple, served.tokens))
        return LevelRun(lane.name, point.max_rows, tuple(served.asked), tokens, tuple(served.row_seconds),
                        tuple(served.steps), served.prefill_s, served.wall_s, stopped)  # fmt: skip


class Rates:
    """The traffic mode: each point a rate's arrivals, served by continuous batching; a run is a TrafficRun."""

    request = "request"
    stopped = "stopped: the runs so far stay"
    device_words = "traffic"

    def too_many(self, rows: int) -> str:
        return f"{rows} rows at once"

    def where(self, lane: LaneRun, point: Point, turn: int, rounds: int) -> str:
        return f"{lane.name}: {len(point.arrivals)} requests at {point.key:g}/s"

    def starting(self, pair: Pair, lane: LaneRun, point: Point, where: str, turn: int, rounds: int) -> News:
        return News("message", f"{where} (round {turn + 1}/{rounds})", lane=lane.name)

    def run_of(self, lane: LaneRun, point: Point, turn: int, served: Served, stopped: bool) -> TrafficRun:
        timings = served.timings()
        tokens = tuple(tuple(served.tokens[r]) for r in range(len(served.asked)) if r in served.first)
        return TrafficRun(lane.name, point.key, turn, point.max_rows, timings, tokens, tuple(served.steps),
                          tuple(served.prefills), stopped)  # fmt: skip


MODES = {"levels": Levels(), "rates": Rates()}


def run(
    pair: Pair,
    prompts: list[list[int]],
    settings: Settings,
    lanes: list[LaneRun],
    points: tuple[Point, ...],
    mode: Levels | Rates,
    rounds: int = 1,
    stop=None,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[News]:
    """Every point, plain and each lane, `rounds` times: a line before each run, the run after it, and once, for a
    lane that cannot decode a batch, why not. Refused in one line before any decoding when the largest point does not
    fit the device. A run under way says how far it got ("progress"), so the caller may stop it by closing this
    generator."""
    _check_fits(pair, prompts, settings, lanes, points, mode)
    plain = LaneRun(PLAIN, NO_DRAFTER, settings, None)
    costs = ForwardCosts()  # the target's forward seconds by tokens, shared by every run; drafting's, by drafter
    alone = {} if not settings.greedy else (yield from _alone(pair, prompts, settings, points, mode))
    refused = set()
    for point in points:
        for turn in range(rounds):
            for lane in [plain, *lanes]:
                if lane.name in refused:
                    continue
                if stop is not None and stop.is_set():
                    yield News("end", mode.stopped, stopped=True)
                    return
                try:
                    yield from _one_run(pair, prompts, lane, point, turn, rounds, mode, costs, alone, stop, clock)
                except SpecvizError as exc:  # this lane cannot decode a batch (or this one): it says why, once
                    refused.add(lane.name)
                    yield News("note", first_line(exc), lane=lane.name)
    yield News("end", "done")


def _check_fits(pair: Pair, prompts, settings: Settings, lanes, points: tuple[Point, ...], mode) -> None:
    """The largest point's rows, with the widest verify of any lane, refused in one line when the device has no room."""
    largest = max(points, key=lambda p: p.max_rows)
    widest = 1 + max((lane.settings.gamma for lane in lanes), default=0)
    asked = {prompt_of(r, prompts) for p in points for r in range(len(p.arrivals))}
    longest = max(len(prompts[p]) for p in asked) + settings.max_new_tokens
    check_batch_fits(pair.target.model, largest.max_rows, longest, widest, mode.too_many(largest.max_rows))


def _alone(pair: Pair, prompts, settings: Settings, points: tuple[Point, ...], mode) -> Iterator[News]:
    """Each prompt asked decoded alone, saying so first: what every greedy request of it must write. Returns them."""
    alone = {}
    for p in sorted({prompt_of(r, prompts) for point in points for r in range(len(point.arrivals))}):
        yield News("message", f"decoding prompt {p + 1} alone: the reference every {mode.request} of it must equal")
        alone[p] = tuple(generated_ids(generate(pair.target, prompts[p], settings, explain=False)))
    return alone


def _one_run(pair, prompts, lane: LaneRun, point: Point, turn, rounds, mode, costs, alone, stop, clock):
    """One lane at one point once: a line before, progress as it goes, the run (with each request's identity) after."""
    where = mode.where(lane, point, turn, rounds)
    yield mode.starting(pair, lane, point, where, turn, rounds)
    said = clock()
    total = len(point.arrivals) * lane.settings.max_new_tokens
    out = None
    for out in serve(pair, prompts, lane, point, costs.for_drafter(lane.drafter), stop, clock):
        if isinstance(out, int) and clock() - said >= PROGRESS_EVERY_S:
            said = clock()
            yield News("progress", f"{where}: {out}/{total} tokens", lane=lane.name)
    stopped = stop is not None and stop.is_set()
    run = mode.run_of(lane, point, turn, out, stopped)
    same = tuple(tuple(ids) == alone[p] for p, ids in run.written()) if alone and not stopped else None
    yield News("run", lane=lane.name, run=run, same=same)


def opening(pair: Pair, lane: LaneRun, rows: int) -> str:
    """What a level does before its first tokens, in words: the pause between two lanes. Measured on a CPU, it is
    nearly all the prompts' reading (a forward of each prompt into the target's cache) and the first step, in which a
    lane drafting with a draft model also has the draft read each prompt it drafts for; building the drafter takes no
    time to speak of."""
    drafts = False
    if pair.draft is not None and lane.drafter != NO_DRAFTER:
        recipe = kind(lane.drafter)
        drafts = recipe.draft_needed(recipe.parse(lane.options))
    prompts = "the prompt" if rows == 1 else f"the {rows} prompts, a forward each,"
    first = "the first step, where the draft model reads them too" if drafts else "the first step"
    return f"reading {prompts} into the target's cache, then {first}…"


def plan_levels(levels, entrants, greedy: bool) -> tuple[ConcurrencyView, tuple[LaneRun, ...]]:
    """What the CLI and the app both start a concurrency sweep from: the lanes that run (each of `entrants`, a
    workload/entrants.Entrant, that these models can run, in the order asked) and the view before any run, naming
    plain decoding and every lane, how each drafts, its fixed γ and, for an entrant that cannot run, why not."""
    lanes = tuple(lane_runs(entrants))
    view = ConcurrencyView(check_levels(levels), (PLAIN, *(lane.name for lane in lanes)), greedy=greedy)
    view.words = {e.name: e.contender.words for e in entrants}
    view.fixed = {lane.name: None if lane.settings.adaptive or lane.table else lane.settings.gamma for lane in lanes}
    view.notes = _cannot_run(entrants)
    return view, lanes


def plan_rates(rates: tuple[float, ...], entrants, slo: Slo, rounds: int) -> tuple[TrafficView, tuple[LaneRun, ...]]:
    """The same for traffic: the lanes that run and the view before any run, naming every lane and why an entrant
    cannot run."""
    lanes = tuple(lane_runs(entrants))
    view = TrafficView(tuple(rates), (PLAIN, *(e.name for e in entrants)), slo, rounds)
    view.notes = _cannot_run(entrants)
    return view, lanes


def _cannot_run(entrants) -> dict[str, str]:
    return {e.name: e.contender.note for e in entrants if not e.settings}
