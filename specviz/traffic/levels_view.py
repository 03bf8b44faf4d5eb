"""What a concurrency sweep shows, pure Python: each lane's figures at each level (total throughput, each request's
own speed, τ, α, the speedup over plain decoding batched the same way), where a drafter stops paying (the crossover),
the theory's speedup beside the measured one, and the γ adaptive chose. A level is run `rounds` times; its figures are
the median round's, and each speedup carries its spread over the rounds (round i of a lane against round i of plain
decoding, which ran just before it): on a shared machine one round's ratio near 1× can land on either side, so a
verdict needs VERDICT_ROUNDS rounds.

The theory at a level of B rows: a step of γ drafts yields E(α, γ) tokens a row for γ·d + V(T) + b, where T = B·(1 + γ)
is the verify forward's tokens, against plain decoding's 1 token a row for V(B) + b; V, d and b are the seconds the
runs at that level measured, α the lane's acceptance with the fewest rows (rows decode independently, so concurrency
does not change α). Its crossover is the first level where that ratio falls below 1.

A level whose figures the physics forbids (analysis/physics.py: a speedup beyond τ, or plain decoding's step outside
what the other levels allow) is flagged as the machine's speed moving, and the verdicts leave it out. A lane below
plain at one level and above it at a larger one is mixed: it has no crossover to name.
"""

from dataclasses import dataclass, field
from statistics import median

from ..analysis.physics import MOVED, forbidden_words, moved_batches, speedup_forbidden
from ..analysis.theory import expected_tokens_per_step
from ..events import PLAIN
from .results import LevelRun, News
from .traffic_plan import requests

VERDICT_ROUNDS = 3  # rounds a verdict needs: fewer, and the screen and the CLI say the figures may flip


@dataclass(frozen=True)
class Figures:
    throughput: float  # every row's new tokens per second of decoding
    latency: float  # the median request's own tokens per second
    tau: float
    alpha: float | None
    speedup: float | None  # throughput over plain decoding's at the same level
    predicted: float | None  # the theory's speedup (fixed γ lanes)
    gamma: float | None  # mean γ of the batch's steps (0: plain steps)
    identical: bool | None  # every row wrote what its prompt writes alone (greedy; None: not compared)
    rounds: int = 1  # the runs the figures are the median of
    spread: tuple[float, float] | None = None  # the speedup's lowest and highest over the rounds
    moved: str = ""  # why the physics forbids these figures (the machine's speed moved); "": they stand


