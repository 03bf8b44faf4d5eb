"""The honest race: plain and speculative decoding take turns on one device, each timed by its own clock.

At every turn the side whose own clock (prefill + its steps, nothing else) is behind runs one step, so the
two never run at the same instant, each side's speed is its own, and at any moment both sides show
what they had produced by the same own-clock time. Pure Python: the sides are iterators of StepEvents.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..events import StepEvent, generated_ids
from ..trace import Divergence, Trace

SPEC = "speculative"


@dataclass
class Lane:
    name: str
    events: list[StepEvent] = field(default_factory=list)
    clock_s: float = 0.0  # own time: prefill + steps
    done: bool = False

    @property
    def tokens(self) -> list[int]:
        return generated_ids(self.events)

    def add(self, event: StepEvent) -> None:
        """One more step: its time joins this side's own clock; a step that finished the run ends the lane."""
        self.events.append(event)
        self.clock_s += event.prefill_s + event.step_s
        self.done = event.finish is not None


@dataclass(kw_only=True)
class RaceView:
    """Everything the screen shows of a run; the backend updates one view in place and yields it after each step."""

    plain: Lane
    spec: Lane
    text_of: Callable[[int], str]
    greedy: bool
    message: str = ""
    finished: bool = False
    stopped: bool = False
    divergence: Divergence | None = None
    wall_s: float = 0.0
    mode: str = ""  # how the speculative side drafts and verifies (mode_text)
    lossy: bool = False  # typical acceptance while sampling: no distribution guarantee
    exact: str = ""  # whether the target ran in exact mode, in one line (trace.EXACT_ON when it did)
    trace: Trace | None = None  # the finished run, recorded
    production: tuple = ()  # the drafter's settings in other engines (serving/handoff.Handoff)
    precision: str = ""  # how the target's precision was chosen on this device, where it was measured
    runtime: str = ""  # which runtime computed it and why; after the run, its prediction against what the run measured

    def hear(self, packet) -> None:
        """One packet of the device call (app/device_calls.Packet): a step goes to its side, by the side's name."""
        if packet.kind == "step":
            {side.name: side for side in (self.plain, self.spec)}[packet.lane].add(packet.event)


def interleave(
    sides: dict[str, Iterator[StepEvent]], lanes: dict[str, Lane], stopped: Callable[[], bool] = lambda: False
) -> Iterator[str]:
    """Advance whichever unfinished lane has the smaller own clock by one step; yield that lane's name."""
    while not stopped():
        running = [name for name in sides if not lanes[name].done]
        if not running:
            return
        name = min(running, key=lambda n: lanes[n].clock_s)
        event = next(sides[name], None)
        if event is None:
            lanes[name].done = True
            continue
        lanes[name].add(event)
        yield name
