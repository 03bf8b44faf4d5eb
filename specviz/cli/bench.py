"""python -m specviz bench: its flags, the plan they make (checked before any model loads), and the run
(specviz/bench/suite.py) written out as bench.json, bench.md and bench.html."""

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..bench.bench_report import html_report, markdown_report
from ..bench.plan import DraftModel, Plan, load_prompts, parse_gammas, parse_numbers
from ..bench.rows import BenchMeta, BenchRow
from ..bench.suite import Bench, brought
from ..drafters.registry import kinds
from ..errors import InvalidRequest, SpecvizError
from ..models.device import resolve_device
from ..models.loading import draft_precision, quiet_transformers
from ..runtimes.runtime_registry import chosen_or_none
from ..settings import AUTO, Settings
from ..workload.ray_shards import ClusterRun, connect
from .flags import (
    PRECISIONS,
    add_cluster_options,
    add_model_options,
    add_option_flags,
    given_options,
)


def add_bench_options(p) -> None:
    names = ",".join(k.name for k in kinds())
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument(
        "--draft",
        default="qwen2.5-coder-0.5b-instruct",
        help="draft model(s), comma-separated (another tokenizer than the target's is bridged)",
    )
    p.add_argument(
        "--methods",
        default="",
        help="drafters to run, from " + names + " (default: every one that can run with the target)",
    )
    p.add_argument("--gammas", default="1-8", help="fixed γ values, e.g. 1-8 or 2,4; adaptive always runs too")
    p.add_argument("--kinds", default="code,extraction,prose,chat", help="prompt kinds from assets/prompts.json")
    p.add_argument("--prompts-per-kind", type=int, default=2)
    p.add_argument("--temperatures", default="0,0.7")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--oracle-alphas", default="0.5,0.8,0.95", help="acceptance rates of the oracle drafter")
    p.add_argument("--repeats", type=int, default=3, help="runs per cell; the median is kept, with the spread")
    p.add_argument("--no-transformers", action="store_true", help="skip transformers' own methods")
    p.add_argument(
        "--exact",
        choices=["on", "off", "both"],
        default="on",
        help="specviz's target in exact mode (on: where it holds, as the app runs it), without it, or each prompt "
        "both ways; transformers always runs the model's own kernels",
    )
    add_model_options(p, several_drafts=True)
    p.add_argument("--out", default="bench-results", help="folder for bench.json, bench.md and bench.html")
    add_cluster_options(p, "each prompt kind")
    add_option_flags(p)  # each drafter's options (--medusa HEADS, --ngram-min N, ...) for the cells that run it


def plan_from(args) -> Plan:
    by_name = {k.name: k for k in kinds()}
    named = bool(args.methods.strip())
    names = [m.strip() for m in args.methods.split(",") if m.strip()] if named else list(by_name)
    if not names or any(m not in by_name for m in names):
        raise InvalidRequest(f"--methods must be some of {','.join(by_name)}, got {args.methods!r}")
    gammas = parse_gammas(args.gammas)
    temperatures = parse_numbers(args.temperatures, "--temperatures", "0,0.7")
    alphas = parse_numbers(args.oracle_alphas, "--oracle-alphas", "0.5,0.8")
    if any(not 0 <= a <= 1 for a in alphas):
        raise InvalidRequest(f"--oracle-alphas must be rates in [0, 1], got {args.oracle_alphas!r}")
    if args.repeats < 1:
        raise InvalidRequest(f"--repeats must be at least 1, got {args.repeats}")
    for t in temperatures:
        Settings(temperature=t, max_new_tokens=args.max_new_tokens)
    prompts = load_prompts([k.strip() for k in args.kinds.split(",")], args.prompts_per_kind)
    given = given_options(args)
    methods = [by_name[m] for m in names]
    options = {
        k.name: k.parse({**dict(k.listing.preferred), **given.get(k.name, {})}) for k in methods
    }  # as the CLI runs them
    for k in list(methods):
        try:
            k.check_for(options[k.name], args.target)  # e.g. Medusa heads for this target, before any model loads
        except SpecvizError as exc:
            if named:
                raise
            methods.remove(k)  # not asked for by name: left out, and said so
            print(f"{k.name}: left out: {exc}", file=sys.stderr, flush=True)
    asked = draft_precision(args.draft_dtype, args.dtype, resolve_device(args.device))  # int8 on a CPU, unless given
    draft_dtypes = [d.strip() for d in asked.split(",") if d.strip()]
    if not draft_dtypes or any(d not in PRECISIONS for d in draft_dtypes):
        raise InvalidRequest(f"--draft-dtype must be some of {','.join(PRECISIONS)}, got {args.draft_dtype!r}")
    drafts = [DraftModel(name.strip(), d) for name in args.draft.split(",") if name.strip() for d in draft_dtypes]
    return Plan(methods, options, gammas, temperatures, alphas, prompts, drafts)


