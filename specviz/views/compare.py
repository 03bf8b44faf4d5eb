"""Every drafter on the same prompt and settings, after one plain run: what the comparison screen shows. Pure Python."""

from collections.abc import Callable
from dataclasses import dataclass, field

from ..events import PLAIN, StepEvent, generated_ids, summarize
from ..trace import Divergence, Trace


@dataclass
class Entry:
    name: str  # the drafter
    words: str  # how it drafts and verifies, as the race's mode line says it
    options: object
    events: list[StepEvent] = field(default_factory=list)
    divergence: Divergence | None = None
    note: str = ""  # why it did not run ("not available: ...", "failed: ...")

    @property
    def tokens(self) -> list[int]:
        return generated_ids(self.events)


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


@dataclass(kw_only=True)
class CompareView:
    entries: list[Entry]
    greedy: bool
    plain: list[StepEvent] = field(default_factory=list)
    text_of: Callable[[int], str] = str
    message: str = ""
    finished: bool = False
    stopped: bool = False
    wall_s: float = 0.0
    trace: Trace | None = None

    def progress(self) -> float:
        runnable = [e for e in self.entries if not e.note or e.events]
        return (bool(self.plain) + sum(bool(e.events) for e in runnable)) / (1 + len(runnable))

    def rows(self) -> list[CompareRow]:
        base = summarize(self.plain) if self.plain else None
        rows = (
            [
                CompareRow(
                    PLAIN, base.tokens_per_s, 1.0, None, 1.0, base.target_forwards, True if self.greedy else None, ""
                )
            ]
            if base
            else []
        )
        for e in self.entries:
            if not e.events:
                rows.append(CompareRow(e.name, None, None, None, None, None, None, e.note or "waiting"))
                continue
            m = summarize(e.events)
            speedup = m.tokens_per_s / base.tokens_per_s if base and base.tokens_per_s else None
            identical = (e.divergence is None) if self.greedy else None
            rows.append(
                CompareRow(
                    e.name,
                    m.tokens_per_s,
                    speedup,
                    m.acceptance_rate,
                    m.mean_tokens_per_step,
                    m.target_forwards,
                    identical,
                    e.note,
                    tuple(m.acceptance_by_position),
                )
            )
        return rows


def from_trace(trace: Trace) -> CompareView:
    """A recorded comparison, as the comparison screen shows it."""
    entries = [Entry(s.name, s.words, None, s.events, s.divergence) for s in trace.drafted]
    return CompareView(
        entries=entries,
        greedy=trace.greedy,
        plain=trace.plain.events,
        text_of=trace.text_of,
        message="recorded",
        finished=True,
        stopped=trace.stopped,
        wall_s=trace.wall_s,
        trace=trace,
    )