@dataclass
class ConcurrencyView:
    levels: tuple[int, ...]
    lanes: tuple[str, ...]  # plain first
    words: dict = field(default_factory=dict)  # lane -> how it drafts, in words
    fixed: dict = field(default_factory=dict)  # lane -> its fixed γ (None: adaptive, or plain)
    notes: dict = field(default_factory=dict)  # lane -> why it cannot decode concurrent requests
    runs: dict = field(default_factory=dict)  # (lane, level) -> [LevelRun, ...] (rounds)
    identical: dict = field(default_factory=dict)  # (lane, level) -> [bool, ...] per row of its last round
    order: list = field(default_factory=list)  # (run, each row's identity or None) in the order they ran
    greedy: bool = True
    message: str = ""
    said: int = (
        0  # lines heard that say what the concurrency sweep does next (not how far a level got): each is worth showing
    )
    finished: bool = False
    stopped: bool = False
    exact: str = ""  # whether the target ran in exact mode, in one line
    saved: object = None  # the finished concurrency sweep as a ConcurrencyRecord (traffic_record.py), for its downloads
    advice: list = field(default_factory=list)  # vLLM's draft length per level as measured (vllm_advice.py)

    def hear(self, news: News) -> None:
        """What the run did next (runner.run, or a device call passing it on)."""
        if news.kind == "run":
            self.add(news.run, news.same)
        elif news.kind == "note":
            self.notes[news.lane] = news.text
        else:
            self.message = news.text
            self.said += news.kind != "progress"
        if news.kind == "end":
            self.finished = True
            self.stopped = news.stopped

    def add(self, run: LevelRun, identical: list[bool] | None = None) -> None:
        self.runs.setdefault((run.lane, run.rows), []).append(run)
        self.order.append((run, None if identical is None else tuple(identical)))
        if identical is not None:
            self.identical[run.lane, run.rows] = list(identical)

    def typical(self, lane: str, level: int) -> LevelRun | None:
        """The median round by throughput (the lower middle of an even count)."""
        runs = sorted(self.runs.get((lane, level), ()), key=lambda r: r.throughput)
        return runs[(len(runs) - 1) // 2] if runs else None

    def figures(self, lane: str, level: int) -> Figures | None:
        run = self.typical(lane, level)
        plain = self.typical(PLAIN, level)
        if run is None:
            return None
        steps = [s for s in run.steps if s.rows]
        same = self.identical.get((lane, level))
        speedup = None if plain is None or lane == PLAIN else run.throughput / plain.throughput
        return Figures(
            throughput=run.throughput,
            latency=median(run.row_speeds),
            tau=run.tau,
            alpha=run.alpha,
            speedup=speedup,
            predicted=self.predicted(lane, level),
            gamma=sum(s.gamma for s in steps) / len(steps) if steps and lane != PLAIN else None,
            identical=None if same is None else all(same),
            rounds=len(self.runs[lane, level]),
            spread=self.spread(lane, level),
            moved=self.moved(level, speedup, run.tau),
        )

    def moved(self, level: int, speedup: float | None, tau: float) -> str:
        """Why the physics forbids a lane's figures at `level` ("" when it allows them)."""
        if level in self.moved_levels():
            return f"{MOVED}: plain decoding's step at {requests(level)} is outside what the other levels allow"
        return forbidden_words(speedup, tau) if speedup_forbidden(speedup, tau) else ""

    def moved_levels(self) -> set[int]:
        """The levels whose plain step (the median round's mean) the other levels' forbid."""
        seconds = {}
        for level in self.levels:
            plain = self.typical(PLAIN, level)
            if plain is not None and plain.steps:
                seconds[level] = sum(s.step_s for s in plain.steps) / len(plain.steps)
        return moved_batches(seconds)

    def steady(self, lane: str, theory: bool = False) -> list[tuple[int, float]]:
        """(level, speedup) where the lane ran and the physics allows it, in level order (`theory`: the theory's)."""
        out = []
        for level in self.levels:
            f = self.figures(lane, level)
            value = None if f is None else f.predicted if theory else f.speedup
            if value is not None and not f.moved:
                out.append((level, value))
        return out

    def mixed(self, lane: str, theory: bool = False) -> bool:
        """Whether the lane is below plain at one level and above it at a larger one."""
        steady = self.steady(lane, theory)
        return any(s < 1 <= later for i, (_, s) in enumerate(steady) for _, later in steady[i + 1 :])

    def speedups(self, lane: str, level: int) -> list[float]:
        """The lane's speedup in each round: its round i against plain decoding's round i at the level, which ran just
        before it (so a drift of the machine reaches both)."""
        if lane == PLAIN:
            return []
        pairs = zip(self.runs.get((lane, level), ()), self.runs.get((PLAIN, level), ()))
        return [run.throughput / plain.throughput for run, plain in pairs]

    def spread(self, lane: str, level: int) -> tuple[float, float] | None:
        """The lowest and the highest of the lane's speedups over the rounds; None for plain or before a pair ran."""
        values = self.speedups(lane, level)
        return (min(values), max(values)) if values else None

    def fewest_rounds(self) -> int:
        """The fewest rounds any lane ran at a level it reached (0 before any run): what every verdict rests on."""
        return min((len(runs) for runs in self.runs.values()), default=0)

    def predicted(self, lane: str, level: int) -> float | None:
        """The theory's speedup at `level` for a lane at a fixed γ (module docstring)."""
        gamma = self.fixed.get(lane)
        run = self.typical(lane, level)
        plain = self.typical(PLAIN, level)
        alpha = next((self.typical(lane, lv).alpha for lv in self.levels if self.typical(lane, lv)), None)
        if not gamma or run is None or plain is None or alpha is None:
            return None
        drafting = [s for s in run.steps if s.drafted]
        if not drafting or not plain.steps:
            return None
        spec_s = sum(s.step_s for s in drafting) / len(drafting)  # γ·d + V(B·(1 + γ)) + b, as measured
        plain_s = sum(s.step_s for s in plain.steps) / len(plain.steps)  # V(B) + b
        return expected_tokens_per_step(alpha, gamma) * plain_s / spec_s

    def crossover(self, lane: str, theory: bool = False) -> int | None:
        """The first level where the lane's speedup (or the theory's) falls below 1 and stays there, among the levels
        the physics allows; None: it pays at every such level, or it is mixed (see mixed)."""
        if self.mixed(lane, theory):
            return None
        return next((level for level, value in self.steady(lane, theory) if value < 1), None)

    def rows(self) -> list[dict]:
        """The table: one row per lane and level run."""
        out = []
        for lane in self.lanes:
            for level in self.levels:
                f = self.figures(lane, level)
                if f is not None:
                    out.append({"lane": lane, "level": level, **f.__dict__})
        return out

    def to_json(self, prompts: list[str] | None = None) -> dict:
        """Per level and lane, the figures, the γ adaptive chose at each step, and per row its prompt, its tokens and
        whether they equal that prompt decoded alone."""
        levels = []
        for level in self.levels:
            lanes = {}
            for lane in self.lanes:
                run = self.typical(lane, level)
                f = self.figures(lane, level)
                if run is None:
                    continue
                same = self.identical.get((lane, level), [None] * run.rows)
                lanes[lane] = {
                    **f.__dict__,
                    "rounds": [r.throughput for r in self.runs[lane, level]],
                    "gammas": [s.gamma for s in run.steps],
                    "rows": [
                        {
                            "prompt": prompts[p] if prompts else p,
                            "token_ids": list(tokens),
                            "identical": same[r],
                            "tokens_per_s": speed,
                        }
                        for r, (p, tokens, speed) in enumerate(zip(run.prompts, run.tokens, run.row_speeds))
                    ],
                }
            levels.append({"level": level, "lanes": lanes})
        crossover = {lane: self.crossover(lane) for lane in self.lanes if lane != PLAIN}
        mixed = [lane for lane in self.lanes if lane != PLAIN and self.mixed(lane)]
        predicted = {lane: self.crossover(lane, theory=True) for lane in self.lanes if lane != PLAIN}
        return {
            "levels": levels,
            "lanes": {
                lane: {"words": self.words.get(lane, ""), "fixed_gamma": self.fixed.get(lane)} for lane in self.lanes
            },
            "not_concurrent": dict(self.notes),  # lane -> why it cannot decode concurrent requests
            "crossover": crossover,
            "predicted_crossover": predicted,
            "mixed": mixed,  # lanes below plain at one level and above it at a larger one: no crossover
            "moved_levels": sorted(self.moved_levels()),  # levels whose plain step the others forbid
            "fewest_rounds": self.fewest_rounds(),  # what every verdict rests on (per lane, "rounds" lists each)
            "verdict_rounds": VERDICT_ROUNDS,
            "greedy": self.greedy,
            "stopped": self.stopped,
        }
