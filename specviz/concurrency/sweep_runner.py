"""A concurrency sweep on loaded models: at every level, plain decoding batched and each lane, `rounds` times in turn
(so a drift of the machine reaches every lane alike), each greedy row checked against its prompt decoded alone.
The CLI's `concurrency` and the app's device call run this; what it sends is plain data
(sweep_results.ConcurrencyNews), which a ConcurrencyView (sweep_view.py, pure) hears."""

import time
from collections.abc import Callable, Iterator

from ..drafters.registry import NO_DRAFTER, kind
from ..engine import generate
from ..engine.batch_gamma import ForwardCosts
from ..errors import SpecvizError, first_line
from ..events import PLAIN, generated_ids
from ..models.device import check_batch_fits
from ..runs import LaneRun, Pair, lane_runs
from ..settings import Settings
from .level_runner import decode_level, rows_of
from .sweep_plan import check_levels
from .sweep_results import ConcurrencyNews
from .sweep_view import ConcurrencyView

PROGRESS_EVERY_S = 0.5  # a level under way says how far it got at most this often


def plan_sweep(levels, entrants, greedy: bool) -> tuple[ConcurrencyView, tuple[LaneRun, ...]]:
    """What the CLI and the app both start a sweep from: the lanes that run (each of `entrants`, a
    workload/entrants.Entrant, that these models can run, in the order asked) and the view before any run, naming
    plain decoding and every lane, how each drafts, its fixed γ and, for an entrant that cannot run, why not."""
    lanes = tuple(lane_runs(entrants))
    view = ConcurrencyView(check_levels(levels), (PLAIN, *(lane.name for lane in lanes)), greedy=greedy)
    view.words = {e.name: e.contender.words for e in entrants}
    view.fixed = {lane.name: None if lane.settings.adaptive or lane.table else lane.settings.gamma for lane in lanes}
    view.notes = {e.name: e.contender.note for e in entrants if not e.settings}
    return view, lanes


def sweep(
    pair: Pair,
    prompts: list[list[int]],
    settings: Settings,
    lanes: list[LaneRun],
    levels: tuple[int, ...],
    rounds: int = 1,
    stop=None,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[ConcurrencyNews]:
    """Every level, plain and each lane, `rounds` times: a line before each run, the run after it, and once, for a
    lane that cannot decode a batch, why not. Refused in one line before any decoding when the largest level does not
    fit the device. A level under way says how far it got ("progress"), so the caller may stop it by closing this
    generator."""
    widest = 1 + max((lane.settings.gamma for lane in lanes), default=0)
    longest = max(len(prompts[p]) for p in rows_of(prompts, max(levels))) + settings.max_new_tokens
    check_batch_fits(pair.target.model, max(levels), longest, widest, f"{max(levels)} requests at once")
    plain = LaneRun(PLAIN, NO_DRAFTER, settings, None)
    costs = ForwardCosts()  # the target's forward seconds by tokens, shared by every run; drafting's, by drafter
    alone, refused = {}, set()
    if settings.greedy:  # each prompt decoded alone: what every row of it must write
        for p in sorted(set(rows_of(prompts, max(levels)))):
            yield ConcurrencyNews("message", f"decoding prompt {p + 1} alone: the reference every row of it must equal")
            alone[p] = generated_ids(generate(pair.target, prompts[p], settings, explain=False))
    for level in levels:
        for turn in range(rounds):
            for lane in [plain, *lanes]:
                if lane.name in refused:
                    continue
                if stop is not None and stop.is_set():
                    yield ConcurrencyNews("end", "stopped: the levels run so far stay", stopped=True)
                    return
                where = f"{lane.name} · {level} request{'s' * (level > 1)} at once · round {turn + 1}/{rounds}"
                yield ConcurrencyNews("message", f"{where}: {opening(pair, lane, level)}")
                run, total, said = None, level * settings.max_new_tokens, clock()
                try:
                    for run in decode_level(pair, prompts, lane, level, costs.for_drafter(lane.drafter), stop, clock):
                        if isinstance(run, int) and clock() - said >= PROGRESS_EVERY_S:
                            said = clock()
                            yield ConcurrencyNews("progress", f"{where}: {run}/{total} tokens", lane=lane.name)
                except SpecvizError as exc:  # this lane cannot decode a batch (or this one): it says why, once
                    refused.add(lane.name)
                    yield ConcurrencyNews("note", first_line(exc), lane=lane.name)
                    continue
                same = tuple(list(t) == alone[p] for p, t in zip(run.prompts, run.tokens)) if alone else None
                yield ConcurrencyNews("run", lane=lane.name, run=run, same=None if run.stopped else same)
    yield ConcurrencyNews("end", "done")


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
