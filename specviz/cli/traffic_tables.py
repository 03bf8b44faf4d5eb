"""The two verbs' tables as text: a concurrency sweep's block per lane and level, traffic's per lane and rate with
the verdicts and what to take into production."""

import json
import sys

from ..analysis.physics import MOVED_MARK
from ..events import PLAIN
from ..render.concurrency_page import crossover_words, rounds_words
from ..traffic.latency import capacity, stops_paying
from ..traffic.levels_view import VERDICT_ROUNDS, ConcurrencyView
from ..traffic.rates_view import TrafficView, error_of


def concurrency_table(view: ConcurrencyView) -> str:
    """One block per lane: a line per level; first, a sweep of fewer rounds than a verdict needs says so."""
    few = rounds_words(view, f" (--rounds {VERDICT_ROUNDS})")
    lines = [few] if few else []
    for lane in view.lanes:
        if lane in view.notes:
            lines.append(f"{lane}: cannot decode concurrent requests: {view.notes[lane]}")
            continue
        lines.append(f"{lane}" + (f" ({view.words[lane]})" if view.words.get(lane) else ""))
        lines.append("  requests  total tok/s  per request  tau   speedup  (range, rounds)  theory  gamma  identical")
        for level in view.levels:
            f = view.figures(lane, level)
            if f is None:
                continue
            cells = [
                f"{level:8d}",
                f"{f.throughput:11.1f}",
                f"{f.latency:11.1f}",
                f"{f.tau:5.2f}",
                _x(f.speedup, 8),
                f"{_spread(f):>16}",
                _x(f.predicted, 7),
                "     " if f.gamma is None else f"{f.gamma:5.1f}",
                {None: "", True: "yes", False: "NO"}[f.identical],
            ]
            lines.append("  " + "  ".join(cells))
        if lane != PLAIN:
            lines.append(f"  crossover: {crossover_words(view, lane)}")
    return "\n".join(lines)


def _x(value, width: int) -> str:
    return " " * width if value is None else f"{value:{width - 1}.2f}x"


def _spread(f) -> str:
    """The speedup's lowest and highest over the rounds, and how many: "(0.93-1.20, 3)", or "(1 round)"."""
    if f.speedup is None:
        return ""
    return "(1 round)" if f.rounds < 2 or f.spread is None else f"({f.spread[0]:.2f}-{f.spread[1]:.2f}, {f.rounds})"


def traffic_report(view: TrafficView, prompts: list[str], as_json: bool) -> int:
    """A finished run's table, verdicts and vLLM's lines (on stderr beside --json), then with --json one object of
    every figure, the prompts and vLLM's config per drafter."""
    print(traffic_table(view) + "\n" + production_lines(view, view.advice), file=sys.stderr if as_json else sys.stdout)
    if as_json:
        vllm = {a.drafter: {"speculative_config": a.config, "note": a.note} for a in view.advice}
        print(json.dumps({**view.to_json(), "prompts": prompts, "vllm": vllm}, ensure_ascii=False))
    return 0


def traffic_table(view: TrafficView) -> str:
    """One block per lane: a line per rate."""
    lines = [f"SLO: TTFT <= {view.slo.ttft_s:g} s and TPOT <= {view.slo.tpot_s:g} s; rounds: {view.rounds}"]
    headline = view.headline()
    lines += [headline] if headline else []
    for lane in view.lanes:
        if lane in view.notes:
            lines.append(f"{lane}: cannot serve concurrent requests: {view.notes[lane]}")
            continue
        lines.append(lane)
        lines.append(
            "  req/s  tok/s  TTFT p50/p90/p99 s    TPOT p50/p90/p99 s   goodput  (rounds)     vs plain  SLO  identical"
        )
        for rate in view.rates:
            f = view.figures(lane, rate)
            if f is None:
                continue
            ratio = view.versus_plain(lane, rate, lambda x: x.goodput)
            cells = [
                f"{rate:5g}",
                f"{f.tokens_per_s:5.1f}",
                "/".join(f"{v:.2f}" for v in f.ttft).rjust(20),
                "/".join(f"{v:.3f}" for v in f.tpot).rjust(20),
                f"{f.goodput:7.3f}",
                _rounds_spread(view.spread(lane, rate, lambda x: x.goodput)),
                "        " if ratio is None or lane == PLAIN else f"{ratio:7.2f}x",
                " met" if f.meets_slo else "miss",
                {None: "", True: "yes", False: "NO"}[view.identical(lane, rate)],
            ]
            lines.append("  " + "  ".join(cells) + (f"  {MOVED_MARK}" if view.moved(lane, rate) else ""))
            sim = view.simulated.get((lane, rate))
            if sim is not None:
                lines.append(f"         simulated from the other rates: {sim.tokens_per_s:.1f} tok/s "
                             f"({_error(sim.tokens_per_s, f.tokens_per_s)}), TPOT p50 {sim.tpot[0]:.3f} s "
                             f"({_error(sim.tpot[0], f.tpot[0])})")  # fmt: skip
        cap = view.capacity(lane)
        lines.append(
            f"  capacity under the SLO: {'below the lowest rate run' if cap is None else f'{cap:g} requests/s'}"
        )
        if lane != PLAIN:
            lines.append(f"  {view.paying_words(lane)}")
        if lane in view.projection:
            lines.append("  " + projection_words(view, lane))
    return "\n".join(lines)


def production_lines(view: TrafficView, advice) -> str:
    """Into production: vLLM's draft length per batch size as these runs measured it; a rate to turn it off."""
    lines = ["for vLLM (the fastest draft length at each batch size the runs' steps went through):"]
    for a in advice:
        lines.append(f"  {a.drafter}: {a.flag}" if a.config else f"  {a.drafter}: no vLLM equivalent: {a.note}")
    lines.append("for engines without a per-batch-size table:")
    return "\n".join(lines + [f"  {line}" for line in view.turn_off_lines()])


def projection_words(view: TrafficView, lane: str) -> str:
    found = view.projection[lane]
    cap = capacity(found)
    where = stops_paying(found, view.projection.get(PLAIN, []))
    rates = f"{found[0].rate:.3g}..{found[-1].rate:.3g} requests/s"
    said = f"simulated, {found[0].requests} requests at {len(found)} rates ({rates}, {view.projection_s:.1f} s): "
    said += "meets the SLO at none" if cap is None else f"capacity {cap:.3g} requests/s"
    if lane != PLAIN:
        said += "; pays at every rate" if where is None else f"; stops paying at {where:.3g} requests/s"
    return said


def _rounds_spread(spread: tuple[float, float] | None) -> str:
    """A goodput's lowest–highest over the rounds: a lane's difference from plain inside plain's is noise."""
    return " " * 11 if spread is None else f"{spread[0]:.3f}-{spread[1]:.3f}"


def _error(simulated: float, measured: float) -> str:
    error = error_of(simulated, measured)
    return "error –" if error is None else f"error {error * 100:+.0f}%"
