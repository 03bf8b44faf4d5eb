"""A recorded race on screen again, at its recorded pace (or ¼× or 4× of it), with no model loaded. Pure Python."""

import time
from collections.abc import Callable, Iterator

from ..events import PLAIN
from ..serving.handoff import recorded
from ..trace import Trace
from .race import SPEC, Lane, RaceView, interleave

SPEEDS = {"¼×": 0.25, "1×": 1.0, "4×": 4.0}


def replay(
    trace: Trace,
    side: str | None = None,
    speed: float = 1.0,
    stopped: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[RaceView]:
    """Plain decoding against the side named `side` (default: the first drafter), turn by turn as in the live race;
    each step takes its recorded time divided by `speed`. The last view is final, with the recorded verdicts."""
    spec = trace.side(side) if side else (trace.spec or trace.plain)
    made = ", ".join(
        str(v)
        for v in (
            trace.models.pair,
            trace.models.precision,
            trace.models.device,
            trace.models.exact,
        )
        if v
    )
    view = RaceView(
        plain=Lane(PLAIN),
        spec=Lane(SPEC),
        text_of=trace.text_of,
        greedy=trace.greedy,
        message=f"recorded {trace.created[:16]}; {made}",
        mode=spec.words,
        lossy=trace.lossy,
        exact=trace.models.exact,
        trace=trace,
        production=recorded(trace.extra),
    )
    lanes = {PLAIN: view.plain, SPEC: view.spec}
    for name in interleave({PLAIN: iter(trace.plain.events), SPEC: iter(spec.events)}, lanes, stopped):
        event = lanes[name].events[-1]
        pause = (event.prefill_s + event.step_s) / speed
        sleep(pause)
        view.wall_s += pause
        yield view
    replayed = min(len(view.plain.tokens), len(view.spec.tokens))
    view.stopped = trace.stopped or stopped()
    if spec.divergence is not None and spec.divergence.position < replayed:
        view.divergence = spec.divergence
    view.finished = True
    yield view
