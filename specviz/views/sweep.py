"""The γ sweep's results as the screen needs them: measured points per γ and the theory drawn over them.
Pure Python."""

from dataclasses import dataclass, field

from ..analysis.physics import speedup_forbidden
from ..analysis.theory import best_gamma, cost_ratio, drafts_blocks, expected_speedup, per_token_alpha
from ..events import StepEvent, summarize


@dataclass(frozen=True)
class SweepPoint:
    gamma: int
    acceptance_rate: float | None  # accepted / proposed, as the metrics strip shows it
    tokens_per_step: float
    tokens_per_s: float
    speedup: float  # over the plain run's tokens/s

    @property
    def moved(self) -> bool:
        """A speedup its τ forbids: the machine's speed moved between this run and the plain one."""
        return speedup_forbidden(self.speedup, self.tokens_per_step)


@dataclass(frozen=True)
class Theory:
    alpha: float  # per-token acceptance pooled over every γ (accepted / tested)
    c: float  # draft time per proposed token / target forward time, pooled (a block drafter: per pass)
    speedups: tuple[float, ...]  # expected speedup at each γ of the sweep
    best_gamma: int
    block: bool = False  # a block drafter: c is paid once per step, whatever γ


@dataclass
class SweepView:
    gammas: tuple[int, ...]
    plain: list[StepEvent] = field(default_factory=list)
    runs: dict[int, list[StepEvent]] = field(default_factory=dict)
    message: str = ""
    finished: bool = False
    stopped: bool = False

    def progress(self) -> float:
        return (bool(self.plain) + len(self.runs)) / (1 + len(self.gammas))

    def points(self) -> list[SweepPoint]:
        if not self.plain:
            return []
        base = summarize(self.plain).tokens_per_s
        points = []
        for gamma, events in sorted(self.runs.items()):
            m = summarize(events)
            points.append(
                SweepPoint(
                    gamma,
                    m.acceptance_rate,
                    m.mean_tokens_per_step,
                    m.tokens_per_s,
                    m.tokens_per_s / base if base else 0.0,
                )
            )
        return points

    def theory(self) -> Theory | None:
        pooled = [e for events in self.runs.values() for e in events]
        alpha = per_token_alpha(pooled)
        c = cost_ratio(pooled, self.plain)
        block = drafts_blocks(pooled)
        if alpha is None or c is None:
            return None
        speedups = tuple(expected_speedup(alpha, g, c, block) for g in self.gammas)
        return Theory(alpha, c, speedups, best_gamma(alpha, c, self.gammas, block), block)

    def best_measured(self) -> int | None:
        """The γ of the highest speedup measured, leaving out speedups the physics forbids."""
        points = [p for p in self.points() if not p.moved]
        return max(points, key=lambda p: p.speedup).gamma if points else None
