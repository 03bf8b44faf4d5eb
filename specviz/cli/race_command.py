"""`python -m specviz race --drafters draft,ngram,suffix --prompt ...`: a Grand Prix in the terminal. Plain decoding and
every lane race on one prompt by the race's rule, one live line per lane (a progress bar, tokens/s, speedup, τ, its
place once settled); `--json` prints one object with each lane's metrics and tokens and, greedy, whether they are
plain decoding's; `--trace FILE` records the race for the app's Recorded runs and `snapshot`. Bad input: one
`error:` line, exit 2, before any model loads."""

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from ..analysis.physics import MOVED_MARK, speedup_forbidden
from ..drafters.registry import NO_DRAFTER
from ..errors import InvalidRequest
from ..events import summarize
from ..models import encode_prompt
from ..record import TokenTexts, make_trace
from ..render.grand_prix_lanes import ordinal
from ..runs import lane_runs, parted
from ..runtimes.choice import in_forwards
from ..runtimes.runtime_registry import names as runtime_names
from ..runtimes.runtime_registry import runtime
from ..serving.handoff import recording
from ..settings import check_prompt
from ..trace import Side
from ..views.grand_prix import KIND, starting_grid
from ..views.runtimes import compared, sentence
from ..workload.entrants import lane_of, production
from ..workload.lanes import run_lanes
from .flags import add_lanes_run_options, add_output_options, chosen_lanes, open_models, settings_from

BAR = 20  # characters of a lane's progress bar
REDRAW_EVERY_S = 0.2


def add_race_command(sub) -> None:
    p = sub.add_parser("race", help="a Grand Prix: plain decoding and several drafters race on one prompt, live")
    p.add_argument(
        "--drafters",
        help="the lanes, comma-separated: NAME (its measured best γ), NAME@G (a fixed γ), NAME@aG (adaptive up to G); "
        "the same drafter may race at several; default: every drafter that can run with these models",
    )
    p.add_argument("--prompt", required=True)
    add_lanes_run_options(p)
    add_output_options(
        p, "every lane's metrics and tokens", "also record the race (the app replays it on the lanes' own clocks)"
    )
    p.add_argument(
        "--runtimes",
        metavar="A,B",
        help=f"race every lane on each of these runtimes ({', '.join(runtime_names())}), each beside its own plain "
        "decoding, and say why the same drafter pays in one and not in another; the first is the race's own",
    )


def cmd_race(args) -> int:
    check_prompt(args.prompt)
    if args.trace and not Path(args.trace).resolve().parent.is_dir():
        raise InvalidRequest(f"--trace {args.trace}: there is no folder {str(Path(args.trace).parent)!r}")
    if args.adaptive is not None and args.gamma is None:
        raise InvalidRequest("--adaptive goes with --gamma; without them each lane runs at its measured best")
    base = settings_from(args, NO_DRAFTER)
    others = runtimes_asked(args)
    lanes = chosen_lanes(args, base, preferred_trees=True, others=others)
    view, pair, prompt_ids, models, curves = _race(args, base, lanes, others)
    target = pair.target
    chat = not args.no_chat
    view.production = production(
        lanes, args.target, args.draft or "", args.prompt, chat, pair.same_vocab(), runtime=pair.runs_on
    )
    compared = runtime_sentences(view, pair.runs_on.name, curves)
    for line in compared.values():
        print(f"why: {line}", file=sys.stderr)
    if args.trace:
        _record(args, view, target, prompt_ids, base, models, curves)
    if args.json:
        out = view.summary()
        for lane in out["lanes"]:
            lane["text"] = target.tokenizer.decode(lane["tokens"], skip_special_tokens=True)
        out |= {"prompt_tokens": len(prompt_ids), "models": models.__dict__}
        if compared:
            out |= {"runtimes": compared}
        out |= recording(view.production)  # each lane in transformers, vLLM and SGLang
        print(json.dumps(out, ensure_ascii=False))
    return 0


def runtimes_asked(args) -> list[str]:
    """The runtimes besides the race's own that --runtimes names (none without it); the first becomes --runtime."""
    if not args.runtimes:
        return []
    named = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    wrong = [r for r in named if r not in runtime_names()]
    if wrong or len(set(named)) < 2:
        raise InvalidRequest(
            f"--runtimes names two or more of {', '.join(runtime_names())}, comma-separated, got {args.runtimes!r}"
        )
    args.runtime = named[0]
    return list(dict.fromkeys(named[1:]))


def on_runtime(args, name: str):
    """The flags as another runtime of the race takes them: precisions and exact mode it has not are left to it."""
    own = {"runtime": name}
    gives = runtime(name).gives
    if not gives.precisions:
        own |= {"dtype_named": False, "draft_dtype": None}
    if not gives.exact_mode:
        own |= {"exact": None}
    return argparse.Namespace(**{**vars(args), **own})


def runtime_sentences(view, own: str, curves: dict) -> dict[str, str]:
    """Per drafter raced on several runtimes, why its speedups differ (views/runtimes.py)."""
    return {d: sentence(d, sides) for d, sides in compared(view, own, curves).items()}


