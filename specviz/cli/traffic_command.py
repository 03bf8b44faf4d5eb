"""`python -m specviz traffic --target T --draft D --drafters draft@4,draft --rates 0.1,0.2,0.4 --requests 24
--prompts FILE --slo-ttft S --slo-tpot S`: requests arriving at each rate (a seeded Poisson process, or the times of
--arrivals FILE) served by continuous batching, plain and with each drafter, a progress line as it goes; then per rate
and lane tokens/s, p50/p90/p99 of TTFT and TPOT, goodput against the SLO, each lane's capacity and where each drafter
stops paying. `--json` prints every figure and, per request, its prompt, token ids, whether they equal that prompt
decoded alone, and its timing. Bad rates, SLOs, counts and arrival files: one `error:` line, exit 2, before any model
loads."""

import argparse
import json
import shlex
import sys
import time

import torch

from ..analysis.physics import MOVED_MARK
from ..concurrency.sweep_plan import ROUNDS, check_rounds
from ..drafters.registry import NO_DRAFTER
from ..errors import InvalidRequest
from ..events import PLAIN
from ..models import encode_prompt
from ..runs import lane_runs
from ..runtime import ASSETS
from ..traffic.latency import capacity, stops_paying
from ..traffic.simulator import held_out, project
from ..traffic.traffic_plan import (
    MAX_REQUESTS,
    MAX_ROWS,
    check_count,
    check_rates,
    check_slo,
    poisson_arrivals,
    read_arrivals,
)
from ..traffic.traffic_record import TrafficRecord
from ..traffic.traffic_runner import traffic
from ..traffic.traffic_view import TrafficView, error_of
from ..traffic.vllm_table import traffic_vllm_advice
from ..workload.prompts import read_prompts
from .flags import (
    add_lanes_run_options,
    add_table_option,
    chosen_lanes,
    open_models,
    read_tables,
    run_models,
    settings_from,
)

PROGRESS_EVERY_S = 10
EXAMPLES = "code"
DEFAULT_SLO = (10.0, 0.5)  # seconds to the first token, then seconds per output token


def add_traffic_command(sub) -> None:
    p = sub.add_parser("traffic", help="requests arriving at a rate, served by continuous batching, against an SLO")
    p.add_argument(
        "--drafters", default="draft@4,draft@a4", help="the lanes, as for concurrency: NAME, NAME@G, NAME@aG"
    )
    p.add_argument("--rates", default="0.1,0.2,0.4", help="request rates to run, requests per second, e.g. 0.1,0.2,0.4")
    p.add_argument("--requests", default="24", help=f"requests per rate, 1..{MAX_REQUESTS}")
    p.add_argument("--arrivals", help="a file of arrival times (seconds, one per line or a JSON list): a recorded "
                   "trace, run instead of --rates")  # fmt: skip
    p.add_argument("--max-rows", default="8", help=f"the most requests decoding together, 1..{MAX_ROWS}")
    p.add_argument("--slo-ttft", help=f"the time-to-first-token objective, seconds (default {DEFAULT_SLO[0]:g})")
    p.add_argument("--slo-tpot", help=f"the time-per-output-token objective, seconds (default {DEFAULT_SLO[1]:g})")
    p.add_argument("--prompts", help=f"a .txt, .jsonl or .csv file; default: the {EXAMPLES} examples")
    p.add_argument("--rounds", type=int, default=1, help=f"runs of each rate and lane, {ROUNDS[0]}..{ROUNDS[-1]}")
    p.add_argument("--simulate", default="0", help="then simulate this many requests at rates around those run, "
                   f"calibrated on the runs (1..{MAX_REQUESTS}; 0: only check it on the rates run)")  # fmt: skip
    add_lanes_run_options(p, target_required=False)  # a replay needs none
    add_table_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object: every rate, lane and request")
    p.add_argument("--trace", help="record the run to this file (it reads back with no model loaded)")
    p.add_argument("--replay", help="a run recorded with --trace, judged again with no model loaded: against the "
                   "SLO given (default: its own), its table, verdicts and vLLM's lines")  # fmt: skip


