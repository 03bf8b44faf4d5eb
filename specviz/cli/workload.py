"""`python -m specviz workload --prompts FILE --out report.html` (`compare`, its former name, still works): every
chosen drafter on each of one's own prompts against plain decoding (run once per prompt and shared), models loaded
once, a line per finished run with the time left, then the report and its table as CSV. Bad input: one `error:`
line, exit 2, and no report written."""

import argparse
import sys
import time
from functools import partial
from pathlib import Path

import torch

from ..drafters.registry import NO_DRAFTER
from ..errors import InvalidRequest
from ..events import PLAIN, summarize
from ..render.report import write_report
from ..runtimes.runtime_registry import choose
from ..workload.cluster import Prepare, run_on_cluster
from ..workload.entrants import EntryRules, drafter_names, entrants, setting_words
from ..workload.job import WorkloadJob, prepare
from ..workload.prompts import read_prompts
from ..workload.ray_shards import connect
from ..workload.run import run_workload
from ..workload.view import duration
from .flags import (
    add_cluster_options,
    add_drafter_options,
    add_exact_option,
    add_model_options,
    add_sampling_options,
    check_entrants,
    given_options,
    pair_ask,
    settings_from,
)

NAMES = ("workload", "compare")  # the command, and the name it had before the app's Compare all took that word


def add_workload_command(sub) -> None:
    p = sub.add_parser(
        NAMES[0], aliases=NAMES[1:], help="every chosen drafter on your own prompts against plain decoding: a report"
    )
    p.add_argument("--prompts", required=True, help="a .txt (one per line, or blank-line blocks), .jsonl or .csv file")
    p.add_argument("--out", required=True, help="the HTML report to write (its table goes beside it as .csv)")
    p.add_argument("--drafters", help="comma-separated (default: every drafter that can run with these models)")
    p.add_argument("--target", required=True, help="offline preset, local model folder, or Hub id")
    add_drafter_options(p, with_drafter=False)
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    add_sampling_options(p)
    add_model_options(p)
    add_exact_option(p)
    add_cluster_options(p, "the prompts")


def cmd_workload(args: argparse.Namespace) -> int:
    prepare, out = workload_job(args)
    if args.cluster:  # without Ray: one line, before any model loads; each actor takes one device's bounds
        actors = connect(args.cluster, args.actors)
        prepare = partial(prepare, actors=actors)
    view, run_side = prepare()
    if args.cluster:  # each actor prepares its own models; this process keeps the view and lets its models go
        del run_side
        _run(view, lambda: run_on_cluster(view, prepare, args.cluster, actors, every_s=5))
    else:
        _run(view, lambda: run_workload(view, run_side, every_s=3600))

    html, csv = write_report(view, out)
    print(f"{html}\n{csv}")
    return 0


def workload_job(args: argparse.Namespace) -> tuple[Prepare, Path]:
    """The workload the arguments ask for, checked before any model loads: how to prepare it (models loaded, the
    view and how one side of one prompt is decoded: here, or in each of a cluster's actors) and where its report
    goes."""
    prompts = read_prompts(args.prompts)  # everything cheap is checked before a model loads
    out = _writable(args.out)
    names = drafter_names(args.drafters)
    given = given_options(args, only=set(names))
    fixed = args.gamma is not None
    if args.adaptive is not None and not fixed:
        raise InvalidRequest("--adaptive goes with --gamma; without them each drafter runs at its measured best")
    base = settings_from(args, NO_DRAFTER)  # plain decoding's; each drafter's own follow

    def preferred(k):  # each drafter at the settings it measured best, under the options given
        return k.parse({**dict(k.listing.preferred), **given.get(k.name, {})})

    say = lambda line: print(f"specviz: {line}", file=sys.stderr, flush=True)  # noqa: E731
    ask = pair_ask(args)
    runtime = choose(ask, say)  # chosen once, here: the drafters are checked against it
    rules = EntryRules(preferred, args.target, bool(args.draft), runtime=runtime.runtime)
    chosen = entrants(names, base, fixed, rules)
    check_entrants(chosen, args.drafters is not None, bool(args.draft))
    job = WorkloadJob(
        ask=ask,
        runtime=runtime,
        chat=not args.no_chat,
        prompts=tuple(prompts),
        chosen=tuple(chosen),
        base=base,
        setting=setting_words(fixed, base),
    )
    return partial(prepare, job), out


def _writable(path: str) -> Path:
    out = Path(path)
    if out.suffix.lower() not in (".html", ".htm"):
        raise InvalidRequest(f"--out {path}: the report is an .html file")
    if not out.parent.is_dir():
        raise InvalidRequest(f"--out {path}: there is no folder {str(out.parent)!r}")
    return out


def _run(view, views) -> None:
    """The workload (`views()`: its view as it fills, here or on a cluster), a line on stderr per finished run with
    what is left; Ctrl+C ends it with the runs that finished kept (the report is still written)."""

    said = set()
    began = time.perf_counter()
    try:
        with torch.inference_mode():
            for _ in views():
                for (i, side), cell in view.cells.items():
                    if cell.done and (i, side) not in said:
                        said.add((i, side))
                        print(_line(view, i, side, cell), file=sys.stderr)
    except KeyboardInterrupt:
        view.running = None
        view.finished = True
        view.stopped = True
        view.wall_s = time.perf_counter() - began
        print("stopped: the report holds the runs that finished", file=sys.stderr)


def _line(view, i: int, side: str, cell) -> str:
    left = view.seconds_left()
    rest = "" if left is None else f"; about {duration(left)} left"
    if cell.note:
        return f"prompt {i + 1}/{len(view.prompts)} {side}: {cell.note}{rest}"
    m = summarize(cell.events)
    speed = "" if side == PLAIN else f", {view.speedup(i, side) or 0:.2f}x"
    where = f" [{cell.node}{', retried' * cell.retried}]" if cell.node else ""
    made = f"{m.new_tokens} tokens, {m.tokens_per_s:.1f} tok/s{speed}{where}"
    return f"prompt {i + 1}/{len(view.prompts)} {side}: {made}{rest}"
