"""The two verbs of many requests at once, each a mode of one experiment (traffic/runner.py), a progress line as it
goes; bad input is one `error:` line, exit 2, before any model loads (or, for a level too large for the machine, before
any decoding).

`python -m specviz concurrency --target T --draft D --drafters draft@4,draft,ngram --levels 1,4,16 --prompts FILE
--max-new-tokens N`: plain decoding and each drafter with 1, 4, 16 ... requests decoded together, then a table per lane
and level (total tokens/s, each request's own, τ, speedup over plain at the same level with its range over the rounds,
the theory's, the γ adaptive chose) and where each drafter stops paying; a sweep of fewer rounds than a verdict needs
says so. `--json` prints one object with every figure and, per row, its prompt, its token ids and whether they equal
that prompt decoded alone.

`python -m specviz traffic --target T --draft D --drafters draft@4,draft --rates 0.1,0.2,0.4 --requests 24 --prompts
FILE --slo-ttft S --slo-tpot S`: requests arriving at each rate (a seeded Poisson process, or the times of --arrivals
FILE) served by continuous batching, plain and with each drafter; then per rate and lane tokens/s, p50/p90/p99 of TTFT
and TPOT, goodput against the SLO, each lane's capacity and where each drafter stops paying. `--json` prints every
figure and, per request, its prompt, token ids, whether they equal that prompt decoded alone, and its timing.
`--replay FILE` judges a recorded run again with no model loaded."""

import argparse
import json
import shlex
import sys
import time

import torch

from ..drafters.registry import NO_DRAFTER
from ..errors import InvalidRequest
from ..models import encode_prompt
from ..paths import ASSETS
from ..traffic.runner import MODES, plan_levels, plan_rates, run
from ..traffic.simulator import held_out, project
from ..traffic.traffic_plan import (
    DEFAULT_LEVELS,
    MAX_REQUESTS,
    MAX_ROWS,
    ROUNDS,
    check_count,
    check_levels,
    check_rates,
    check_rounds,
    check_slo,
    level_points,
    poisson_arrivals,
    rate_points,
    read_arrivals,
)
from ..traffic.traffic_record import ConcurrencyRecord, TrafficRecord
from ..traffic.vllm_advice import vllm_advice
from ..workload.prompts import read_prompts
from .flags import (
    add_lanes_run_options,
    add_output_options,
    add_table_option,
    chosen_lanes,
    open_models,
    read_tables,
    settings_from,
)
from .traffic_tables import concurrency_table, traffic_report

PROGRESS_EVERY_S = 10  # how often a run under way prints how far it got
EXAMPLES = "code"  # the example prompts a run serves when none are given (assets/prompts.json)
DEFAULT_SLO = (10.0, 0.5)  # seconds to the first token, then seconds per output token


def add_concurrency_command(sub) -> None:
    p = sub.add_parser("concurrency", help="many requests at once: plain and each drafter at rising concurrency")
    p.add_argument(
        "--drafters",
        default="draft@4,draft",
        help="the lanes, comma-separated: NAME (its measured best γ), NAME@G (a fixed γ), NAME@aG (adaptive up to G)",
    )
    p.add_argument(
        "--levels", default=",".join(map(str, DEFAULT_LEVELS)), help="requests decoded together, e.g. 1,4,16"
    )
    p.add_argument("--prompts", help="a .txt, .jsonl or .csv file; row r decodes prompt r (again from the first when "
                   f"they run out); default: the {EXAMPLES} examples")  # fmt: skip
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help=f"runs of each level and lane, {ROUNDS[0]}..{ROUNDS[-1]}; the figures are the median's",
    )
    add_lanes_run_options(p)
    add_table_option(p)
    add_output_options(
        p,
        "every level, lane and row",
        "record the sweep to this file (it replays in the app and makes a snapshot page)",
    )


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
    add_output_options(
        p, "every rate, lane and request", "record the run to this file (it reads back with no model loaded)"
    )
    p.add_argument("--replay", help="a run recorded with --trace, judged again with no model loaded: against the "
                   "SLO given (default: its own), its table, verdicts and vLLM's lines")  # fmt: skip


def cmd_concurrency(args: argparse.Namespace) -> int:
    levels = check_levels(args.levels)  # all that is cheap, before a model loads
    rounds = check_rounds(args.rounds)
    texts = _prompts(args)
    base = settings_from(args, NO_DRAFTER)
    # a batch's drafter drafts chains: no preferred tree
    chosen = chosen_lanes(args, base, preferred_trees=False, tables=read_tables(args.table))
    view, lanes = plan_levels(levels, chosen, base.greedy)
    pair, _, began = _serve(args, base, lanes, level_points(levels), "levels", rounds, view, texts)
    models = pair.models(pair.exact)
    view.advice = vllm_advice(view, models.draft)
    print(concurrency_table(view) + "\n" + vllm_lines(view.advice), file=sys.stderr if args.json else sys.stdout)
    if args.trace:
        made = _made_with("concurrency")
        ConcurrencyRecord.of(view, texts, base, models, time.perf_counter() - began, made).save(args.trace)
    if args.json:
        vllm = {a.drafter: {"speculative_config": a.config, "note": a.note} for a in view.advice}
        print(json.dumps({**view.to_json(texts), "models": models.__dict__, "vllm": vllm}, ensure_ascii=False))
    return 0