EXACT_MODES = {"on": [True], "off": [False], "both": [True, False]}


@dataclass(frozen=True)
class KindRows:
    """One prompt kind's rows, and where it ran."""

    rows: list[BenchRow]
    exact_lines: list[str]  # what exact mode came to, as its run's lines said it
    device: str


def bench_runner(args, plan: Plan | None = None) -> Callable[[int, Callable[[str], None]], KindRows]:
    """The plan made (unless given) and the models loaded once, here or in each of a cluster's actors; then the rows
    of prompt kind i, its lines said as they come."""
    plan = plan or plan_from(args)
    quiet_transformers()
    bench = Bench(plan, args)
    bench.warm_up()
    shards = plan.shards()

    def run(i: int, say: Callable[[str], None]) -> KindRows:
        rows = bench.shard_rows(shards[i], EXACT_MODES[args.exact], say)
        return KindRows(rows, sorted(bench.exact_lines), str(bench.target.device))

    return run


def on_cluster(args, plan: Plan) -> tuple[list[KindRows], str]:
    """Each prompt kind run whole by one of a Ray cluster's actors (its drafters that remember read its earlier
    prompts in order), its lines printed as they come, tagged with its actor; and what ran where, in words."""
    shards = plan.shards()
    cluster = ClusterRun(len(shards), partial(bench_runner, args), connect(args.cluster, args.actors))
    landed: dict[int, KindRows] = {}
    where: dict[str, list[str]] = {}
    notes: list[str] = []
    for done in cluster.run(every_s=5):
        for line in cluster.heard():
            say(line)
        if done is None:
            continue
        kind = shards[done.shard].kind
        if done.failed:
            notes.append(f"{kind} given up ({done.failed})")
            say(f"[{kind}] {done.failed}")
            continue
        say(f"[actor {done.actor}] {kind}: {cluster.progress('prompt kinds')}" + ", retried" * done.retried)
        for row in done.result.rows:
            row.ran_on = done.where
        landed[done.shard] = done.result
        where.setdefault(done.where, []).append(kind)
        notes += [f"{kind} retried (an actor died under it)"] if done.retried else []
    words = "; ".join([*(f"{actor}: {', '.join(kinds_)}" for actor, kinds_ in sorted(where.items())), *notes])
    return [landed[i] for i in sorted(landed)], f"a Ray cluster of {len(cluster.actors)} actors: {words}"


def cmd_bench(args) -> int:
    asked = chosen_or_none(getattr(args, "runtime", AUTO))
    if asked is not None and not asked.gives.assisted_generation:
        raise InvalidRequest(
            f"bench races specviz against transformers' own assisted generation, which {asked.name} does not run"
            + (f"; {asked.raced_by}" if asked.raced_by else "")
        )
    plan = plan_from(args)
    began = time.perf_counter()
    if args.cluster:  # without Ray: one line, before any model loads
        shards, cluster = on_cluster(args, plan)
    else:
        run = bench_runner(args, plan)
        cluster = ""
        shards = [run(i, say) for i in range(len(plan.shards()))]
    rows = [row for shard in shards for row in shard.rows]
    if not rows:
        raise InvalidRequest(f"--cluster {args.cluster}: no prompt kind finished ({cluster})")
    meta = BenchMeta(
        target=args.target,
        draft=args.draft if any(k.draft_needed(plan.options[k.name]) for k in plan.methods) else None,
        brought=brought(plan, args.target),
        dtype=args.dtype,
        drafts=[f"{d.name} {d.precision}" for d in plan.drafts],
        device=", ".join(sorted({shard.device for shard in shards})),
        max_new_tokens=args.max_new_tokens,
        repeats=args.repeats,
        gammas=plan.gammas,
        methods=[k.name for k in plan.methods],
        prompts=len(plan.prompts),
        minutes=round((time.perf_counter() - began) / 60, 1),
        when=time.strftime("%Y-%m-%d %H:%M"),
        exact="; ".join(sorted({line for shard in shards for line in shard.exact_lines})),
        cluster=cluster,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps({"meta": meta.to_json(), "rows": [r.to_json() for r in rows]}, indent=1))
    report = markdown_report(rows, meta)
    (out / "bench.md").write_text(report + "\n")
    (out / "bench.html").write_text(html_report(rows, meta))
    print(report)
    return 0


def say(line: str) -> None:
    """The run's progress, on stderr: stdout holds the report."""
    print(line, file=sys.stderr, flush=True)
