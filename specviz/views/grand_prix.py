"""The Grand Prix: plain decoding and any number of drafters race on one prompt and one device, each lane timed by its
own clock. The rule is the duel's (race.interleave): the unfinished lane whose own clock is furthest behind runs its
next step, so at every moment each lane shows what it had written by the same own-clock time, and the live picture
moves at about 1/N of real time for N lanes. A recorded Grand Prix replays on the lanes' own clocks, which is the
race as each lane really ran it. Pure Python: lanes are lists of StepEvents.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from ..events import PLAIN, StepEvent, summarize
from ..serving.handoff import recorded as recorded_handoffs
from ..settings import Settings
from ..trace import Divergence, Trace
from .race import Lane

KIND = "grand prix"  # a trace's kind (a duel is "race"; "comparison" is what earlier versions recorded)


@dataclass
class RaceLane(Lane):
    """One lane: plain decoding, or a drafter with its settings (the same drafter may race at several γ)."""

    drafter: str = PLAIN  # the drafter's kind name
    words: str = ""  # how it drafts and verifies, with its γ
    note: str = ""  # why it did not run ("not available: ...", "failed: ...")
    divergence: Divergence | None = None  # greedy: where it first parted from plain decoding
    gamma: int = 0  # its draft length (adaptive: the most it drafts); 0 for plain decoding
    adaptive: bool = False
    runtime: str = ""  # what computed it, where a race compares runtimes ("": the race's own, plain decoding's)

    @property
    def runs(self) -> bool:
        return not self.note


@dataclass(frozen=True)
class CompareRow:
    name: str
    tokens_per_s: float | None
    speedup: float | None
    alpha: float | None
    tau: float | None
    target_forwards: int | None
    identical: bool | None  # greedy runs only
    note: str
    by_position: tuple[float | None, ...] = ()  # α_k, k = 1, 2, ...
    place: int | None = None


@dataclass(kw_only=True)
class GrandPrixView:
    """Every lane of a Grand Prix (plain decoding first) and the order in which they took their turns; the backend
    updates one view in place and yields it after each step."""

    lanes: list[RaceLane]
    greedy: bool
    max_new_tokens: int
    text_of: Callable[[int], str] = str
    turns: list[int] = field(default_factory=list)  # the lane index of every step, in the order the steps ran
    message: str = ""
    finished: bool = False
    stopped: bool = False
    recorded: bool = False  # a replay of a recorded Grand Prix, on the lanes' own clocks
    wall_s: float = 0.0
    lossy: bool = False
    exact: str = ""
    trace: Trace | None = None
    production: tuple = ()  # each lane's settings in other engines (serving/handoff.Handoff)
    runtime: str = ""  # what computed the race's own lanes (its plain decoding's)
    curves: dict = field(default_factory=dict)  # runtime -> V(k)/V(1) measured before the race, where it compares

    @property
    def plain(self) -> RaceLane:
        return self.lanes[0]

    @property
    def drafted(self) -> list[RaceLane]:
        return self.lanes[1:]

    def plain_of(self, lane: RaceLane) -> RaceLane:
        """The plain decoding a lane is measured against: its own runtime's (a race comparing runtimes has one plain
        lane per runtime), else the race's."""
        return next((o for o in self.lanes if o.drafter == PLAIN and o.runtime == lane.runtime), self.plain)

    def lane(self, name: str) -> RaceLane:
        return next(lane for lane in self.lanes if lane.name == name)

    def take(self, index: int, event: StepEvent) -> None:
        """Lane `index` ran one step."""
        self.lanes[index].add(event)
        self.turns.append(index)

    def hear(self, news) -> None:
        """One piece of news from the lanes, by lane name (workload/lanes.LaneNews, or a device packet with the same
        fields): a step, a lane that failed (it leaves the race with its reason), or where a lane parted from plain."""
        index = next(i for i, lane in enumerate(self.lanes) if lane.name == news.lane)
        lane = self.lanes[index]
        if news.kind == "step":
            self.take(index, news.event)
        elif news.kind == "failed":
            lane.note = news.message
            lane.done = True
        elif news.kind == "parted":
            lane.divergence = news.divergence

    def record(self) -> dict:
        """What a trace keeps beside the lanes' sides: each lane's drafter and settings, and the turn order."""
        keys = ("name", "drafter", "words", "note", "gamma", "adaptive")
        lanes = [
            {k: getattr(lane, k) for k in keys} | ({"runtime": lane.runtime} if lane.runtime else {})
            for lane in self.lanes
        ]
        return {"lanes": lanes, "turns": list(self.turns)}

    def summary(self) -> dict:
        """The race in numbers, as the API and `specviz race --json` give it: every lane's metrics, tokens, own
        clock, place and (greedy) whether it equals plain decoding's output, and the turn order."""
        return {
            "kind": KIND,
            "finished": self.finished,
            "stopped": self.stopped,
            "wall_s": round(self.wall_s, 4),
            "greedy": self.greedy,
            "lossy": self.lossy,
            "exact": self.exact,
            "max_new_tokens": self.max_new_tokens,
            "lanes": [
                {
                    "name": lane.name,
                    "drafter": lane.drafter,
                    "words": lane.words,
                    "gamma": lane.gamma,
                    "adaptive": lane.adaptive,
                    "runtime": lane.runtime,
                    "note": lane.note,
                    "done": lane.done,
                    "place": self.place(lane),
                    "clock_s": round(lane.clock_s, 4),
                    "speedup": self.speedup(lane),
                    "identical": self.identical(lane) if self.finished else None,
                    "metrics": summarize(lane.events).to_json(),
                    "tokens": lane.tokens,
                }
                for lane in self.lanes
            ],
            "turns": list(self.turns),
        }

    def running(self) -> list[RaceLane]:
        return [lane for lane in self.lanes if lane.runs and not lane.done]

    def place(self, lane: RaceLane) -> int | None:
        """Its finishing place by own clock, once settled: a finished lane whose time no lane still running can beat
        (every running lane's clock is already past it). None while it runs, or could still be overtaken."""
        if not lane.done or not lane.runs or not lane.events:
            return None
        if not self.finished and any(other.clock_s < lane.clock_s for other in self.running()):
            return None
        ended = [o for o in self.lanes if o.done and o.runs and o.events]
        return 1 + sum(o.clock_s < lane.clock_s for o in ended)

    def speedup(self, lane: RaceLane) -> float | None:
        base = summarize(self.plain_of(lane).events)
        own = summarize(lane.events)
        if not base.tokens_per_s or not own.new_tokens:
            return None
        return own.tokens_per_s / base.tokens_per_s

    def identical(self, lane: RaceLane) -> bool | None:
        """Greedy, once the race is over: did the lane write plain decoding's tokens (as far as both got)? Its
        divergence comes from the target (where they part, with its top two there)."""
        if not self.greedy or not lane.events or not lane.runs:
            return None
        if lane is self.plain_of(lane):
            return True
        return lane.divergence is None if self.finished else None

    def agrees_so_far(self, lane: RaceLane) -> bool | None:
        """Greedy, live: has the lane written plain decoding's tokens so far, over what both have written?"""
        if not self.greedy or not lane.events or lane is self.plain_of(lane):
            return None
        return all(a == b for a, b in zip(lane.tokens, self.plain_of(lane).tokens))

    def rows(self) -> list[CompareRow]:
        """The table the race leaves behind: one row per lane, plain first; each lane's speedup over its own
        runtime's plain decoding."""
        rows = []
        for lane in self.lanes:
            if not lane.events:
                rows.append(CompareRow(lane.name, None, None, None, None, None, None, lane.note or "waiting"))
                continue
            own_plain = self.plain_of(lane)
            base = summarize(own_plain.events) if own_plain.events else None
            m = summarize(lane.events)
            rows.append(
                CompareRow(
                    lane.name,
                    m.tokens_per_s,
                    m.tokens_per_s / base.tokens_per_s if base and base.tokens_per_s else None,
                    m.acceptance_rate,
                    m.mean_tokens_per_step,
                    m.target_forwards,
                    self.identical(lane),
                    lane.note,
                    tuple(m.acceptance_by_position),
                    self.place(lane),
                )
            )
        return rows


