"""A Grand Prix's lanes run on loaded models: plain decoding and every drafter lane on one prompt, taking turns by the
race's rule (views/race.interleave), then, for a greedy race, where each lane parted from plain decoding. What the
app's device call and the CLI's `race` both run. A lane that fails is told once and leaves the race; the others go
on."""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..drafters.suffix_index import RunMemory
from ..errors import SpecvizError, first_line
from ..events import PLAIN, StepEvent
from ..record import TokenTexts
from ..runs import LaneRun, generate_named, parted
from ..runtimes.pair import Pair
from ..settings import Settings
from ..trace import Divergence
from ..views.race import Lane, interleave


@dataclass(frozen=True)
class LaneNews:
    """What happened next: a lane ran a step, failed, or (greedy, at the end) parted from plain decoding."""

    kind: str  # "step" | "failed" | "parted"
    lane: str
    event: StepEvent | None = None
    message: str = ""
    divergence: Divergence | None = None


def run_lanes(
    pair: Pair,
    prompt_ids: list[int],
    plain: Settings,
    lanes: list[LaneRun],
    memory: RunMemory | None = None,
    stopped: Callable[[], bool] = lambda: False,
    explain: bool = True,
    others: dict[str, Pair] | None = None,
) -> Iterator[LaneNews]:
    """Every lane's steps in the order they run; then, unless stopped, each greedy lane's divergence from plain (its
    own runtime's, where the race compares runtimes: `others`, the pair loaded on each other runtime, whose lanes
    name it). `explain`: each step's detail, for a race shown or recorded step by step."""
    others = others or {}
    failed = {}
    sides = {PLAIN: generate_named(pair.target, prompt_ids, plain, explain=explain)}
    for lane in lanes:
        own = memory.copy() if memory is not None and lane.remembers else None
        on = others.get(lane.runtime, pair)
        try:
            steps = generate_named(
                on.target, prompt_ids, lane.settings, lane.drafter, on.draft, lane.options, None, own, explain
            )
        except SpecvizError as exc:  # the drafter could not be built for this pair
            yield LaneNews("failed", lane.name, message=f"failed: {first_line(exc)}")
            continue
        sides[lane.name] = _guarded(steps, lane.name, failed)
    states = {name: Lane(name) for name in sides}
    told = set()
    for name in interleave(sides, states, stopped):
        for gone in failed.keys() - told:
            told.add(gone)
            yield LaneNews("failed", gone, message=failed[gone])
        yield LaneNews("step", name, event=states[name].events[-1])
    for gone in failed.keys() - told:
        yield LaneNews("failed", gone, message=failed[gone])
    if stopped() or not plain.greedy:
        return
    text_of = TokenTexts(pair.target.tokenizer)
    runtime_of = {lane.name: lane.runtime for lane in lanes}
    plains = {r: f"{PLAIN} · {r}" for r in others}  # each other runtime's own plain lane
    for name, state in states.items():
        runtime = runtime_of.get(name, "")
        base = states.get(plains.get(runtime, PLAIN), states[PLAIN])
        if state is base or name in failed:
            continue
        found = parted(others.get(runtime, pair).target, prompt_ids, base.tokens, state.tokens, plain, text_of)
        if found is not None:
            yield LaneNews("parted", name, divergence=found)


def _guarded(steps: Iterator[StepEvent], name: str, failed: dict[str, str]) -> Iterator[StepEvent]:
    """A lane's steps; a SpecvizError ends the lane alone, noted in `failed`."""
    try:
        yield from steps
    except SpecvizError as exc:
        failed[name] = f"failed: {first_line(exc)}"
