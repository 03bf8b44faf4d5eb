"""`python -m specviz workload --prompts FILE --out report.html` (`compare`, its former name, still works): every
chosen drafter on each of one's own prompts against plain decoding (run once per prompt and shared), models loaded
once, a line per finished run with the time left, then the report and its table as CSV. Bad input: one `error:`
line, exit 2, and no report written."""

import argparse
import sys
import time
from pathlib import Path

import torch

from ..drafters.registry import NO_DRAFTER, kind
from ..drafters.suffix_index import RunMemory
from ..errors import InvalidRequest
from ..events import PLAIN, summarize
from ..models import encode_prompt
from ..record import TokenTexts
from ..render.report import write_report
from ..runs import Duel
from ..workload.entrants import drafter_names, entrants, setting_words
from ..workload.prompts import check_workload, limits_for, read_prompts
from ..workload.run import run_workload, side_runner
from ..workload.view import WorkloadView, duration
from .flags import (
    add_drafter_options,
    add_exact_option,
    add_model_options,
    add_sampling_options,
    check_entrants,
    given_options,
    open_models,
    run_models,
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


def cmd_workload(args: argparse.Namespace) -> int:
    prompts = read_prompts(args.prompts)  # everything cheap is checked before a model loads
    out = _writable(args.out)
    names = drafter_names(args.drafters)
    given = given_options(args, only=set(names))
    fixed = args.gamma is not None
    if args.adaptive is not None and not fixed:
        raise InvalidRequest("--adaptive goes with --gamma; without them each drafter runs at its measured best")
    base = settings_from(args, NO_DRAFTER)  # plain decoding's; each drafter's own follow
    chosen = entrants(
        names,
        base,
        fixed,
        lambda k: k.parse({**dict(k.listing.preferred), **given.get(k.name, {})}),
        args.target,
        bool(args.draft),
    )
    check_entrants(chosen, args.drafters is not None, bool(args.draft))
    view, run_side = _prepare(args, prompts, chosen, base, setting_words(fixed, base))
    _run(view, run_side)

    html, csv = write_report(view, out)
    print(f"{html}\n{csv}")
    return 0


def _writable(path: str) -> Path:
    out = Path(path)
    if out.suffix.lower() not in (".html", ".htm"):
        raise InvalidRequest(f"--out {path}: the report is an .html file")
    if not out.parent.is_dir():
        raise InvalidRequest(f"--out {path}: there is no folder {str(out.parent)!r}")
    return out


def _prepare(args, prompts, chosen, base, setting):
    """The models loaded once, the workload checked against the device's bounds, and how one side of one prompt
    is decoded."""

    pair = open_models(args, bool(args.draft))
    target = pair.target
    ids = [encode_prompt(target, p, chat=not args.no_chat) for p in prompts]
    runnable = [e for e in chosen if e.settings]
    check_workload(prompts, limits_for(target.device.type), sum(map(len, ids)), 1 + len(runnable), base.max_new_tokens)
    text_of = TokenTexts(target.tokenizer)
    view = WorkloadView(
        prompts=prompts,
        contenders=[e.contender for e in chosen],
        greedy=base.greedy,
        setting=setting,
        max_new_tokens=base.max_new_tokens,
        text_of=text_of,
        models=run_models(args, pair),
    )
    by_name = {e.name: e for e in runnable}
    memories = {e.name: RunMemory() for e in runnable if kind(e.name).remembers}  # this workload's earlier prompts

    def decode_one(i, side, plain_ids, memory):  # the report shows no step's detail: none is recorded
        e = by_name.get(side)  # None: plain decoding's side
        asked = (e.settings, side, e.options, memory) if e else (base,)
        duel = Duel(pair, ids[i], *asked, explain=False)
        yield from duel.speculative()
        found = duel.parted(plain_ids, text_of) if e and plain_ids is not None else None
        if found is not None:
            yield found
        return ids[i]

    return view, side_runner(decode_one, memories)


def _run(view, run_side) -> None:
    """The workload, a line on stderr per finished run with what is left; Ctrl+C ends it with the runs that finished
    kept (the report is still written)."""

    said, began = set(), time.perf_counter()
    try:
        with torch.inference_mode():
            for _ in run_workload(view, run_side, every_s=3600):
                for (i, side), cell in view.cells.items():
                    if cell.done and (i, side) not in said:
                        said.add((i, side))
                        print(_line(view, i, side, cell), file=sys.stderr)
    except KeyboardInterrupt:
        view.running, view.finished, view.stopped = None, True, True
        view.wall_s = time.perf_counter() - began
        print("stopped: the report holds the runs that finished", file=sys.stderr)


def _line(view, i: int, side: str, cell) -> str:
    left = view.seconds_left()
    rest = "" if left is None else f"; about {duration(left)} left"
    if cell.note:
        return f"prompt {i + 1}/{len(view.prompts)} {side}: {cell.note}{rest}"
    m = summarize(cell.events)
    speed = "" if side == PLAIN else f", {view.speedup(i, side) or 0:.2f}x"
    return f"prompt {i + 1}/{len(view.prompts)} {side}: {m.new_tokens} tokens, {m.tokens_per_s:.1f} tok/s{speed}{rest}"
