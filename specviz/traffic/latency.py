"""What a traffic run measures, pure Python: each request's latencies, and per lane and rate the figures a serving
benchmark reports (output tokens per second; p50/p90/p99 of TTFT and TPOT; goodput, the requests per second that met
the SLO) and the ones a decision needs (whether the lane met the SLO there; where speculation stops paying).

    queue  = admitted − arrival             waiting for a free row
    TTFT   = first token − arrival          the queue, the prompt's read and the first step
    TPOT   = (last − first token) / (n − 1) each output token after the first (none for a request of one token)
    E2E    = last token − arrival
"""

import math
from dataclasses import asdict, dataclass
from statistics import median

from .traffic_plan import Slo

MEETS_AT = 0.9  # a lane meets the SLO at a rate when this share of its requests did (p90 within both objectives)


@dataclass(frozen=True)
class RequestTiming:
    """One request as it was served: seconds after the run began, and the tokens it got."""

    prompt: int  # which of the prompts it asked
    arrival: float
    admitted: float
    first_token: float
    last_token: float
    tokens: int

    @property
    def queue_s(self) -> float:
        return self.admitted - self.arrival

    @property
    def ttft_s(self) -> float:
        return self.first_token - self.arrival

    @property
    def tpot_s(self) -> float | None:
        return (self.last_token - self.first_token) / (self.tokens - 1) if self.tokens > 1 else None

    @property
    def e2e_s(self) -> float:
        return self.last_token - self.arrival

    def to_json(self) -> dict:
        return {**asdict(self), "queue_s": self.queue_s, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s}


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100) by linear interpolation between the two nearest ranks; None of nothing."""
    if not values:
        return None
    ordered = sorted(values)
    at = (len(ordered) - 1) * q / 100
    low, high = math.floor(at), math.ceil(at)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


@dataclass(frozen=True)
class RateFigures:
    """One lane at one rate: what its requests saw, summed up."""

    rate: float  # requests per second offered
    requests: int
    duration_s: float  # from the first arrival to the last token
    tokens_per_s: float  # output tokens over the duration
    ttft: tuple[float, float, float]  # p50, p90, p99 seconds
    tpot: tuple[float, float, float]
    good: int  # requests that met the SLO
    goodput: float  # good requests per second over the duration

    @property
    def meets_slo(self) -> bool:
        return self.good >= MEETS_AT * self.requests

    @classmethod
    def of(cls, rate: float, timings: list[RequestTiming], slo: Slo) -> "RateFigures":
        duration = max((t.last_token for t in timings), default=0.0) - min((t.arrival for t in timings), default=0.0)
        tpots = [t.tpot_s for t in timings if t.tpot_s is not None]
        good = sum(slo.met(t.ttft_s, t.tpot_s) for t in timings)
        spread = lambda values: tuple(percentile(values, q) or 0.0 for q in (50, 90, 99))  # noqa: E731
        return cls(
            rate=rate,
            requests=len(timings),
            duration_s=duration,
            tokens_per_s=sum(t.tokens for t in timings) / duration if duration > 0 else 0.0,
            ttft=spread([t.ttft_s for t in timings]),
            tpot=spread(tpots),
            good=good,
            goodput=good / duration if duration > 0 else 0.0,
        )


def median_figures(rounds: list[RateFigures]) -> RateFigures:
    """Each figure's median over rounds of the same arrivals (one round: itself)."""
    if len(rounds) == 1:
        return rounds[0]
    mid = median
    first = rounds[0]
    return RateFigures(
        rate=first.rate,
        requests=first.requests,
        duration_s=mid([r.duration_s for r in rounds]),
        tokens_per_s=mid([r.tokens_per_s for r in rounds]),
        ttft=tuple(mid([r.ttft[i] for r in rounds]) for i in range(3)),
        tpot=tuple(mid([r.tpot[i] for r in rounds]) for i in range(3)),
        good=round(mid([r.good for r in rounds])),
        goodput=mid([r.goodput for r in rounds]),
    )


def capacity(figures: list[RateFigures]) -> float | None:
    """The highest rate at which the lane met the SLO, below the first rate where it did not; None: not even the
    lowest rate run."""
    best = None
    for f in sorted(figures, key=lambda f: f.rate):
        if not f.meets_slo:
            break
        best = f.rate
    return best


def stops_paying(lane: list[RateFigures], plain: list[RateFigures]) -> float | None:
    """The lowest rate where the lane's requests were no faster than plain's (median TPOT) or fewer of them met the
    SLO (a count, not goodput per second: with every request good, the run's last seconds are noise); None: it paid
    at every rate run."""
    by_rate = {f.rate: f for f in plain}
    for f in sorted(lane, key=lambda f: f.rate):
        base = by_rate.get(f.rate)
        if base is not None and (f.tpot[0] >= base.tpot[0] or f.good < base.good):
            return f.rate
    return None
