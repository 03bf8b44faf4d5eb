"""What one level of a concurrency sweep leaves, pure Python: each row's tokens and seconds, and per batch step what
it cost and yielded; and the news a sweep sends as it goes (a line saying what runs, a lane that cannot decode
concurrent requests, a level run). Plain data throughout, so it crosses a GPU worker's pipe and is written to and
read from a record (sweep_record.py)."""

from dataclasses import MISSING, asdict, dataclass, fields

from .. import reading as read


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
    prompts: tuple[int, ...]  # row r decodes prompt prompts[r] of the sweep's list
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
class ConcurrencyNews:
    """What a sweep did next: says what runs now ("message") or how far the level under way got ("progress"), a lane
    that cannot decode a batch ("note", once), a level run ("run", with whether each greedy row equals its prompt
    decoded alone), or that it ended ("end")."""

    kind: str  # "message" | "progress" | "note" | "run" | "end"
    message: str = ""
    lane: str = ""
    run: LevelRun | None = None
    same: tuple[bool, ...] | None = None
    stopped: bool = False
