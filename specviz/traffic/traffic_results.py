"""What a traffic run leaves, pure Python: per request its prompt, tokens and timing, per batch step what it cost
and yielded, each prefill's seconds; and what the runner sends as it goes. Plain data throughout, so it crosses a
worker's pipe and is written to a record."""

from dataclasses import asdict, dataclass

from .. import reading as read
from ..concurrency.sweep_results import BatchStep
from .latency import RateFigures, RequestTiming
from .traffic_plan import Slo


@dataclass(frozen=True)
class Prefill:
    """The prompts read together at one step boundary: their tokens, how many, and the seconds it took."""

    tokens: int
    prompts: int
    seconds: float


@dataclass(frozen=True)
class TrafficRun:
    """One lane served one arrival schedule once."""

    lane: str
    rate: float  # requests per second offered (0.0: a recorded trace's own times)
    turn: int  # which round, from 0
    max_rows: int
    timings: tuple[RequestTiming, ...]  # per request, in arrival order of the schedule
    tokens: tuple[tuple[int, ...], ...]  # what each request wrote
    steps: tuple[BatchStep, ...]
    prefills: tuple[Prefill, ...]
    stopped: bool = False

    def figures(self, slo: Slo) -> RateFigures:
        return RateFigures.of(self.rate, list(self.timings), slo)

    def to_json(self) -> dict:
        return {
            "lane": self.lane,
            "rate": self.rate,
            "round": self.turn,
            "max_rows": self.max_rows,
            "stopped": self.stopped,
            "requests": [{**t.to_json(), "token_ids": list(ids)} for t, ids in zip(self.timings, self.tokens)],
            "steps": [asdict(s) for s in self.steps],
            "prefills": [asdict(p) for p in self.prefills],
        }

    @staticmethod
    def from_json(data, what: str = "run") -> "TrafficRun":
        """A run as to_json wrote it, every field checked (ValueError naming the field)."""
        data = read.mapping(data, what)
        timings, tokens = [], []
        for i, item in enumerate(read.listed(data["requests"], f"{what}.requests")):
            at = f"{what}.requests[{i}]"
            item = read.mapping(item, at)
            times = {f: read.number(item[f], f"{at}.{f}") for f in ("arrival", "admitted", "first_token", "last_token")}
            timings.append(
                RequestTiming(
                    prompt=read.integer(item["prompt"], f"{at}.prompt"),
                    tokens=read.integer(item["tokens"], f"{at}.tokens", 1),
                    **times,
                )
            )
            tokens.append(read.each(read.integer, item["token_ids"], f"{at}.token_ids"))
        prefills = []
        for i, item in enumerate(read.listed(data["prefills"], f"{what}.prefills")):
            item, at = read.mapping(item, f"{what}.prefills[{i}]"), f"{what}.prefills[{i}]"
            prefills.append(Prefill(*(read.integer(item[f], f"{at}.{f}") for f in ("tokens", "prompts")),
                                    read.number(item["seconds"], f"{at}.seconds")))  # fmt: skip
        listed = read.listed(data["steps"], f"{what}.steps")
        steps = tuple(BatchStep.from_json(step, f"{what}.steps[{i}]") for i, step in enumerate(listed))
        return TrafficRun(
            lane=read.text(data["lane"], f"{what}.lane"),
            rate=read.number(data["rate"], f"{what}.rate"),
            turn=read.integer(data["round"], f"{what}.round"),
            max_rows=read.integer(data["max_rows"], f"{what}.max_rows", 1),
            timings=tuple(timings),
            tokens=tuple(tokens),
            steps=steps,
            prefills=tuple(prefills),
            stopped=read.flag(data.get("stopped", False), f"{what}.stopped"),
        )


@dataclass(frozen=True)
class TrafficNews:
    """What the runner sends: "message" (what starts now), "progress" (tokens so far), "note" (a lane that cannot
    run, once), "run" (a TrafficRun, with `same`: per request whether it wrote its prompt's tokens alone; None where
    sampled), "end"."""

    kind: str
    text: str = ""
    lane: str | None = None
    run: TrafficRun | None = None
    same: tuple[bool, ...] | None = None
