"""python -m specviz bench: its flags, the plan they make (checked before any model loads), and the run
(specviz/bench/suite.py) written out as bench.json, bench.md and bench.html."""

import json
import sys
import time
from pathlib import Path

from ..bench.bench_report import html_report, markdown_report
from ..bench.plan import DraftModel, Plan, load_prompts, parse_gammas, parse_numbers
from ..bench.rows import BenchMeta
from ..bench.suite import Bench, brought
from ..drafters.registry import kinds
from ..errors import InvalidRequest, SpecvizError
from ..runtime import quiet_transformers
from ..settings import Settings
from .flags import PRECISIONS, add_model_options, add_option_flags, given_options


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
    draft_dtypes = [d.strip() for d in (args.draft_dtype or args.dtype).split(",") if d.strip()]
    if not draft_dtypes or any(d not in PRECISIONS for d in draft_dtypes):
        raise InvalidRequest(f"--draft-dtype must be some of {','.join(PRECISIONS)}, got {args.draft_dtype!r}")
    drafts = [DraftModel(name.strip(), d) for name in args.draft.split(",") if name.strip() for d in draft_dtypes]
    return Plan(methods, options, gammas, temperatures, alphas, prompts, drafts)


def cmd_bench(args) -> int:
    plan = plan_from(args)
    quiet_transformers()
    bench = Bench(plan, args)
    bench.warm_up()
    rows, began = [], time.perf_counter()
    seen: dict[str, int] = {}
    for prompt_kind, prompt in plan.prompts:
        seen[prompt_kind] = run_index = seen.get(prompt_kind, -1) + 1  # the prompts of a kind run in file order
        for temperature in plan.temperatures:
            for exact in {"on": [True], "off": [False], "both": [True, False]}[args.exact]:
                rows += bench.prompt_rows(prompt_kind, prompt, temperature, say, run_index, exact)
    meta = BenchMeta(
        target=args.target,
        draft=args.draft if bench.draft else None,
        brought=brought(plan, args.target),
        dtype=args.dtype,
        drafts=[f"{d.name} {d.precision}" for d in plan.drafts],
        device=str(bench.target.device),
        max_new_tokens=args.max_new_tokens,
        repeats=args.repeats,
        gammas=plan.gammas,
        methods=[k.name for k in plan.methods],
        prompts=len(plan.prompts),
        minutes=round((time.perf_counter() - began) / 60, 1),
        when=time.strftime("%Y-%m-%d %H:%M"),
        exact="; ".join(sorted(bench.exact_lines)),
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
