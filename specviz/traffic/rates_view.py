"""What a traffic run shows, pure Python: per lane and rate the median figures over rounds with their spread, each
lane's capacity under the SLO and the rate where it stops paying against plain decoding, whether every greedy request
wrote what its prompt writes alone, and, where the simulator ran, its figures beside the measured ones."""

from dataclasses import dataclass, field

from ..analysis.physics import MOVED, speedup_forbidden
from ..events import PLAIN
from .latency import RateFigures, capacity, median_figures, stops_paying
from .results import News
from .traffic_plan import Slo


@dataclass
class TrafficView:
    rates: tuple[float, ...]
    lanes: tuple[str, ...]  # plain first
    slo: Slo
    rounds: int = 1
    runs: dict = field(default_factory=dict)  # (lane, rate) -> [TrafficRun] over rounds
    same: dict = field(default_factory=dict)  # (lane, rate) -> [bool] over every request of every round
    notes: dict = field(default_factory=dict)  # lane -> why it cannot run
    order: list = field(default_factory=list)  # (run, same) in the order they ran, as a record keeps them
    simulated: dict = field(
        default_factory=dict
    )  # (lane, rate) -> RateFigures the simulator gave, not calibrated there
    projection: dict = field(default_factory=dict)  # lane -> [RateFigures] simulated at many rates, many requests
    projection_s: float = 0.0  # the seconds the projection took
    message: str = "waiting to start"
    said: int = 0  # lines heard that say what the run does next (not how far a run got): each is worth showing
    finished: bool = False
    exact: str = ""  # whether the target ran in exact mode, in one line
    saved: object = None  # the finished run as a TrafficRecord (traffic_record.py), for its downloads
    advice: list = field(default_factory=list)  # vLLM's draft length per batch size as measured (vllm_advice.py)

    def hear(self, news: News) -> None:
        if news.kind in ("message", "progress", "end"):
            self.message = news.text
            self.said += news.kind != "progress"
            self.finished = self.finished or news.kind == "end"
        elif news.kind == "note":
            self.notes[news.lane] = news.text
        elif news.kind == "run":
            key = (news.lane, news.run.rate)
            self.order.append((news.run, news.same))
            self.runs.setdefault(key, []).append(news.run)
            if news.same is not None:
                self.same.setdefault(key, []).extend(news.same)

    def rounds_of(self, lane: str, rate: float) -> list[RateFigures]:
        return [run.figures(self.slo) for run in self.runs.get((lane, rate), []) if not run.stopped]

    def figures(self, lane: str, rate: float) -> RateFigures | None:
        """The median round's figures (each figure's own median), None before a whole run."""
        done = self.rounds_of(lane, rate)
        return median_figures(done) if done else None

    def spread(self, lane: str, rate: float, pick) -> tuple[float, float] | None:
        """The lowest and highest of one figure (`pick` of a RateFigures) over the rounds run; None under two."""
        values = [pick(f) for f in self.rounds_of(lane, rate)]
        return (min(values), max(values)) if len(values) > 1 else None

    def measured(self, lane: str) -> list[RateFigures]:
        return [f for f in (self.figures(lane, r) for r in self.rates) if f is not None]

    def capacity(self, lane: str) -> float | None:
        return capacity(self.measured(lane))

    def stops_paying(self, lane: str) -> float | None:
        """The lowest rate where the lane paid no more than plain, rates where the machine moved left out."""
        steady = [f for f in self.measured(lane) if not self.moved(lane, f.rate)]
        return stops_paying(steady, self.measured(PLAIN))

    def tokens_per_row_step(self, lane: str, rate: float) -> tuple[float, float] | None:
        """Over the lane's steps at this rate (every round): tokens each row wrote a step (τ) and rows a step."""
        steps = [s for run in self.runs.get((lane, rate), []) if not run.stopped for s in run.steps]
        rows = sum(s.rows for s in steps)
        return (sum(s.new_tokens for s in steps) / rows, rows / len(steps)) if rows else None

    def moved(self, lane: str, rate: float) -> bool:
        """Whether the lane's median TPOT beat plain's by more than its steps allow: a step writes τ tokens a row and
        costs at least a plain step of as many rows, and plain's batch of B rows at most B/b of one of b rows; beyond
        that, the machine's speed moved between the two runs."""
        mine, base = self.figures(lane, rate), self.figures(PLAIN, rate)
        own = self.tokens_per_row_step(lane, rate)
        plain = self.tokens_per_row_step(PLAIN, rate)
        if lane == PLAIN or None in (mine, base, own, plain) or not mine.tpot[0]:
            return False
        return speedup_forbidden(base.tpot[0] / mine.tpot[0], own[0] * max(1.0, plain[1] / own[1]))

    def moved_rates(self, lane: str) -> list[float]:
        return [f.rate for f in self.measured(lane) if self.moved(lane, f.rate)]

    def identical(self, lane: str, rate: float) -> bool | None:
        """Whether every greedy request of every round wrote its prompt's tokens alone (None: sampled, or none ran)."""
        found = self.same.get((lane, rate))
        return None if not found else all(found)

    def versus_plain(self, lane: str, rate: float, pick) -> float | None:
        """A figure of the lane over plain's at the same rate (goodput, tokens/s), None where either is missing."""
        mine, base = self.figures(lane, rate), self.figures(PLAIN, rate)
        if mine is None or base is None or not pick(base):
            return None
        return pick(mine) / pick(base)

    def paying_words(self, lane: str) -> str:
        """Where the lane stops paying, in a product manager's words, with the simulator's rate where it ran."""
        if not self.measured(lane):
            return "not run yet"
        where = self.stops_paying(lane)
        if where is None:
            said = f"faster than plain at every rate run, up to {max(f.rate for f in self.measured(lane)):g} req/s"
        elif where == min(self.rates):
            said = f"no faster than plain even at {where:g} req/s, the lowest rate run"
        else:
            said = f"faster than plain below {where:g} req/s; from there on, plain serves as well or better"
        moved = self.moved_rates(lane)
        if moved:
            said += f"; left out: {', '.join(f'{r:g}' for r in moved)} req/s, where {MOVED}"
        found = self.projection.get(lane)
        if not found:
            return said
        simulated = stops_paying(found, self.projection.get(PLAIN, []))
        return said + (
            f" (simulated: pays up to {found[-1].rate:.2g} req/s)"
            if simulated is None
            else f" (simulated: stops paying at {simulated:.2g} req/s)"
        )

    def capacity_words(self, lane: str) -> str:
        """The highest rate the lane serves within the SLO, measured and, where it ran, simulated."""
        cap = self.capacity(lane)
        ran = f"{min(self.rates):g}–{max(self.rates):g}" if len(self.rates) > 1 else f"{self.rates[0]:g}"
        said = f"meets the SLO up to {cap:g} req/s" if cap is not None else f"meets the SLO at none of {ran} req/s"
        found = self.projection.get(lane)
        if not found:
            return said
        simulated = capacity(found)
        return said + (
            f" (simulated: not even at {found[0].rate:.2g} req/s)"
            if simulated is None
            else f" (simulated: up to {simulated:.2g} req/s)"
        )

    def headline(self) -> str:
        """The verdict in one line: each lane's capacity under the SLO and where each drafter stops paying."""
        ran = [lane for lane in self.lanes if lane not in self.notes and self.measured(lane)]
        if not ran:
            return ""
        caps = []
        for lane in ran:
            cap = self.capacity(lane)
            found = self.projection.get(lane)
            simulated = "" if not found else f" (simulated: {_up_to(capacity(found))})"
            caps.append(f"{lane} {'at no rate run' if cap is None else f'up to {cap:g} req/s'}{simulated}")
        stops = [(lane, self.stops_paying(lane)) for lane in ran if lane != PLAIN]
        paying = [f"{lane} at {where:g} req/s" for lane, where in stops if where is not None]
        line = "Capacity within the SLO: " + ", ".join(caps)
        if stops:
            line += (
                "; speculation stops paying: " + ", ".join(paying) if paying else "; every drafter paid at every rate"
            )
        return line + "."

    def turn_off_lines(self) -> list[str]:
        """For engines that take no per-batch-size table: per drafter lane, the rate above which to turn it off."""
        lines = []
        for lane in self.lanes:
            if lane == PLAIN or lane in self.notes or not self.measured(lane):
                continue
            where = self.stops_paying(lane)
            if where is None:
                lines.append(f"{lane}: paid at every rate run; no rate measured at which to turn it off")
            else:
                lines.append(f"{lane}: turn speculation off from {where:g} requests/s (it did not pay there)")
        return lines

    def to_json(self) -> dict:
        out = {"slo": {"ttft_s": self.slo.ttft_s, "tpot_s": self.slo.tpot_s}, "rounds": self.rounds, "rates": []}
        for rate in self.rates:
            lanes = {}
            for lane in self.lanes:
                f = self.figures(lane, rate)
                if f is None:
                    continue
                sim = self.simulated.get((lane, rate))
                lanes[lane] = {
                    **_figures_json(f),
                    "identical": self.identical(lane, rate),
                    "goodput_vs_plain": self.versus_plain(lane, rate, lambda x: x.goodput),
                    "goodput_spread": self.spread(lane, rate, lambda x: x.goodput),
                    "simulated": None if sim is None else {**_figures_json(sim), **_errors(f, sim)},
                    "runs": [run.to_json() for run in self.runs[(lane, rate)]],
                }
            out["rates"].append({"rate": rate, "lanes": lanes})
        out["lanes"] = {
            lane: {"capacity": self.capacity(lane), "stops_paying": None if lane == PLAIN else self.stops_paying(lane)}
            for lane in self.lanes
        }
        out["notes"] = dict(self.notes)
        out["projection"] = {
            lane: {
                "seconds": self.projection_s,
                "capacity": capacity(found),
                "stops_paying": None if lane == PLAIN else stops_paying(found, self.projection.get(PLAIN, [])),
                "rates": [{"rate": f.rate, **_figures_json(f)} for f in found],
            }
            for lane, found in self.projection.items()
        }
        return out


def _up_to(rate: float | None) -> str:
    return "none" if rate is None else f"up to {rate:.2g} req/s"


def _figures_json(f: RateFigures) -> dict:
    return {
        "tokens_per_s": f.tokens_per_s,
        "goodput": f.goodput,
        "good": f.good,
        "requests": f.requests,
        "meets_slo": f.meets_slo,
        "ttft_s": dict(zip(("p50", "p90", "p99"), f.ttft)),
        "tpot_s": dict(zip(("p50", "p90", "p99"), f.tpot)),
        "duration_s": f.duration_s,
    }


def error_of(simulated: float, measured: float) -> float | None:
    """The simulator's relative error against the measurement."""
    return None if not measured else (simulated - measured) / measured


def _errors(measured: RateFigures, simulated: RateFigures) -> dict:
    return {
        "error_tokens_per_s": error_of(simulated.tokens_per_s, measured.tokens_per_s),
        "error_tpot_p50": error_of(simulated.tpot[0], measured.tpot[0]),
    }
