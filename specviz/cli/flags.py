"""Command-line flags that `generate`, `compare` and `bench` share: the model's precision and device, the sampling
settings, and every option any drafter declares (one flag per option, read from the registry), with the check that
an option meets its drafter; and what the parsed flags mean (the run's settings, the draft's precision)."""

import argparse
import os
import sys
from dataclasses import replace

from .. import reading as read
from ..drafters.registry import NO_DRAFTER, kind, kinds, option_owners
from ..errors import InvalidRequest
from ..runtimes.pair import Pair, PairAsk, open_pair
from ..runtimes.runtime_registry import names as runtime_names
from ..runtimes.runtime_registry import runtimes
from ..serving.batch_table import tables_in
from ..settings import ACCEPTANCE_MODES, AUTO, MAX_GAMMA, MAX_NEW_TOKENS, Settings, parse_lane
from ..workload.entrants import EntryRules, across_runtimes, lane_entrants

PRECISIONS = ("bfloat16", "float32", "int8")  # int8: dynamic int8 Linear layers, CPU


class Named(argparse.Action):
    """Stores the value and notes that it was named on the command line (`<dest>_named`), not taken from a default
    or the environment."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_named", True)


def add_model_options(p: argparse.ArgumentParser, several_drafts: bool = False, auto: bool = False) -> None:
    p.add_argument(
        "--dtype",
        action=Named,
        default=(os.environ.get("SPECVIZ_DTYPE") or AUTO) if auto else "bfloat16",
        choices=[AUTO, *PRECISIONS] if auto else list(PRECISIONS),
        help=(
            "the target's precision (default: $SPECVIZ_DTYPE, else auto): auto measures this device's kernels once "
            "and picks the "
            "precision whose verify forward is cheapest here (int8 on an AVX2 CPU, bfloat16 with AMX or on a GPU); "
            "int8 (CPU) is an int8 target, another model, exact in its own right"
            if auto
            else "the target's precision (off a CPU the draft's too, unless --draft-dtype): int8 (CPU) is an int8 "
            "target"
        ),
    )
    p.add_argument(
        "--draft-dtype",
        action=Named,
        choices=None if several_drafts else list(PRECISIONS),
        help="the draft model's precision (default, as for every command: int8 on a CPU, where it measured "
        "fastest, else --dtype); an int8 draft costs less per token, and the target alone still decides the output"
        + ("; several, comma-separated, run the draft model at each" if several_drafts else ""),
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument(
        "--runtime",
        default=os.environ.get("SPECVIZ_RUNTIME") or AUTO,
        choices=[AUTO, *runtime_names()],
        help="what computes the models (default: $SPECVIZ_RUNTIME, else auto): "
        + "; ".join(r.help_line() for r in runtimes())
        + "; auto measures those that can run the pair on this device and takes the fastest (a --dtype other than "
        "auto: one that has that precision)",
    )


def add_output_options(p: argparse.ArgumentParser, printed: str, recorded: str) -> None:
    """--json (what the run prints as one JSON object) and --trace FILE (the run recorded), as every command that
    runs something spells them."""
    p.add_argument("--json", action="store_true", help=f"print one JSON object: {printed}")
    p.add_argument("--trace", metavar="FILE", help=recorded)


def add_exact_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--exact",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="exact mode (default: on where it holds, a bfloat16 or int8 target on a CPU, unless --dtype auto "
        "measured it too costly here): the target computes every token as one-token decoding does, so greedy "
        "speculative output is plain decoding's bit for bit; --no-exact runs the model's own attention and "
        "kernels, where a near tie can round apart",
    )


def add_option_flags(p: argparse.ArgumentParser) -> None:
    """One flag per drafter option (unset: the drafter's default)."""

    for takers, spec in option_owners():
        if spec.cli:
            p.add_argument(
                spec.cli_flag,
                dest=spec.name,
                default=None,
                type=int if spec.integer else str,
                choices=list(spec.choices) if spec.choices and spec.strict else None,
                help=f"{', '.join(k.name for k in takers)}: {spec.help} (default {spec.default!r})",
            )


def given_options(args, only: set[str] | None = None) -> dict[str, dict]:
    """{drafter name: {option: value}} for the option flags that were given. With `only`, an option of a drafter
    outside it is an error naming the drafter it belongs to."""

    given: dict[str, dict] = {}
    for takers, spec in option_owners():
        value = getattr(args, spec.name, None)
        if value is None:
            continue
        names = [k.name for k in takers]
        if only is not None and not only & set(names):
            raise InvalidRequest(
                f"{spec.cli_flag} is only used by --drafter {' or '.join(names)}, not {' or '.join(sorted(only))}"
            )
        for name in names:
            given.setdefault(name, {})[spec.name] = value
    return given


def add_sampling_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-new-tokens", type=int, default=128, help=f"1..{MAX_NEW_TOKENS}")
    p.add_argument(
        "--gamma",
        type=int,
        help=f"draft tokens per step, 1..{MAX_GAMMA} (with --adaptive: the most); "
        "default: the drafter's measured best (draft, hybrid: 8 with --adaptive), else 4",
    )
    p.add_argument(
        "--adaptive",
        action=argparse.BooleanOptionalAction,
        help="choose the draft length (a tree's size) "
        "every step from measured acceptance and costs; default: on for the draft model and the hybrid, "
        "where it measured fastest",
    )
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=0, help="0 disables")
    p.add_argument("--top-p", type=float, default=1.0, help="in (0, 1]; 1 disables")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--acceptance",
        default="lossless",
        choices=list(ACCEPTANCE_MODES),
        help="when sampling: lossless (rejection sampling keeps the target's distribution), typical "
        "(Medusa's: accepts any plausible token, lossy by design), greedy (exact, temperature 0 only)",
    )