def cmd_traffic(args: argparse.Namespace) -> int:
    if args.replay:
        return replay(args)
    if not args.target:
        raise InvalidRequest("--target is required (or --replay FILE, a recorded run, to judge it again)")
    # Everything cheap first, before a model loads.
    slo = check_slo(*asked_slo(args, DEFAULT_SLO))
    rounds = check_rounds(args.rounds)
    max_rows = check_count(args.max_rows, "--max-rows", MAX_ROWS)
    simulate = 0 if str(args.simulate).strip() == "0" else check_count(args.simulate, "--simulate", MAX_REQUESTS)
    schedules = _schedules(args)
    texts = _prompts(args)
    base = settings_from(args, NO_DRAFTER)
    chosen = chosen_lanes(args, base, preferred_trees=False, tables=read_tables(args.table))
    view, lanes = plan_rates(tuple(schedules), chosen, slo, rounds)
    points = rate_points(schedules, max_rows)
    pair, prompts, began = _serve(args, base, lanes, points, "rates", rounds, view, texts)
    tokens = {p: len(ids) for p, ids in enumerate(prompts)}
    held_out(view, tokens, schedules, max_rows)  # each rate run, predicted from the others
    if simulate:
        project(view, tokens, simulate, max_rows, args.seed)
    models = pair.models(pair.exact)
    view.advice = vllm_advice(view, models.draft)
    if args.trace:
        wall = time.perf_counter() - began
        lengths = [len(p) for p in prompts]
        TrafficRecord.of(view, texts, lengths, max_rows, base, models, wall, _made_with("traffic")).save(args.trace)
    return traffic_report(view, texts, args.json)


def _schedules(args: argparse.Namespace) -> dict[float, tuple[float, ...]]:
    """Rate -> arrival times: a recorded trace's (at its mean rate), or a seeded Poisson process at each rate."""
    if args.arrivals:
        times = read_arrivals(args.arrivals)
        mean_rate = (len(times) - 1) / times[-1] if len(times) > 1 and times[-1] > 0 else 1.0
        return {round(mean_rate, 4): times}
    requests = check_count(args.requests, "--requests", MAX_REQUESTS)
    return {rate: poisson_arrivals(rate, requests, args.seed) for rate in check_rates(args.rates)}


def _prompts(args: argparse.Namespace) -> list[str]:
    return read_prompts(args.prompts) if args.prompts else json.loads((ASSETS / "prompts.json").read_text())[EXAMPLES]


def _serve(args, base, lanes, points, mode: str, rounds: int, view, texts: list[str]):
    """The models opened and the run made, the view hearing each piece of news and a line printed when it says
    something new (a run under way every PROGRESS_EVERY_S); returns the pair, the prompts' ids and when it began."""
    pair = open_models(args, bool(args.draft))
    prompts = [encode_prompt(pair.target, t, chat=not args.no_chat) for t in texts]
    began = time.perf_counter()
    said = ""
    progress_at = 0.0
    with torch.inference_mode():
        for news in run(pair, prompts, base, list(lanes), points, MODES[mode], rounds):
            view.hear(news)
            now = time.perf_counter() - began
            if news.kind == "progress" and now - progress_at < PROGRESS_EVERY_S:
                continue
            if view.message != said:
                said = view.message
                progress_at = now
                print(f"[{now:6.0f} s] {said}", file=sys.stderr, flush=True)
    return pair, prompts, began


def _made_with(verb: str) -> str:
    """The command that made a record, as run from a shell (or in-process, by a test)."""
    given = sys.argv[1:] if sys.argv[1:2] == [verb] else [verb]
    return "python -m specviz " + shlex.join(given)


def asked_slo(args: argparse.Namespace, default: tuple[float, float]) -> tuple:
    """The SLO's two objectives as given, each one not given as in `default`."""
    return tuple(d if given is None else given for given, d in zip((args.slo_ttft, args.slo_tpot), default))


def replay(args: argparse.Namespace) -> int:
    """A recorded run judged again, with no model: the same runs, under the SLO asked (a serving engineer trying the
    objective a product needs, or checking how near a verdict sits to a cliff, without running it again)."""
    record = TrafficRecord.load(args.replay)
    record.slo = check_slo(*asked_slo(args, (record.slo.ttft_s, record.slo.tpot_s)))
    return traffic_report(record.final_view(), record.prompts, args.json)


def vllm_lines(advice) -> str:
    """Each drafter's measured best draft length per concurrency range, as vLLM takes it."""
    lines = ["for vLLM (the fastest draft length at each level run, as --speculative-config):"]
    for a in advice:
        lines.append(f"  {a.drafter}: {a.flag}" if a.config else f"  {a.drafter}: no vLLM equivalent: {a.note}")
    return "\n".join(lines)