def _race(args, base, entrants, others: list[str]):
    """The models loaded once (a pair per runtime raced), then the race, its lines redrawn on stderr as it goes."""

    pair = open_models(args, bool(args.draft))
    on = {r: open_models(on_runtime(args, r), bool(args.draft)) for r in others}
    measured = [p for p in (pair, *on.values()) if p.target.forward_curve]
    curves = {p.runs_on.name: in_forwards(p.target.forward_curve) for p in measured}
    target = pair.target
    prompt_ids = encode_prompt(target, args.prompt, chat=not args.no_chat)
    view = starting_grid([lane_of(e) for e in entrants], base, text_of=TokenTexts(target.tokenizer), exact=pair.exact)
    runs = lane_runs(entrants)
    board = Board(view, sys.stderr)
    began = time.perf_counter()
    try:
        with torch.inference_mode():
            for news in run_lanes(pair, prompt_ids, base, runs, explain=bool(args.trace), others=on):
                view.hear(news)
                view.wall_s = time.perf_counter() - began
                board.draw()
    except KeyboardInterrupt:
        view.stopped = True
    view.stopped = view.stopped or bool(view.running())
    if view.stopped and view.greedy:  # stopped before the lanes were compared with plain: compare what each wrote
        for lane in view.drafted:
            own = view.plain_of(lane)
            if lane.runs and lane.events and lane is not own:
                on_target = on[lane.runtime].target if lane.runtime in on else target
                lane.divergence = parted(on_target, prompt_ids, own.tokens, lane.tokens, base, view.text_of)
    view.finished = True
    view.wall_s = time.perf_counter() - began
    board.draw(final=True)
    return view, pair, prompt_ids, pair.models(pair.exact), curves


class Board:
    """One line per lane on a terminal, redrawn in place as the race goes; elsewhere (a pipe, a log) the lines are
    written once, when the race ends."""

    def __init__(self, view, out):
        self.view = view
        self.out = out
        self.drawn = 0
        self.shown = 0.0
        self.live = out.isatty()

    def draw(self, final: bool = False) -> None:
        now = time.perf_counter()
        if not final and (not self.live or now - self.shown < REDRAW_EVERY_S):
            return
        self.shown = now
        lines = [lane_line(self.view, lane) for lane in self.view.lanes]
        if final:
            lines.append(footer(self.view))
        up = f"\x1b[{self.drawn}F" if self.live and self.drawn else ""
        self.out.write(up + "".join(f"\x1b[2K{line}\n" if self.live else f"{line}\n" for line in lines))
        self.out.flush()
        self.drawn = len(lines)


def lane_line(view, lane) -> str:
    """A lane in one line: name, progress bar, tokens, tokens/s, speedup, τ, and its place or why it does not race."""

    if not lane.runs:
        return f"{lane.name:<12} {lane.note}"
    m = summarize(lane.events)
    share = 1.0 if lane.done else min(1.0, m.new_tokens / max(1, view.max_new_tokens))
    bar = "#" * round(share * BAR) + "." * (BAR - round(share * BAR))
    speedup = view.speedup(lane)
    place = view.place(lane)
    same = view.identical(lane) if view.finished else None
    return (
        f"{lane.name:<12} [{bar}] {m.new_tokens:>4}/{view.max_new_tokens:<4} {m.tokens_per_s:7.2f} tok/s"
        + (f" {speedup:5.2f}x" if speedup and lane is not view.plain else "       ")
        + (f" {MOVED_MARK}" if lane is not view.plain and speedup_forbidden(speedup, m.mean_tokens_per_step) else "")
        + (f"  tau {m.mean_tokens_per_step:4.2f}" if lane is not view.plain else "")
        + (f"  {ordinal(place)}" if place else "")
        + ("" if same is None or lane is view.plain else "  = plain" if same else "  DIFFERS from plain")
    )


def footer(view) -> str:
    state = "stopped: every lane keeps what it wrote" if view.stopped else "done"
    racing = sum(lane.runs for lane in view.lanes)
    return f"{state} in {view.wall_s:.1f} s wall time ({racing} lanes took turns on one device)"


def _record(args, view, target, prompt_ids, base, models, curves=None) -> None:
    trace = make_trace(
        kind=KIND,
        prompt=args.prompt,
        prompt_ids=prompt_ids,
        settings=base,
        models=models,
        sides=[Side(lane.name, lane.words, lane.events, lane.divergence) for lane in view.lanes],
        text_of=view.text_of,
        wall_s=view.wall_s,
        stopped=view.stopped,
        made_with="python -m specviz " + shlex.join(sys.argv[1:])
        if sys.argv[1:2] == ["race"]
        else "python -m specviz race",
        extra={**view.record(), **recording(view.production), **({"runtime_curves": curves} if curves else {})},
    )
    try:
        trace.save(args.trace)
    except OSError as exc:
        raise InvalidRequest(f"cannot write {args.trace}: {exc.strerror or exc}") from None