def add_drafter_options(p: argparse.ArgumentParser, with_drafter: bool = True) -> None:
    """--drafter (unless `with_drafter` is False), --draft, and every option any drafter declares."""

    offered = kinds(menu_only=True)
    if with_drafter:
        p.add_argument(
            "--drafter",
            choices=[NO_DRAFTER, *(k.name for k in offered)],
            help="; ".join(
                [f"{NO_DRAFTER} = plain decoding (default unless --draft is given)"]
                + [f"{k.name} = {k.listing.summary}" for k in offered]
            ),
        )
    p.add_argument(
        "--draft", help="draft model, for --drafter " + " or ".join(k.name for k in offered if k.needs_draft)
    )
    add_option_flags(p)


def settings_from(args, drafter: str) -> Settings:
    """The run's settings; γ and adaptive, when not given, as the drafter measured best (plain: 4, fixed)."""

    chosen = kind(drafter) if drafter != NO_DRAFTER else None

    def prefers(name: str, default):
        return chosen.listing.prefers(name, default) if chosen else default

    return Settings(
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        acceptance=args.acceptance,
        gamma=args.gamma if args.gamma is not None else prefers("gamma", Settings.gamma),
        adaptive=args.adaptive if args.adaptive is not None else prefers("adaptive", Settings.adaptive),
    )


def open_models(args, with_draft: bool) -> Pair:
    """The pair the flags name (runtimes/pair.Pair): on the runtime --runtime names or auto measured fastest, the
    target in exact mode as --exact asks, where it holds, and, with `with_draft`, the draft model at its precision
    (--draft-dtype, else the fastest on the target's device). What the runtime measured is said on stderr."""
    say = lambda line: print(f"specviz: {line}", file=sys.stderr, flush=True)  # noqa: E731
    pair = open_pair(pair_ask(args, with_draft), say)
    args.dtype = pair.target.precision if pair.runs_on.gives.precisions else args.dtype  # what auto chose
    return pair


