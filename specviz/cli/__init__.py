"""Command line: `python -m specviz COMMAND`. Bad input: `error: ...`, exit 2."""

import argparse
import json
import re
import shlex
import sys
from dataclasses import asdict, replace
from pathlib import Path

from .. import reading
from ..analysis.diagnosis import diagnose
from ..drafters.options import Options
from ..drafters.registry import NO_DRAFTER, kind, kinds
from ..errors import InvalidRequest, OfflinePackageError, SpecvizError
from ..events import summarize
from ..models import encode_prompt
from ..models.exact import EXACT_ON
from ..models.loading import quiet_transformers
from ..models.offline import PRESETS, ensure_converted, locate_parts, production_name
from ..render.concurrency_page import concurrency_snapshot_html
from ..render.snapshot import snapshot_html
from ..render.traffic_page import traffic_snapshot_html
from ..runs import Duel
from ..runtimes.choice import check_run
from ..serving.engine_settings import handoff
from ..serving.handoff import Ran, recording
from ..settings import check_prompt
from ..trace import Trace
from ..traffic.traffic_record import ConcurrencyRecord, TrafficRecord, kind_of
from ..workload.entrants import ran_on
from . import train
from .bench import add_bench_options, cmd_bench
from .flags import (
    add_drafter_options,
    add_exact_option,
    add_model_options,
    add_output_options,
    add_sampling_options,
    given_options,
    open_models,
    settings_from,
)
from .race_command import add_race_command, cmd_race
from .traffic_commands import add_concurrency_command, add_traffic_command, cmd_concurrency, cmd_traffic
from .train import add_train_commands
from .workload import NAMES as WORKLOAD
from .workload import add_workload_command, cmd_workload

LONGEST_QUOTED = 80  # characters of a value argparse quotes back in an error, before it is cut


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage dump, and a pasted essay quoted only in part
        raise SystemExit(_fail(re.sub(f"'([^']{{{LONGEST_QUOTED}}})[^']+'", r"'\1…'", message)))


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def drafter_from(args) -> tuple[str, Options | None]:
    """The drafter asked for and its options (those given over what it measured best; None for plain decoding); an
    option of another drafter is an error."""

    needing = [k.name for k in kinds(menu_only=True) if k.needs_draft]
    name = args.drafter or (needing[0] if args.draft else NO_DRAFTER)
    given = given_options(args, only={name}).get(name, {})
    chosen = kind(name) if name != NO_DRAFTER else None
    options = chosen.parse({**dict(chosen.listing.preferred), **given}) if chosen else None
    needs = chosen is not None and chosen.draft_needed(options)
    if needs and not args.draft:
        raise InvalidRequest(f"--drafter {name} needs --draft MODEL")
    if args.draft and not needs:
        raise InvalidRequest(
            f"--draft is not used by --drafter {name}"
            + (" with the options given" if name in needing else f"; only by --drafter {' or '.join(needing)}")
        )
    return name, options