def cmd_traffic(args: argparse.Namespace) -> int:
    if args.replay:
        return replay(args)
    if not args.target:
        raise InvalidRequest("--target is required (or --replay FILE, a recorded run, to judge it again)")
    # Everything cheap first, before a model loads.
    slo, rounds = check_slo(*asked_slo(args, DEFAULT_SLO)), check_rounds(args.rounds)
    max_rows = check_count(args.max_rows, "--max-rows", MAX_ROWS)
    simulate = 0 if str(args.simulate).strip() == "0" else check_count(args.simulate, "--simulate", MAX_REQUESTS)
    if args.arrivals:
        times = read_arrivals(args.arrivals)
        mean_rate = (len(times) - 1) / times[-1] if len(times) > 1 and times[-1] > 0 else 1.0
        schedules = {round(mean_rate, 4): times}
    else:
        requests = check_count(args.requests, "--requests", MAX_REQUESTS)
        schedules = {rate: poisson_arrivals(rate, requests, args.seed) for rate in check_rates(args.rates)}
    texts = read_prompts(args.prompts) if args.prompts else json.loads((ASSETS / "prompts.json").read_text())[EXAMPLES]
    base = settings_from(args, NO_DRAFTER)
    chosen = chosen_lanes(args, base, preferred_trees=False, tables=read_tables(args.table))
    lanes = [e for e in chosen if e.settings]
    runs = lane_runs(lanes)
    view = TrafficView(tuple(schedules), (PLAIN, *(e.name for e in chosen)), slo, rounds)
    view.notes = {e.name: e.contender.note for e in chosen if not e.settings}
    pair = open_models(args, bool(args.draft))
    prompts = [encode_prompt(pair.target, t, chat=not args.no_chat) for t in texts]
    began, said, progress_at = time.perf_counter(), "", 0.0
    with torch.inference_mode():
        for news in traffic(pair, prompts, base, runs, schedules, max_rows, rounds):
            view.hear(news)
            now = time.perf_counter() - began
            if news.kind == "progress" and now - progress_at < PROGRESS_EVERY_S:
                continue
            if view.message != said:
                said, progress_at = view.message, now
                print(f"[{now:6.0f} s] {said}", file=sys.stderr, flush=True)
    tokens = {p: len(ids) for p, ids in enumerate(prompts)}
    held_out(view, tokens, schedules, max_rows)  # each rate run, predicted from the others
    if simulate:
        project(view, tokens, simulate, max_rows, args.seed)
    models = run_models(args, pair)
    view.advice = traffic_vllm_advice(view, models.draft)
    if args.trace:
        given = sys.argv[1:] if sys.argv[1:2] == ["traffic"] else ["traffic"]  # run from a shell, or in-process
        made = "python -m specviz " + shlex.join(given)
        wall = time.perf_counter() - began
        lengths = [len(p) for p in prompts]
        TrafficRecord.of(view, texts, lengths, max_rows, base, models, wall, made).save(args.trace)
    return report(view, texts, args.json)


def asked_slo(args: argparse.Namespace, default: tuple[float, float]) -> tuple:
    """The SLO's two objectives as given, each one not given as in `default`."""
    return tuple(d if given is None else given for given, d in zip((args.slo_ttft, args.slo_tpot), default))


def replay(args: argparse.Namespace) -> int:
    """A recorded run judged again, with no model: the same runs, under the SLO asked (a serving engineer trying the
    objective a product needs, or checking how near a verdict sits to a cliff, without running it again)."""
    record = TrafficRecord.load(args.replay)
    record.slo = check_slo(*asked_slo(args, (record.slo.ttft_s, record.slo.tpot_s)))
    return report(record.view(), record.prompts, args.json)


def report(view: TrafficView, prompts: list[str], as_json: bool) -> int:
    """A finished run's table, verdicts and vLLM's lines (on stderr beside --json), then with --json one object of
    every figure, the prompts and vLLM's config per drafter."""
    print(table(view) + "\n" + production_lines(view, view.advice), file=sys.stderr if as_json else sys.stdout)
    if as_json:
        vllm = {a.drafter: {"speculative_config": a.config, "note": a.note} for a in view.advice}
        print(json.dumps({**view.to_json(), "prompts": prompts, "vllm": vllm}, ensure_ascii=False))
    return 0


def table(view: TrafficView) -> str:
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
    cap, where = capacity(found), stops_paying(found, view.projection.get(PLAIN, []))
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