def pair_ask(args, with_draft: bool = True, **changes) -> PairAsk:
    """The pair the flags ask for, as plain data: --dtype and --draft-dtype insist where named, and so does --exact (a
    runtime without precisions or exact mode refuses them); `changes`: fields set otherwise."""
    named_dtype = getattr(args, "dtype_named", False) and args.dtype != AUTO
    draft = (args.draft or "") if with_draft else ""
    ask = PairAsk(
        target=args.target,
        draft=draft,
        runtime=getattr(args, "runtime", AUTO),
        dtype=args.dtype,
        draft_dtype=getattr(args, "draft_dtype", None) or "",
        exact=getattr(args, "exact", None),
        insists=named_dtype or bool(getattr(args, "draft_dtype", None)),
        device=args.device,
    )
    return replace(ask, **changes)


def check_entrants(chosen, asked: bool, draft_given: bool) -> None:
    """A run of several drafters (workload, race): a drafter named in --drafters that these models cannot run is an
    error, so is a run where none can, and a --draft that none of them uses."""

    refused = [e for e in chosen if e.settings is None]
    if asked and refused:
        raise InvalidRequest(
            f"--drafters {refused[0].name}: {refused[0].contender.note.removeprefix('not available: ')}"
        )
    if not any(e.settings for e in chosen):
        raise InvalidRequest("none of the drafters can run with these models")
    if draft_given and not any(e.settings and kind(e.drafter).draft_needed(e.options) for e in chosen):
        raise InvalidRequest("--draft is not used by any of the drafters chosen")


def add_lanes_run_options(p: argparse.ArgumentParser, target_required: bool = True) -> None:
    """What a command that runs plain decoding beside several lanes (race, concurrency) takes besides its own flags:
    the target, the drafters' options, the chat template, the sampling settings, the models and exact mode."""

    p.add_argument("--target", required=target_required, help="offline preset, local model folder, or Hub id")
    add_drafter_options(p, with_drafter=False)
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    add_sampling_options(p)
    add_model_options(p, auto=True)
    add_exact_option(p)


def add_table_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table", metavar="FILE", help="what a NAME@table lane follows: a run recorded with --trace "
                   "(its vLLM table per drafter) or a vLLM speculative config holding such a table")  # fmt: skip


def read_tables(path: str | None) -> dict[str, tuple]:
    """The tables of γ by batch size in --table FILE ({} without it); one line naming the file where it holds none."""
    if not path:
        return {}
    try:
        return tables_in(read.json_file(path))
    except ValueError as exc:
        raise InvalidRequest(f"--table: cannot read a table of γ by batch size from {path}: {exc}") from None


def chosen_lanes(args, base: Settings, preferred_trees: bool, tables: dict | None = None, others=()) -> list:
    """The lanes --drafters names (workload/entrants.Entrant; none named: every drafter), at --gamma where given,
    each with the option flags given for its drafter and, with `preferred_trees`, the tree shape it measured best;
    NAME@table lanes from `tables` (None: a command that runs none); refused in one line where check_entrants
    refuses them."""

    names = [parse_lane(n).drafter for n in (args.drafters or "").split(",") if n.strip()]
    given = given_options(args, only=set(names) if names else None)

    def options(k):
        preferred = dict(k.listing.preferred) if preferred_trees else {}
        return k.parse({**preferred, **given.get(k.name, {})})

    no_table = "give --table FILE: a run recorded with --trace, or a vLLM speculative config"
    rules = EntryRules(options, args.target, bool(args.draft), tables, no_table, getattr(args, "runtime", AUTO))
    chosen = lane_entrants(args.drafters, base, args.gamma is not None, rules)
    check_entrants(chosen, bool(args.drafters), bool(args.draft))
    return across_runtimes(chosen, base, rules, others) if others else chosen


def add_cluster_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--cluster",
        metavar="local|ADDRESS",
        help=f'run {what} on a Ray cluster: "local" starts one here, else its address (needs specviz[cluster])',
    )
    p.add_argument("--actors", type=int, help="with --cluster: how many actors (default: one per GPU, else per node)")
