"""`python -m specviz concurrency --target T --draft D --drafters draft@4,draft,ngram --levels 1,4,16 --prompts FILE
--max-new-tokens N`: plain decoding and each drafter with 1, 4, 16 ... requests decoded together, a progress line as it
goes, then a table per lane and level (total tokens/s, each request's own, τ, speedup over plain at the same level
with its range over the rounds, the theory's, the γ adaptive chose) and where each drafter stops paying; a sweep of
fewer rounds than a verdict needs says so. `--json` prints one object with every figure and, per row, its prompt, its
token ids and whether they equal that prompt decoded alone. Bad input (a level of 0, more
rows than the machine holds, rounds outside sweep_plan.ROUNDS): one `error:` line, exit 2, before any decoding."""

import argparse
import json
import shlex
import sys
import time

import torch

from ..concurrency.sweep_plan import DEFAULT_LEVELS, ROUNDS, check_levels, check_rounds
from ..concurrency.sweep_record import ConcurrencyRecord
from ..concurrency.sweep_runner import plan_sweep, sweep
from ..concurrency.sweep_view import VERDICT_ROUNDS, ConcurrencyView
from ..concurrency.vllm_config import vllm_advice
from ..drafters.registry import NO_DRAFTER
from ..events import PLAIN
from ..models import encode_prompt
from ..render.concurrency_page import crossover_words, rounds_words
from ..runtime import ASSETS
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

PROGRESS_EVERY_S = 10  # how often a level under way prints how far it got
EXAMPLES = "code"  # the example prompts a sweep runs when none are given (assets/prompts.json)


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
    p.add_argument("--json", action="store_true", help="print one JSON object: every level, lane and row")
    p.add_argument("--trace", help="record the sweep to this file (it replays in the app and makes a snapshot page)")


def cmd_concurrency(args: argparse.Namespace) -> int:
    levels, rounds = check_levels(args.levels), check_rounds(args.rounds)  # all that is cheap, before a model loads
    texts = read_prompts(args.prompts) if args.prompts else json.loads((ASSETS / "prompts.json").read_text())[EXAMPLES]
    base = settings_from(args, NO_DRAFTER)
    # a batch's drafter drafts chains: no preferred tree
    chosen = chosen_lanes(args, base, preferred_trees=False, tables=read_tables(args.table))
    view, lanes = plan_sweep(levels, chosen, base.greedy)
    pair = open_models(args, bool(args.draft))
    prompts = [encode_prompt(pair.target, t, chat=not args.no_chat) for t in texts]
    began, said, progress_at = time.perf_counter(), "", 0.0
    with torch.inference_mode():
        for news in sweep(pair, prompts, base, list(lanes), levels, rounds):
            view.hear(news)
            now = time.perf_counter() - began
            if news.kind == "progress" and now - progress_at < PROGRESS_EVERY_S:
                continue  # a level under way is reported every PROGRESS_EVERY_S
            if view.message != said:
                said, progress_at = view.message, now
                print(f"[{now:6.0f} s] {said}", file=sys.stderr, flush=True)
    models = run_models(args, pair)
    advice = vllm_advice(view, models.draft)
    print(table(view) + "\n" + vllm_lines(advice), file=sys.stderr if args.json else sys.stdout)
    if args.trace:
        given = sys.argv[1:] if sys.argv[1:2] == ["concurrency"] else ["concurrency"]  # run from a shell, or in-process
        made = "python -m specviz " + shlex.join(given)
        ConcurrencyRecord.of(view, texts, base, models, time.perf_counter() - began, made, advice).save(args.trace)
    if args.json:
        vllm = {a.drafter: {"speculative_config": a.config, "note": a.note} for a in advice}
        print(json.dumps({**view.to_json(texts), "models": models.__dict__, "vllm": vllm}, ensure_ascii=False))
    return 0


def vllm_lines(advice) -> str:
    """Each drafter's measured best draft length per concurrency range, as vLLM takes it."""
    lines = ["for vLLM (the fastest draft length at each level run, as --speculative-config):"]
    for a in advice:
        lines.append(f"  {a.drafter}: {a.flag}" if a.config else f"  {a.drafter}: no vLLM equivalent: {a.note}")
    return "\n".join(lines)


def table(view: ConcurrencyView) -> str:
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