def build_parser() -> Parser:
    parser = Parser(prog="python -m specviz", description="Speculative decoding you can see.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    gen = sub.add_parser("generate", help="generate with plain or speculative decoding")
    gen.add_argument("--target", required=True, help="offline preset, local model folder, or Hub id")
    add_drafter_options(gen)
    gen.add_argument("--prompt", required=True)
    gen.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    add_sampling_options(gen)
    add_model_options(gen, auto=True)
    add_exact_option(gen)
    add_output_options(
        gen,
        "text, ids, steps and metrics",
        "also record the run as a trace (with a drafter, plain decoding runs too, so the trace is a race the app can "
        "replay)",
    )
    gen.add_argument(
        "--diagnose",
        action="store_true",
        help="with a drafter: also run plain decoding, then say why the "
        "speedup came out as it did (as --trace does too)",
    )

    add_workload_command(sub)

    add_race_command(sub)

    add_concurrency_command(sub)
    add_traffic_command(sub)

    snap = sub.add_parser("snapshot", help="a recorded trace as one self-contained HTML page")
    snap.add_argument("trace", help="a trace file (generate, concurrency or traffic --trace, or from the app)")
    snap.add_argument("--out", required=True, help="the HTML page to write")
    snap.add_argument(
        "--side", help="the drafter to show against plain decoding (a comparison trace; default: the first)"
    )

    prep = sub.add_parser("prepare", help="convert offline model packages into the cache once")
    prep.add_argument("presets", nargs="*", help="default: every preset whose packages are installed")
    prep.add_argument(
        "--rebuild",
        action="store_true",
        help="convert again even if the cache holds the model "
        "(a damaged cache entry is replaced once the new one is whole)",
    )

    bench = sub.add_parser(
        "bench",
        help="benchmark plain, every drafter at each γ and adaptive, and transformers' "
        "assisted generation and prompt lookup, in one run",
    )

    add_bench_options(bench)

    add_train_commands(sub, add_model_options)
    return parser


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return _runner(args.command)(args)
    except SpecvizError as exc:
        return _fail(str(exc))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else _fail(str(exc.code))
    except KeyboardInterrupt:
        return 130


def _runner(command: str):
    """The function that runs a command, by the command's name."""
    if command in WORKLOAD:
        return cmd_workload
    if command.startswith("train-"):
        return train.run_trainer
    runners = {
        "generate": cmd_generate,
        "prepare": cmd_prepare,
        "snapshot": cmd_snapshot,
        "race": cmd_race,
        "concurrency": cmd_concurrency,
        "traffic": cmd_traffic,
        "bench": cmd_bench,
    }
    return runners[command]


def cmd_generate(args) -> int:
    drafter_name, options = drafter_from(args)  # validate everything cheap before loading any model
    settings = settings_from(args, drafter_name)
    check_prompt(args.prompt)

    chosen = kind(drafter_name) if drafter_name != NO_DRAFTER else None
    if chosen:
        chosen.check_for(options, args.target)
    pair = open_models(args, bool(chosen and chosen.draft_needed(options)))
    prompt_ids = encode_prompt(pair.target, args.prompt, chat=not args.no_chat)
    duel = Duel(pair, prompt_ids, settings, drafter_name, options, explain=bool(args.trace or args.json))
    shown = ""
    for _ in duel.speculative():
        if not args.json:  # stream the text; hold back a split multi-byte character
            text = pair.target.tokenizer.decode(duel.spec_ids(), skip_special_tokens=True)
            if not text.endswith("\ufffd"):
                sys.stdout.write(text[len(shown) :])
                sys.stdout.flush()
                shown = text
    if chosen and (args.trace or args.diagnose):
        list(duel.plain())
    draft = production_name(args.draft or "") if pair.draft is not None else ""
    target = production_name(args.target)
    production = None
    if chosen:  # the drafter as the serving engines run it, from what its kind declares
        chat = not args.no_chat
        same = pair.same_vocab()
        ran = Ran(drafter_name, settings, options, target, draft, args.prompt, chat, same, serving=chosen.serving)
        production = handoff(replace(ran, **ran_on(pair.runs_on)))
    if args.trace:
        made_with = "python -m specviz " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["generate"] else ""
        extra = recording([production]) if production else None
        trace = duel.trace(args.prompt, pair.models(pair.exact), made_with or "python -m specviz generate", extra)
        trace.save(args.trace)
    if args.json:
        _print_json(duel, production)
    else:
        _print_summary(duel, shown)
    return 0


def _print_json(duel, production=None) -> None:
    """The run as one JSON object on stdout: text, ids, steps, metrics (and the diagnosis, with plain decoding)."""

    events = duel.spec_events
    found = diagnose(duel.plain_events, duel.spec_events) if duel.plain_events else None
    result = {
        "text": duel.pair.target.tokenizer.decode(duel.spec_ids(), skip_special_tokens=True),
        "token_ids": duel.spec_ids(),
        "prompt_tokens": len(duel.prompt_ids),
        "finish": events[-1].finish if events else None,
        "drafter": duel.drafter,
        "lossy": duel.settings.lossy,
        "exact": duel.pair.exact == EXACT_ON,
        "exact_mode": duel.pair.exact,
        "steps": [e.to_json() for e in events],
        "metrics": summarize(events).to_json(),
    }
    if duel.pair.choice is not None:  # --dtype auto: what the device's measured costs chose, and why
        result["precision"] = duel.pair.choice.as_dict()
    runtime = duel.pair.runtime
    if runtime is not None:  # which runtime computed it, why, and the prediction it rests on against this run
        result["runtime"] = runtime.as_dict()
        if runtime.plan is not None and events:
            result["runtime"]["check"] = check_run(runtime.plan, events).as_dict()
    if production is not None:  # the same drafter in transformers, vLLM and SGLang
        result["production"] = production.to_json()
    print(json.dumps({**result, **({"diagnosis": asdict(found)} if found else {})}))


def _print_summary(duel, shown: str) -> None:
    """The rest of the streamed text, then on stderr the run's metrics, α by draft position and (with plain
    decoding run too) why the speedup came out as it did."""

    events = duel.spec_events
    settings = duel.settings
    text = duel.pair.target.tokenizer.decode(duel.spec_ids(), skip_special_tokens=True)
    sys.stdout.write(text[len(shown) :] + "\n")
    metrics = summarize(events)
    finish = events[-1].finish if events else None
    alpha = "-" if metrics.acceptance_rate is None else f"{metrics.acceptance_rate:.2f}"
    print(
        f"[{duel.drafter}{', LOSSY typical acceptance' if settings.lossy else ''}] {metrics.new_tokens} tokens, "
        f"{metrics.tokens_per_s:.2f} tok/s, alpha {alpha}, "
        f"tau {metrics.mean_tokens_per_step:.2f}, prefill {metrics.prefill_s:.2f}s, finish {finish}; {duel.pair.exact}",
        file=sys.stderr,
    )
    if metrics.by_position:
        print(
            "alpha by draft position: "
            + ", ".join(
                f"{k}: {accepted / tested:.2f} ({accepted}/{tested})" if tested else f"{k}: -"
                for k, (tested, accepted) in enumerate(metrics.by_position, 1)
            ),
            file=sys.stderr,
        )
    found = diagnose(duel.plain_events, events) if duel.plain_events else None
    if found:
        print(f"why: {found.line()}", file=sys.stderr)
    runtime = duel.pair.runtime
    if runtime is not None and runtime.plan is not None and events:
        print(f"runtime: {runtime.reason}; {check_run(runtime.plan, events).line()}", file=sys.stderr)


def cmd_snapshot(args) -> int:
    try:
        data = reading.json_file(args.trace)  # read once: a trace, a recorded sweep or a recorded traffic run
    except ValueError as exc:
        return _fail(f"cannot read a trace from {exc}")
    page = None
    kind = kind_of(data)  # a concurrency sweep or traffic (their --trace, or the app's Concurrency tab)
    if kind is ConcurrencyRecord:
        page = concurrency_snapshot_html(ConcurrencyRecord.from_json(data))
    elif kind is TrafficRecord:
        page = traffic_snapshot_html(TrafficRecord.from_json(data))
    if page is not None:
        try:
            Path(args.out).write_text(page, encoding="utf-8")
        except OSError as exc:
            return _fail(f"cannot write {args.out}: {exc.strerror or exc}")
        print(args.out)
        return 0
    trace = Trace.from_json(data)
    if args.side and args.side not in [s.name for s in trace.sides]:
        return _fail(f"the trace has no side {args.side!r}; it has {', '.join(s.name for s in trace.sides)}")
    try:
        Path(args.out).write_text(snapshot_html(trace, args.side), encoding="utf-8")
    except OSError as exc:
        return _fail(f"cannot write {args.out}: {exc.strerror or exc}")
    print(args.out)
    return 0


def cmd_prepare(args) -> int:
    unknown = [n for n in args.presets if n not in PRESETS]
    if unknown:
        return _fail(f"unknown preset {unknown[0]!r}; presets: {', '.join(PRESETS)}")
    names = args.presets or list(PRESETS)
    quiet_transformers()
    for name in names:
        try:
            locate_parts(PRESETS[name])
        except OfflinePackageError as exc:
            if args.presets:
                raise
            print(f"skipped: {exc}", file=sys.stderr)
            continue
        print(f"{name}: {ensure_converted(PRESETS[name], rebuild=args.rebuild)}")
    return 0
