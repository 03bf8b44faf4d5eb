"""A workload's results as they come in: every prompt decoded once plainly and once by each chosen drafter, each
drafter's totals over the prompts finished so far, and an estimate of what is left from the speeds measured so far.
The app's table, its progress bar, the report and the CLI all read this one view. Pure Python."""

from collections.abc import Callable
from dataclasses import dataclass, field

from ..events import PLAIN, StepEvent, acceptance_rates, generated_ids, position_counts, summarize
from ..trace import Divergence, RunModels


@dataclass
class Cell:
    """One prompt decoded by one side (plain decoding or a drafter)."""

    events: list[StepEvent] = field(default_factory=list)
    divergence: Divergence | None = None  # greedy: where it first parted from plain decoding
    note: str = ""  # why it has no result ("failed: ...")
    wall_s: float = 0.0  # measured from outside: device calls, prefill and all
    done: bool = False
    node: str = ""  # on a cluster: the machine and actor that ran it (its timings are that node's clock)
    retried: bool = False  # on a cluster: its first actor died before it finished, and another ran it again

    @property
    def tokens(self) -> list[int]:
        return generated_ids(self.events)


@dataclass(frozen=True)
class Contender:
    """A drafter put to the workload: its name, how it runs (the race's mode line) and why not, if it cannot."""

    name: str
    words: str
    note: str = ""  # "not available: ..." (it is shown, never run)


@dataclass(frozen=True)
class WorkloadRow:
    """One side's totals over the prompts it and plain decoding both finished."""

    name: str
    words: str
    prompts: int  # prompts counted
    tokens: int
    tokens_per_s: float | None
    speedup: float | None  # its tokens/s over plain decoding's, on the same prompts
    alpha: float | None
    tau: float | None
    identical: int | None  # greedy: how many of its outputs equal plain decoding's token for token; None: sampled
    by_position: tuple[float | None, ...] = ()  # α_k, k = 1, 2, ...
    note: str = ""


@dataclass(kw_only=True)
class WorkloadView:
    prompts: list[str]
    contenders: list[Contender]
    greedy: bool
    setting: str  # how γ was chosen, in words ("each drafter's measured best" or "γ = 5, fixed")
    max_new_tokens: int
    cells: dict[tuple[int, str], Cell] = field(default_factory=dict)  # (prompt index, side name) -> its run
    text_of: Callable[[int], str] = str
    models: RunModels = field(default_factory=RunModels)
    running: tuple[int, str] | None = None
    message: str = ""
    finished: bool = False
    stopped: bool = False
    wall_s: float = 0.0
    production: tuple = ()  # each drafter's settings elsewhere (serving/handoff.Handoff)

    def end(self, stopped: bool, wall_s: float) -> None:
        """The run is over (every prompt run, or stopped): what finished is kept."""
        self.running = None
        self.finished = True
        self.stopped = stopped
        self.wall_s = wall_s
        self.message = "stopped: the runs that finished are kept" if stopped else "done"

    @property
    def sides(self) -> list[str]:
        """Plain decoding, then every drafter that can run, in the order they run on each prompt."""
        return [PLAIN, *(c.name for c in self.contenders if not c.note)]

    def cell(self, prompt: int, side: str) -> Cell:
        return self.cells.setdefault((prompt, side), Cell())

    def finished_cell(self, prompt: int, side: str) -> Cell | None:
        found = self.cells.get((prompt, side))
        return found if found is not None and found.done and not found.note else None

    def progress(self) -> float:
        """The share of (prompt, side) runs done."""
        total = len(self.prompts) * len(self.sides)
        return sum(c.done for c in self.cells.values()) / total if total else 1.0

    def rows(self) -> list[WorkloadRow]:
        """Plain decoding's totals, then each drafter's, counted over the prompts both finished."""
        return [self._row(PLAIN, "", "")] + [self._row(c.name, c.words, c.note) for c in self.contenders]

    def _row(self, name: str, words: str, note: str) -> WorkloadRow:
        both = [i for i in range(len(self.prompts)) if self.finished_cell(i, PLAIN) and self.finished_cell(i, name)]
        failed = [c.note for (i, side), c in self.cells.items() if side == name and c.note]
        note = note or (failed[0] if failed else "")
        if not both:
            return WorkloadRow(name, words, 0, 0, None, None, None, None, None, (), note or "waiting")
        mine = [e for i in both for e in self.cells[i, name].events]
        plain = summarize(e for i in both for e in self.cells[i, PLAIN].events)
        m = summarize(mine)
        identical = sum(self.cells[i, name].divergence is None for i in both) if self.greedy else None
        return WorkloadRow(
            name,
            words,
            len(both),
            m.new_tokens,
            m.tokens_per_s,
            m.tokens_per_s / plain.tokens_per_s if plain.tokens_per_s else None,
            m.acceptance_rate,
            m.mean_tokens_per_step,
            identical,
            tuple(acceptance_rates(position_counts(mine))),
            note,
        )

    def placements(self) -> dict[str, tuple[list[int], float]]:
        """On a cluster: each actor's prompts (0-based) and the seconds its runs took on its own clock; {} when the
        workload ran here."""
        shares: dict[str, tuple[list[int], float]] = {}
        for (i, _), c in sorted(self.cells.items()):
            if c.node:
                prompts, seconds = shares.get(c.node, ([], 0.0))
                shares[c.node] = (prompts if i in prompts else [*prompts, i], seconds + c.wall_s)
        return shares

    def retried(self) -> list[int]:
        """The prompts (0-based) whose first actor died before they finished, so that another ran them again."""
        return sorted({i for (i, _), c in self.cells.items() if c.retried})

    def speedup(self, prompt: int, side: str) -> float | None:
        """One prompt's speedup for one drafter (tokens/s over plain decoding's on that prompt)."""
        mine = self.finished_cell(prompt, side)
        plain = self.finished_cell(prompt, PLAIN)
        if not mine or not plain:
            return None
        a, b = summarize(mine.events).tokens_per_s, summarize(plain.events).tokens_per_s
        return a / b if b else None

    def seconds_left(self) -> float | None:
        """What is left, from measured speeds: each run still to do writes as many tokens as plain decoding wrote on
        its prompt (the mean so far where plain has not run yet), at the tokens per wall second its side has shown
        (plain decoding's where that side has not finished a prompt yet). None until plain decoding finished one."""
        plain_done = [self.finished_cell(i, PLAIN) for i in range(len(self.prompts))]
        lengths = [len(c.tokens) for c in plain_done if c]
        if not lengths:
            return None
        typical = sum(lengths) / len(lengths)
        rates = {side: self._rate(side) for side in self.sides}
        fallback = rates[PLAIN]
        if not fallback:
            return None
        left = 0.0
        for i in range(len(self.prompts)):
            for side in self.sides:
                found = self.cells.get((i, side))
                if found is not None and found.done:
                    continue
                tokens = len(plain_done[i].tokens) if plain_done[i] else typical
                tokens -= len(found.tokens) if found is not None else 0
                left += max(tokens, 0) / (rates[side] or fallback)
        return left

    def _rate(self, side: str) -> float | None:
        done = [c for (_, s), c in self.cells.items() if s == side and c.done and not c.note and c.wall_s > 0]
        seconds = sum(c.wall_s for c in done)
        return sum(len(c.tokens) for c in done) / seconds if seconds else None


def duration(seconds: float) -> str:
    """Seconds in words a reader takes in at a glance: "42 s", "3 min 05 s", "1 h 20 min"."""
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
