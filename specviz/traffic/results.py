"""What a run under load leaves, pure Python: per batch step what it cost and yielded, each prefill's seconds; per
concurrency level each row's tokens and seconds (LevelRun), per request rate each request's prompt, tokens and timing
(TrafficRun); and the news a run sends as it goes. Plain data throughout, so it crosses a GPU worker's pipe and is
written to and read from a record (traffic_record.py)."""

from dataclasses import MISSING, asdict, dataclass, fields

from .. import reading as read
from .latency import RateFigures, RequestTiming
from .traffic_plan import Slo, requests


@dataclass(frozen=True)
class BatchStep:
    """One step of the whole batch: its rows, γ, the verify forward's tokens, its seconds and what it yielded."""

    rows: int
    gamma: int
    forward_tokens: int
    draft_s: float
    verify_s: float
    step_s: float
    drafted: int
    accepted: int
    new_tokens: int
    read_tokens: int = 0  # what the draft read of rows it caught up on before drafting (0 in older records)
    drafting: int = 0  # the rows that drafted (0 in older records, where every row drafted when γ > 0)

    @property
    def drafting_rows(self) -> int:
        return self.drafting or (self.rows if self.gamma else 0)

    @staticmethod
    def from_json(data, what: str) -> "BatchStep":
        """A step as asdict wrote it, every field checked (ValueError naming the field)."""
        data = read.mapping(data, what)
        values = {}
        for f in fields(BatchStep):
            if f.name not in data and f.default is not MISSING:
                continue
            reader = read.integer if f.type in (int, "int") else read.number
            values[f.name] = reader(data[f.name], f"{what}.{f.name}")
        return BatchStep(**values)


@dataclass(frozen=True)
class LevelRun:
    lane: str
    rows: int
    prompts: tuple[int, ...]  # row r decodes prompt prompts[r] of the concurrency sweep's list
    tokens: tuple[tuple[int, ...], ...]  # what each row wrote
    row_seconds: tuple[float, ...]  # each row's own decoding time: the steps it was part of
    steps: tuple[BatchStep, ...]
    prefill_s: float
    wall_s: float  # prefill and every step, all rows
    stopped: bool = False

    @property
    def decode_s(self) -> float:
        """The steps' own seconds: what the device spent decoding, not the time a caller took between two steps
        (a screen drawing the progress)."""
        return max(1e-9, sum(s.step_s for s in self.steps) if self.steps else self.wall_s - self.prefill_s)

    @property
    def new_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)

    @property
    def throughput(self) -> float:
        """Every row's new tokens over the decoding time: what the device serves."""
        return self.new_tokens / self.decode_s

    @property
    def row_speeds(self) -> tuple[float, ...]:
        """Each request's own tokens/s: its latency as its user sees it."""
        return tuple(len(t) / s if s > 0 else 0.0 for t, s in zip(self.tokens, self.row_seconds))

    @property
    def tau(self) -> float:
        """New tokens per row per target forward."""
        row_steps = sum(s.rows for s in self.steps)
        return self.new_tokens / row_steps if row_steps else 0.0

    @property
    def alpha(self) -> float | None:
        drafted = sum(s.drafted for s in self.steps)
        return sum(s.accepted for s in self.steps) / drafted if drafted else None

    @property
    def point(self) -> int:
        return self.rows

    @property
    def duration_s(self) -> float:
        return self.wall_s

    def words(self) -> str:
        return f"{self.lane}: {requests(self.rows)} at once"

    def written(self) -> list[tuple[int, tuple[int, ...]]]:
        """(prompt, tokens) of each row."""
        return list(zip(self.prompts, self.tokens))

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(data, what: str = "run") -> "LevelRun":
        """A run as to_json wrote it, every field checked (ValueError naming the field)."""
        data = read.mapping(data, what)
        steps = [
            BatchStep.from_json(s, f"{what}.steps[{i}]")
            for i, s in enumerate(read.listed(data["steps"], f"{what}.steps"))
        ]
        rows = read.integer(data["rows"], f"{what}.rows", 1)
        prompts = read.each(read.integer, data["prompts"], f"{what}.prompts")
        tokens = tuple(
            read.each(read.integer, row, f"{what}.tokens[{i}]")
            for i, row in enumerate(read.listed(data["tokens"], f"{what}.tokens"))
        )
        seconds = read.each(read.number, data["row_seconds"], f"{what}.row_seconds")
        if not len(prompts) == len(tokens) == len(seconds) == rows:
            raise ValueError(f"{what} has {rows} rows but not as many prompts, token rows and row seconds")
        return LevelRun(
            lane=read.text(data["lane"], f"{what}.lane"),
            rows=rows,
            prompts=prompts,
            tokens=tokens,
            row_seconds=seconds,
            steps=tuple(steps),
            prefill_s=read.number(data["prefill_s"], f"{what}.prefill_s"),
            wall_s=read.number(data["wall_s"], f"{what}.wall_s"),
            stopped=read.flag(data.get("stopped", False), f"{what}.stopped"),
        )


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

    @property
    def point(self) -> float:
        return self.rate

    @property
    def duration_s(self) -> float:
        """From the run's start to its last token."""
        return max((t.last_token for t in self.timings), default=0.0)

    def words(self) -> str:
        return f"{self.lane}: {len(self.timings)} requests at {self.rate:g}/s"

    def written(self) -> list[tuple[int, tuple[int, ...]]]:
        """(prompt, tokens) of each request served."""
        return [(t.prompt, ids) for t, ids in zip(self.timings, self.tokens)]

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
        timings = []
        tokens = []
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
            item = read.mapping(item, f"{what}.prefills[{i}]")
            at = f"{what}.prefills[{i}]"
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
class News:
    """What a run did next: says what runs now ("message") or how far the run under way got ("progress"), a lane that
    cannot decode a batch ("note", once), a run ("run": a LevelRun or a TrafficRun, with `same`, per request whether
    it wrote what its prompt writes alone; None where sampled), or that it ended ("end")."""

    kind: str  # "message" | "progress" | "note" | "run" | "end"
    text: str = ""
    lane: str = ""
    run: "LevelRun | TrafficRun | None" = None
    same: tuple[bool, ...] | None = None
    stopped: bool = False