def starting_grid(lanes: list[RaceLane], settings: Settings, **more) -> GrandPrixView:
    """A Grand Prix before its first step: plain decoding's lane, then `lanes`, raced at `settings` (γ aside)."""
    return GrandPrixView(
        lanes=[RaceLane(PLAIN, words="plain decoding: one target forward per token"), *lanes],
        greedy=settings.greedy,
        max_new_tokens=settings.max_new_tokens,
        lossy=settings.lossy,
        **more,
    )


def turns_keep_the_rule(lanes: list[list[StepEvent]], turns: list[int]) -> list[str]:
    """Check a recorded turn order against the rule: no lane ran a step while another unfinished lane's own clock
    was behind its own. Returns a line per breach (none: the rule held)."""
    clocks = [0.0] * len(lanes)
    taken = [0] * len(lanes)
    breaches = []
    for n, i in enumerate(turns):
        unfinished = [j for j in range(len(lanes)) if taken[j] < len(lanes[j])]
        behind = [j for j in unfinished if clocks[j] < clocks[i] - 1e-12]
        if behind:
            j = behind[0]
            breaches.append(f"turn {n}: lane {i} ran at {clocks[i]:.4f} s while lane {j} was at {clocks[j]:.4f} s")
        event = lanes[i][taken[i]]
        clocks[i] += event.prefill_s + event.step_s
        taken[i] += 1
    return breaches


