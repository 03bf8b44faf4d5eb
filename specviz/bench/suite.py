"""The benchmark suite: plain decoding, every drafter at each γ and adaptive, and transformers' own assisted
generation and prompt lookup, on the same models and prompts, in one process and one run.

    python -m specviz bench [--kinds code,extraction,prose,chat] [--temperatures 0,0.7] [--gammas 1-8]
                            [--methods draft,ngram,history,medusa,oracle] [--repeats 2] [--out bench-results]

Per cell: tokens/s, speedup over its own library's plain decoding (end to end, prefill included), α, τ,
speedup ÷ τ, and efficiency = the measured decode speedup ÷ the speedup predicted from the run's own accepted
tokens, drafting seconds and the bare forward cost V(k) of each verify (measured apart, costs.py). A cell is the
fastest of `repeats` runs, alternating order with its transformers counterpart (this CPU drifts 10–30%);
plain runs before and after a prompt's cells bracket them and their mean is the baseline.
Writes bench.json, bench.md and bench.html (plotly) to --out; report.py draws them.
"""

import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..diagnosis import diagnose
from ..drafters.kinds import DrafterKind
from ..drafters.registry import build_drafter, kind, kinds
from ..drafters.suffix_index import DRAFTED, RunMemory
from ..errors import InvalidRequest
from ..events import depth_acceptance
from ..flags import PRECISIONS, add_model_options, add_option_flags, given_options
from ..runtime import ASSETS
from ..settings import MAX_GAMMA, Settings
from ..theory import iid_speedup, predicted_speedup
from .rows import COUNTERPART, BenchRow
from .runs import bracketed, fastest, measure, tps, transformers_run

ORACLE = "oracle"  # the set-acceptance-rate drafter: run once per --oracle-alphas rate, greedy only


def add_bench_options(p) -> None:
    names = ",".join(k.name for k in kinds())
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument(
        "--draft",
        default="qwen2.5-coder-0.5b-instruct",
        help="draft model(s), comma-separated (another tokenizer than the target's is bridged)",
    )
    p.add_argument("--methods", default=names, help="drafters to run, from " + names)
    p.add_argument("--gammas", default="1-8", help="fixed γ values, e.g. 1-8 or 2,4; adaptive always runs too")
    p.add_argument("--kinds", default="code,extraction,prose,chat", help="prompt kinds from assets/prompts.json")
    p.add_argument("--prompts-per-kind", type=int, default=2)
    p.add_argument("--temperatures", default="0,0.7")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--oracle-alphas", default="0.5,0.8,0.95", help="acceptance rates of the oracle drafter")
    p.add_argument("--repeats", type=int, default=2, help="runs per cell, fastest kept")
    p.add_argument("--no-transformers", action="store_true", help="skip transformers' own methods")
    add_model_options(p, several_drafts=True)
    p.add_argument("--out", default="bench-results", help="folder for bench.json, bench.md and bench.html")
    add_option_flags(p)  # each drafter's options (--medusa HEADS, --ngram-max N, ...) for the cells that run it


def parse_gammas(text: str) -> list[int]:
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-"))
            gammas = list(range(lo, hi + 1))
        else:
            gammas = [int(x) for x in text.split(",")]
    except ValueError:
        raise InvalidRequest(f"--gammas must look like 1-8 or 2,4,6, got {text!r}") from None
    for g in gammas:
        Settings(gamma=g)  # same range check as everywhere else
    if not gammas:
        raise InvalidRequest("--gammas selects nothing")
    return gammas


