"""A concurrency sweep on loaded models: at every level, plain decoding batched and each lane, `rounds` times in turn
(so a drift of the machine reaches every lane alike), each greedy row checked against its prompt decoded alone.
The CLI's `concurrency` and the app's Under load tab run this; the view it updates after every run is pure
(load_view.py)."""

from collections.abc import Iterator

from ..engine import generate
from ..engine.load_gamma import ForwardCosts
from ..errors import InvalidRequest, SpecvizError, first_line
from ..events import PLAIN, generated_ids
from ..runs import Pair
from ..settings import Settings
from .levels import LoadLane, rows_of, run_level
from .load_view import LoadView

DEFAULT_LEVELS = (1, 2, 4, 8, 16, 32)


def check_levels(levels) -> tuple[int, ...]:
    """Levels as given (a comma-separated text or numbers), each a number of requests, ascending and distinct."""
    items = levels.split(",") if isinstance(levels, str) else list(levels)
    found = []
    for item in items:
        text = str(item).strip()
        if not (text.isascii() and text.lstrip("+").isdigit()):
            raise InvalidRequest(f"a concurrency level is a whole number of requests (1, 4, 16), got {item!r}")
        rows_of([[0]], int(text))  # the range, in one line
        found.append(int(text))
    if not found:
        raise InvalidRequest("no concurrency levels given (e.g. --levels 1,4,16)")
    return tuple(sorted(set(found)))


def sweep(
    pair: Pair,
    prompts: list[list[int]],
    settings: Settings,
    lanes: list[LoadLane],
    levels: tuple[int, ...],
    rounds: int = 1,
    stop=None,
    view: LoadView | None = None,
) -> Iterator[LoadView]:
    """Every level, plain and each lane, `rounds` times; the view after each run (and before it, saying what runs)."""
    view = view or LoadView(levels, (PLAIN, *(lane.name for lane in lanes)), greedy=settings.greedy)
    plain = LoadLane(PLAIN, "none", settings)
    costs = ForwardCosts()  # the target's forward seconds by tokens, shared by every run of the sweep
    alone = {}
    if settings.greedy:  # each prompt decoded alone: what every row of it must write
        for p in sorted(set(rows_of(prompts, max(levels)))):
            view.message = f"decoding prompt {p + 1} alone: the reference every row of it must equal"
            yield view
            alone[p] = generated_ids(generate(pair.target, prompts[p], settings, explain=False))
    for level in levels:
        for turn in range(rounds):
            for lane in [plain, *lanes]:
                if lane.name in view.notes:
                    continue
                if stop is not None and stop.is_set():
                    view.stopped = view.finished = True
                    view.message = "stopped: the levels run so far stay"
                    yield view
                    return
                view.message = f"{lane.name}: {level} request{'s' * (level > 1)} at once (round {turn + 1}/{rounds})"
                yield view
                try:
                    run = run_level(pair, prompts, lane, level, costs, stop)
                except SpecvizError as exc:  # this lane cannot decode a batch (or this one): it says why, once
                    view.notes[lane.name] = first_line(exc)
                    continue
                same = [list(t) == alone[p] for p, t in zip(run.prompts, run.tokens)] if alone else None
                view.add(run, None if run.stopped else same)
                yield view
    view.finished, view.message = True, "done"
    yield view