def from_trace(trace: Trace) -> GrandPrixView:
    """A recorded Grand Prix (or a comparison of an earlier version), finished, as the screen shows it."""
    asked = {lane["name"]: lane for lane in trace.extra.get("lanes", [])}
    lanes = []
    for side in trace.sides:
        about = asked.get(side.name, {})
        lane = RaceLane(
            side.name,
            drafter=str(about.get("drafter", side.name)),
            words=side.words,
            note=str(about.get("note", "")),
            divergence=side.divergence,
            gamma=int(about.get("gamma", 0)),
            adaptive=bool(about.get("adaptive", False)),
            runtime=str(about.get("runtime", "")),
        )
        for event in side.events:
            lane.add(event)
        lane.done = True
        lanes.append(lane)
    return GrandPrixView(
        lanes=lanes,
        greedy=trace.greedy,
        max_new_tokens=int(trace.settings.get("max_new_tokens", 0)),
        text_of=trace.text_of,
        turns=list(trace.extra.get("turns", [])),
        message="recorded",
        finished=True,
        stopped=trace.stopped,
        recorded=True,
        wall_s=trace.wall_s,
        lossy=trace.lossy,
        exact=trace.models.exact,
        trace=trace,
        production=recorded_handoffs(trace.extra),
        runtime=trace.models.runtime,
        curves=_curves(trace.extra.get("runtime_curves")),
    )


def _curves(found) -> dict:
    """The runtime curves a trace recorded ({runtime: {k: V(k)/V(1)}}), leniently: what is not one is left out."""
    if not isinstance(found, dict):
        return {}
    out = {}
    for runtime, curve in found.items():
        if isinstance(curve, dict):
            try:
                out[str(runtime)] = {int(k): float(v) for k, v in curve.items()}
            except (TypeError, ValueError):
                continue
    return out


def replay_grand_prix(
    trace: Trace,
    speed: float = 1.0,
    stopped: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[GrandPrixView]:
    """A recorded Grand Prix on the lanes' own clocks: every lane moves as it did when it had the device, all at once,
    at `speed` times real pace (the live race moved at about 1/N of it). The last view is final."""
    done = from_trace(trace)
    view = GrandPrixView(
        lanes=[replace(lane, events=[], clock_s=0.0, done=not lane.runs, divergence=None) for lane in done.lanes],
        greedy=done.greedy,
        max_new_tokens=done.max_new_tokens,
        text_of=trace.text_of,
        message=f"recorded {trace.created[:16]}, replayed on the lanes' own clocks at {speed:g}×",
        recorded=True,
        lossy=done.lossy,
        exact=done.exact,
        trace=trace,
        runtime=done.runtime,
        curves=done.curves,
    )
    timeline = []  # (own-clock time at which the step ended, lane index, event)
    for i, lane in enumerate(done.lanes):
        clock = 0.0
        for event in lane.events:
            clock += event.prefill_s + event.step_s
            timeline.append((clock, i, event))
    at = 0.0
    for clock, i, event in sorted(timeline, key=lambda t: (t[0], t[1])):
        if stopped():
            break
        if clock > at:
            sleep((clock - at) / speed)
            view.wall_s += (clock - at) / speed
            at = clock
        view.take(i, event)
        yield view
    view.stopped = trace.stopped or stopped()
    for lane, recorded in zip(view.lanes, done.lanes):
        lane.divergence = recorded.divergence if len(lane.events) == len(recorded.events) else None
        lane.done = lane.done or not lane.runs
    view.finished = True
    yield view