def parse_numbers(text: str, flag: str, example: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise InvalidRequest(f"{flag} must look like {example}, got {text!r}") from None


CONTEXT = "context-"  # a kind "context-N": one prompt of about N tokens, for the sweep over prompt length
WORDS_PER_TOKEN = 0.75  # English prose in the Qwen and SmolLM2 tokenizers, near enough to aim at a length


def load_prompts(kinds_: list[str], per_kind: int) -> list[tuple[str, object]]:
    """(kind, prompt) pairs; a prompt is a text or, for chat, a list of messages ending with the user's turn."""
    table = json.loads((ASSETS / "prompts.json").read_text())
    unknown = [k for k in kinds_ if k not in table and not _context_length(k)]
    if unknown:
        raise InvalidRequest(
            f"unknown prompt kind {unknown[0]!r}; kinds: {', '.join(table)}, or {CONTEXT}N (a prompt of about N tokens)"
        )
    return [
        (k, context_prompt(table, _context_length(k))) if _context_length(k) else (k, prompt)
        for k in kinds_
        for prompt in table.get(k, [None])[:per_kind]
    ]


def _context_length(kind: str) -> int:
    tail = kind[len(CONTEXT) :] if kind.startswith(CONTEXT) else ""
    return int(tail) if tail.isdigit() and int(tail) > 0 else 0


def context_prompt(table: dict, tokens: int) -> str:
    """About `tokens` tokens of the shipped articles and passages, then a request to continue them: decoding then
    attends over a context of that length, as after a long document or a long chat."""
    source = " ".join(p for kind in ("summarization", "rag") for p in table[kind]).split()
    words = max(1, round(tokens * WORDS_PER_TOKEN) - 30)  # the chat template and the request take ~40 tokens
    text = " ".join((source * (words // len(source) + 1))[:words])
    return f"{text}\n\nContinue the text above with one more paragraph in the same style."


def prompt_label(prompt) -> str:
    return (prompt if isinstance(prompt, str) else f"[{len(prompt)} turns] " + prompt[-1]["content"])[:60]


@dataclass
class Plan:
    """The flags, checked before any model loads."""

    methods: list[DrafterKind]
    options: dict  # drafter name -> its Options
    gammas: list[int]
    temperatures: list[float]
    alphas: list[float]
    prompts: list[tuple[str, object]]
    drafts: list[tuple[str, str]]  # (draft model, precision): the draft-model drafter runs with each


def plan_from(args) -> Plan:
    by_name = {k.name: k for k in kinds()}
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
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
    options = {k.name: k.parse({**dict(k.preferred), **given.get(k.name, {})}) for k in methods}  # as the CLI runs them
    for k in methods:
        k.check_for(options[k.name], args.target)  # e.g. Medusa heads for this target, before any model loads
    draft_dtypes = [d.strip() for d in (args.draft_dtype or args.dtype).split(",") if d.strip()]
    if not draft_dtypes or any(d not in PRECISIONS for d in draft_dtypes):
        raise InvalidRequest(f"--draft-dtype must be some of {','.join(PRECISIONS)}, got {args.draft_dtype!r}")
    drafts = [(name.strip(), d) for name in args.draft.split(",") if name.strip() for d in draft_dtypes]
    return Plan(methods, options, gammas, temperatures, alphas, prompts, drafts)


class Bench:
    """The loaded models and the plan; runs one prompt's cells at a time."""

    def __init__(self, plan: Plan, args):
        from ..engine import make_clock
        from ..models import load_model
        from ..models.vocabulary import check_draft_fits

        self.plan, self.args, self.hf = plan, args, not args.no_transformers
        self.target = load_model(args.target, args.dtype, args.device)
        self.drafts = {}  # (draft model, precision) -> it, loaded
        if any(k.draft_needed(plan.options[k.name]) for k in plan.methods):
            for name, precision in plan.drafts:
                self.drafts[name, precision] = load_model(name, precision, args.device)
                check_draft_fits(self.target, self.drafts[name, precision])
        self.draft = next(iter(self.drafts.values()), None)
        self.clock = make_clock(self.target.device)
        # earlier runs, for drafters that remember them: one memory per kind, temperature, drafter and γ, so the
        # prompts of a kind, run in order, can draft from the ones before (and a cell never from another cell's runs)
        self.memories: dict[tuple, RunMemory] = {}
        # the deepest draft each drafter can make (Medusa: its tree); no cell asks for more
        self.longest = {
            k.name: build_drafter(k.name, Settings(), None, self.target, self.draft, plan.options[k.name]).longest
            for k in plan.methods
            if k.name != ORACLE
        }

    def ours(self, ids, settings, kind="none", options=None, draft=None, memory=None):
        return lambda: measure(self.target, ids, settings, kind, draft or self.draft, options, memory)

    def theirs(self, ids, settings, method=None, gamma=None, draft=None):
        return lambda: transformers_run(self.target, ids, settings, method, gamma, draft or self.draft, 3, self.clock)

    def warm_up(self) -> None:
        from ..models import encode_prompt

        warm = encode_prompt(self.target, "Say hi.")
        for k in [None, *[k for k in self.plan.methods if k.name != ORACLE]]:
            name = k.name if k else "none"
            for draft in self.drafts.values() if k and k.draft_needed(self.plan.options[name]) else [self.draft]:
                measure(
                    self.target, warm, Settings(max_new_tokens=8, gamma=2), name, draft, self.plan.options.get(name)
                )
        if self.hf:
            transformers_run(self.target, warm, Settings(max_new_tokens=8), clock=self.clock)

    def cells(self, settings: Settings, plain_ids: list[int]):
        """(row name, γ label, its settings, drafter name, options, (draft model, precision) or None) for one prompt
        and temperature; a drafter that needs a draft model runs once per draft model and precision."""
        gammas = self.plan.gammas
        for k in self.plan.methods:
            if k.name == ORACLE:
                if not settings.greedy:
                    continue
                variants = [
                    (f"oracle α={a:g}", k.parse({"reference": plain_ids, "alpha": a}), None) for a in self.plan.alphas
                ]
            else:
                options = self.plan.options[k.name]
                variants = [(k.name, options, d) for d in (self.drafts if k.draft_needed(options) else [None])]
            deepest = self.longest.get(k.name) or MAX_GAMMA
            for name, options, precision in variants:
                ceiling = max(*gammas, k.prefers("gamma", 0))  # adaptive: up to the drafter's preferred γ, if larger
                for gamma in [*gammas, "adaptive"]:
                    g = min(ceiling, deepest) if gamma == "adaptive" else gamma
                    if g <= deepest:
                        at = replace(settings, gamma=g, adaptive=gamma == "adaptive")
                        yield name, gamma, at, k.name, options, precision

    def prompt_rows(self, kind_name: str, prompt, temperature: float, log, run_index: int = 0) -> list[BenchRow]:
        """Plain runs bracketing every cell of one prompt at one temperature, then the rows they make."""
        from ..models import encode_prompt
        from .costs import relative_forward_costs

        ids = encode_prompt(self.target, prompt)
        settings = Settings(max_new_tokens=self.args.max_new_tokens, temperature=temperature)
        plain_runs = lambda: {
            "specviz": self.ours(ids, settings),
            **({"hf": self.theirs(ids, settings)} if self.hf else {}),
        }  # noqa: E731
        opening = fastest(plain_runs(), self.args.repeats)
        log(
            f"[{kind_name} #{run_index + 1}, T={temperature:g}] {len(ids)} prompt tokens; plain {tps(opening['specviz']):.2f} tok/s"
            + (f", transformers plain {tps(opening['hf']):.2f} tok/s" if self.hf else "")
        )
        measured, raced = [], {}
        for name, gamma, at, drafter, options, precision in self.cells(settings, opening["specviz"]["ids"]):
            other = COUNTERPART.get(drafter) if self.hf else None
            draft = self.drafts.get(precision)
            remembers = kind(drafter).remembers
            memory = (
                self.memories.setdefault((kind_name, temperature, name, gamma), RunMemory(64)) if remembers else None
            )
            fns = {"specviz": self.ours(ids, at, drafter, options, draft, memory)}
            theirs_key = (other, gamma, precision, at)  # two drafters with one counterpart share its runs
            if other and theirs_key not in raced:  # γ "adaptive": transformers at its own default schedule
                fns["hf"] = self.theirs(ids, at, other, None if gamma == "adaptive" else gamma, draft)
            best = fastest(fns, self.args.repeats)
            if other:
                best["hf"] = raced.setdefault(theirs_key, best.get("hf"))
            if remembers:  # the kept run joins the memory; the repeats that lost are forgotten
                self.memories[kind_name, temperature, name, gamma] = best["specviz"]["memory"]
            measured.append((name, gamma, other, best, precision))
            name = name + (f" ({' '.join(precision)})" if precision else "")
            log(
                f"  {name} γ={gamma}: {tps(best['specviz']):.2f} tok/s (α {_f(best['specviz']['alpha'])}, "
                f"τ {best['specviz']['tau']:.2f})" + (f", {other} {tps(best['hf']):.2f} tok/s" if "hf" in best else "")
            )
        # Plain runs bracket the cells (this CPU drifts over minutes): their mean is the baseline. Each side is
        # the fastest of `repeats` runs, like every cell; the faster of the two would be a best of 2·repeats.
        closing = fastest(plain_runs(), self.args.repeats)
        plain = bracketed(opening["specviz"], closing["specviz"])
        hf_plain = bracketed(opening["hf"], closing["hf"]) if self.hf else None
        ks = sorted({*range(1, max(self.plan.gammas) + 2), 12, 17, 25, 33})
        costs = relative_forward_costs(self.target, ids + plain["ids"][: len(plain["ids"]) // 2], ks)
        log(
            f"[{kind_name} #{run_index + 1}, T={temperature:g}] plain: closing {tps(closing['specviz']):.2f}, baseline "
            f"(mean time of opening and closing) {tps(plain):.2f} tok/s"
            + (f", transformers plain {tps(hf_plain):.2f} tok/s" if hf_plain else "")
            + "; V(k)/V(1) at k=2,5,9,17: "
            + ", ".join(f"{costs[k]:.2f}" for k in (2, 5, 9, 17) if k in costs)
        )
        common = dict(
            kind=kind_name,
            prompt=prompt_label(prompt),
            temperature=temperature,
            prompt_tokens=len(ids),
            run_index=run_index,
        )
        rows = [
            BenchRow(
                **common,
                method="plain",
                gamma=None,
                library="specviz",
                tps=tps(plain),
                speedup=1.0,
                tau=1.0,
                verify_costs=costs,
            )
        ]
        if hf_plain is not None:
            # An independent reference: transformers' own greedy generate must write what specviz's plain decoding wrote.
            rows.append(
                BenchRow(
                    **common,
                    method="transformers plain",
                    gamma=None,
                    library="transformers",
                    tps=tps(hf_plain),
                    speedup=1.0,
                    vs_transformers=tps(plain) / tps(hf_plain),
                    same_as_plain=plain["ids"] == hf_plain["ids"] if settings.greedy else None,
                )
            )
        for name, gamma, other, best, precision in measured:
            rows += self._cell_rows(
                common, name, gamma, other, best, plain, hf_plain, costs, settings.greedy, precision
            )
            log(
                f"  {rows[-1].name} γ={gamma}: {rows[-1].speedup:.2f}x, c {_f(rows[-1].c)}, efficiency {_f(rows[-1].efficiency)}"
                + (
                    f", {other} {rows[-2].speedup:.2f}x, specviz/transformers {rows[-1].vs_transformers:.2f}"
                    if "hf" in best
                    else ""
                )
            )
        return rows

    def _cell_rows(self, common, name, gamma, other, best, plain, hf_plain, costs, greedy, precision) -> list[BenchRow]:
        run, events = best["specviz"], best["specviz"]["events"]
        forward_1 = plain["decode_s"] / len(plain["ids"])  # V(1): the plain run's own time per token
        drafted = sum(len(e.proposed) for e in events)
        drafting = [e for e in events if e.proposed]
        speedup = tps(run) / tps(plain)
        predicted = predicted_speedup(events, costs, forward_1)
        decode_speedup = plain["decode_s"] / run["decode_s"] * len(run["ids"]) / len(plain["ids"])
        found = diagnose(plain["events"], events, forward_1)
        row = BenchRow(
            **common,
            method=name,
            gamma=gamma,
            library="specviz",
            tps=tps(run),
            speedup=speedup,
            alpha=run["alpha"],
            tau=run["tau"],
            per_tau=speedup / run["tau"],
            predicted=predicted,
            efficiency=decode_speedup / predicted if predicted else None,
            iid=None if gamma == "adaptive" else iid_speedup(events, costs, forward_1, gamma),
            mean_gamma=sum(e.gamma for e in events) / len(events),
            by_depth=depth_acceptance(events, max(self.plan.gammas)),
            same_as_plain=run["ids"] == plain["ids"] if greedy else None,
            draft_name=precision[0] if precision else None,
            draft_dtype=precision[1] if precision else None,
            c=sum(e.draft_s for e in events) / drafted / forward_1 if drafted else None,
            diagnosed=found.predicted if found else None,
            decode_speedup=decode_speedup,
            nodes=sum(e.forward_tokens - 1 for e in drafting) / len(drafting) if drafting else None,
            copied=(sum(e.origin not in (None, *DRAFTED) for e in drafting) / len(drafting) if drafting else None),
        )
        if "hf" not in best:
            return [row]
        row.vs_transformers = tps(run) / tps(best["hf"])
        theirs = BenchRow(
            **common,
            method=other,
            gamma=gamma,
            library="transformers",
            tps=tps(best["hf"]),
            speedup=tps(best["hf"]) / tps(hf_plain),
            same_as_plain=best["hf"]["ids"] == hf_plain["ids"] if greedy else None,
            draft_name=precision[0] if precision else None,
            draft_dtype=precision[1] if precision else None,
        )
        return [theirs, row]


def cmd_bench(args) -> int:
    from ..runtime import quiet_transformers
    from .report import html_report, markdown_report

    plan = plan_from(args)
    quiet_transformers()
    bench = Bench(plan, args)
    bench.warm_up()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    rows, began = [], time.perf_counter()
    seen: dict[str, int] = {}
    for kind_name, prompt in plan.prompts:
        seen[kind_name] = run_index = seen.get(kind_name, -1) + 1  # the prompts of a kind run in file order
        for temperature in plan.temperatures:
            rows += bench.prompt_rows(kind_name, prompt, temperature, log, run_index)
    medusa = plan.options.get("medusa")
    heads = None if medusa is None else str(medusa.medusa or f"shipped for {args.target}")
    meta = {
        "target": args.target,
        "draft": args.draft if bench.draft else None,
        "medusa": heads,
        "dtype": args.dtype,
        "drafts": [f"{n} {d}" for n, d in plan.drafts],
        "device": str(bench.target.device),
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "gammas": plan.gammas,
        "methods": [k.name for k in plan.methods],
        "prompts": len(plan.prompts),
        "minutes": round((time.perf_counter() - began) / 60, 1),
        "when": time.strftime("%Y-%m-%d %H:%M"),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps({"meta": meta, "rows": [r.to_json() for r in rows]}, indent=1))
    report = markdown_report(rows, meta)
    (out / "bench.md").write_text(report + "\n")
    (out / "bench.html").write_text(html_report(rows, meta))
    print(report)
    return 0


def _f(x) -> str:
    return "–" if x is None else f"{x:.2f}"
