"""The benchmark suite: plain decoding, every drafter at each γ and adaptive, and transformers' own assisted
generation and prompt lookup, on the same models and prompts, in one process and one run.

    python -m specviz bench [--kinds code,extraction,prose,chat] [--temperatures 0,0.7] [--gammas 1-8]
                            [--methods draft,ngram,history,medusa,oracle] [--repeats 3] [--out bench-results]

Per cell: tokens/s, speedup over its own library's plain decoding (end to end, prefill included), α, τ,
speedup ÷ τ, and efficiency = the measured decode speedup ÷ the speedup predicted from the run's own accepted
tokens, drafting seconds and the bare forward cost V(k) of each verify (measured apart, costs.py). A cell is the
median of `repeats` runs, alternating order with its transformers counterpart (this CPU drifts 10–30%), with
the slowest and fastest beside it; plain runs before and after a prompt's cells bracket them and their mean is the
baseline.
Writes bench.json, bench.md and bench.html (plotly) to --out; report.py draws them.
"""

from dataclasses import asdict, dataclass, replace

from ..analysis.diagnosis import diagnose
from ..analysis.theory import iid_speedup, predicted_speedup
from ..drafters.contract import Recipe
from ..drafters.options import Options
from ..drafters.registry import build_drafter, pair_model_options
from ..drafters.suffix_index import RunMemory
from ..engine import make_clock
from ..events import DRAFTED, PLAIN, depth_acceptance
from ..models import encode_prompt
from ..runtimes.pair import PairAsk, open_draft, open_pair
from ..settings import MAX_GAMMA, Settings
from .costs import relative_forward_costs
from .measure import Run, Sides, bracketed_sides, measure, transformers_run, typical
from .plan import DraftModel, Plan, Shard, prompt_label
from .rows import BenchRow, RowKey, at_rate


@dataclass(frozen=True)
class Cell:
    """One drafter at one γ on one prompt and temperature."""

    method: str  # its rows' method: the drafter's name (a set-α tool's with its rate)
    gamma: int | str  # a fixed γ, or "adaptive"
    settings: Settings  # the prompt's, at this γ
    kind: Recipe
    options: Options
    draft: DraftModel | None  # for a drafter that needs a draft model: the one it runs with

    @property
    def label(self) -> str:
        """The method as the log shows it, with the draft model it ran with."""
        return self.method + (f" ({self.draft.name} {self.draft.precision})" if self.draft else "")


@dataclass(frozen=True)
class Measured:
    """A cell's fastest run, beside transformers' counterpart's where one was raced."""

    cell: Cell
    counterpart: str | None  # transformers' method raced against it (its runs are shared by drafters with one)
    best: Sides


@dataclass(frozen=True)
class MemoryKey:
    """Whose earlier runs a drafter that remembers runs drafts from: the prompts of one kind, run in order, at one
    temperature, by one drafter at one γ (never another cell's runs)."""

    prompt_kind: str
    temperature: float
    method: str
    gamma: int | str


NEEDS = ("assisted_generation",)  # what the benchmark races specviz against: the library's own generate()


class Bench:
    """The loaded models and the plan; runs one prompt's cells at a time."""

    def __init__(self, plan: Plan, args):
        self.plan = plan
        self.args = args
        self.hf = not args.no_transformers
        asked = PairAsk(args.target, runtime=args.runtime, dtype=args.dtype, device=args.device, needs=NEEDS)
        self.pair = open_pair(asked)  # its drafts are self.drafts
        self.target = self.pair.target
        self.drafts = {}  # DraftModel -> it, loaded
        if any(k.draft_needed(plan.options[k.name]) for k in plan.methods):
            for d in plan.drafts:
                self.drafts[d] = open_draft(self.pair, d.name, d.precision)
        self.draft = next(iter(self.drafts.values()), None)
        self.clock = make_clock(self.target.device)
        self.exact_lines: set[str] = set()  # what exact mode came to in each pass, as its line says
        self.memories: dict[MemoryKey, RunMemory] = {}
        # the deepest draft each drafter can make (Medusa: its tree); no cell asks for more
        self.longest = {
            k.name: build_drafter(
                k.name, Settings(), None, self.target, self.draft, plan.options[k.name]
            ).profile.longest
            for k in plan.methods
            if not k.listing.sets_alpha
        }

    def ours(self, ids, settings, kind="none", options=None, draft=None, memory=None):
        def run() -> Run:
            return measure(self.target, ids, settings, kind, draft or self.draft, options, memory)

        return run

    def theirs(self, ids, settings, method=None, gamma=None, draft=None):
        def run() -> Run:
            with self.pair.without_exact():  # transformers runs the model's own attention and kernels
                return transformers_run(self.target, ids, settings, method, gamma, draft or self.draft, 3, self.clock)

        return run

    def warm_up(self) -> None:
        warm = encode_prompt(self.target, "Say hi.")
        for k in [None, *[k for k in self.plan.methods if not k.listing.sets_alpha]]:
            name = k.name if k else "none"
            for draft in self.drafts.values() if k and k.draft_needed(self.plan.options[name]) else [self.draft]:
                measure(
                    self.target, warm, Settings(max_new_tokens=8, gamma=2), name, draft, self.plan.options.get(name)
                )
        if self.hf:
            transformers_run(self.target, warm, Settings(max_new_tokens=8), clock=self.clock)

    def cells(self, settings: Settings, plain_ids: list[int]):
        """The cells of one prompt and temperature; a drafter that needs a draft model runs once per draft model
        and precision, a set-α measuring tool (greedy only) once per rate."""
        gammas = self.plan.gammas
        for k in self.plan.methods:
            if k.listing.sets_alpha:
                if not settings.greedy:
                    continue
                variants = [
                    (at_rate(k.name, a), k.parse({"reference": plain_ids, "alpha": a}), None) for a in self.plan.alphas
                ]
            else:
                options = self.plan.options[k.name]
                variants = [(k.name, options, d) for d in (self.drafts if k.draft_needed(options) else [None])]
            deepest = self.longest.get(k.name) or MAX_GAMMA
            for method, options, draft in variants:
                ceiling = max(
                    *gammas, k.listing.prefers("gamma", 0)
                )  # adaptive: up to the drafter's preferred γ, if larger
                for gamma in [*gammas, "adaptive"]:
                    g = min(ceiling, deepest) if gamma == "adaptive" else gamma
                    if g <= deepest:
                        at = replace(settings, gamma=g, adaptive=gamma == "adaptive")
                        yield Cell(method, gamma, at, k, options, draft)

    def plain(self, ids, settings) -> Sides:
        """Plain decoding in both libraries (transformers' where raced), each the median of `repeats` runs."""
        return typical(self.ours(ids, settings), self.theirs(ids, settings) if self.hf else None, self.args.repeats)

    def measure_cells(self, prompt_kind: str, ids, settings: Settings, plain_ids, log) -> list[Measured]:
        """Every cell of one prompt at one temperature, each the median of `repeats` runs beside transformers'
        counterpart (two drafters with one counterpart share its runs)."""
        measured = []
        raced = {}
        for cell in self.cells(settings, plain_ids):
            other = cell.kind.listing.counterpart if self.hf else None
            draft = self.drafts.get(cell.draft)
            key = MemoryKey(prompt_kind, settings.temperature, cell.method, cell.gamma)
            memory = self.memories.setdefault(key, RunMemory(64)) if cell.kind.remembers else None
            theirs_key = (other, cell.gamma, cell.draft, cell.settings)
            theirs = None
            if other and theirs_key not in raced:  # γ "adaptive": transformers at its own default schedule
                theirs = self.theirs(ids, cell.settings, other, None if cell.gamma == "adaptive" else cell.gamma, draft)
            ours = self.ours(ids, cell.settings, cell.kind.name, cell.options, draft, memory)
            best = typical(ours, theirs, self.args.repeats)
            if other:
                best = replace(best, theirs=raced.setdefault(theirs_key, best.theirs))
            if cell.kind.remembers:  # the kept run joins the memory; the other repeats are forgotten
                self.memories[key] = best.ours.memory
            measured.append(Measured(cell, other, best))
            log(
                f"  {cell.label} γ={cell.gamma}: {best.ours.tps:.2f} tok/s (α {_f(best.ours.alpha)}, "
                f"τ {best.ours.tau:.2f})" + (f", {other} {best.theirs.tps:.2f} tok/s" if best.theirs else "")
            )
        return measured

    def prompt_rows(
        self, prompt_kind: str, prompt, temperature: float, log, run_index: int = 0, exact: bool = True
    ) -> list[BenchRow]:
        """Plain runs bracketing every cell of one prompt at one temperature, then the rows they make; specviz's
        target in exact mode as asked, where it holds."""

        line = self.pair.choose_exact(exact)
        self.exact_lines.add(line)
        ids = encode_prompt(self.target, prompt)
        settings = Settings(max_new_tokens=self.args.max_new_tokens, temperature=temperature)
        where = f"[{prompt_kind} #{run_index + 1}, T={temperature:g}, {line}]"
        opening = self.plain(ids, settings)
        log(
            f"{where} {len(ids)} prompt tokens; plain {opening.ours.tps:.2f} tok/s"
            + (f", transformers plain {opening.theirs.tps:.2f} tok/s" if opening.theirs else "")
        )
        measured = self.measure_cells(prompt_kind, ids, settings, opening.ours.ids, log)
        # Plain runs bracket the cells (this CPU drifts over minutes): their mean is the baseline. Each side is
        # the median of `repeats` runs, like every cell.
        closing = self.plain(ids, settings)
        baseline = bracketed_sides(opening, closing)
        plain = baseline.ours
        ks = sorted({*range(1, max(self.plan.gammas) + 2), 12, 17, 25, 33})
        costs = relative_forward_costs(self.target, ids + plain.ids[: len(plain.ids) // 2], ks)
        log(
            f"{where} plain: closing {closing.ours.tps:.2f}, baseline (mean time of opening and closing) "
            f"{plain.tps:.2f} tok/s"
            + (f", transformers plain {baseline.theirs.tps:.2f} tok/s" if baseline.theirs else "")
            + "; V(k)/V(1) at k=2,5,9,17: "
            + ", ".join(f"{costs[k]:.2f}" for k in (2, 5, 9, 17) if k in costs)
        )
        key = RowKey(prompt_kind, prompt_label(prompt), temperature, len(ids), run_index)
        rows = plain_rows(key, baseline, costs, settings.greedy)
        for m in measured:
            cell = self.cell_rows(key, m, baseline, costs, settings.greedy)
            ours = cell[-1]
            theirs = cell[0] if len(cell) > 1 else None
            log(
                f"  {ours.name} γ={m.cell.gamma}: {ours.speedup:.2f}x, c {_f(ours.c)}, efficiency {_f(ours.efficiency)}"
                + (
                    f", {m.counterpart} {theirs.speedup:.2f}x, specviz/transformers {ours.vs_transformers:.2f}"
                    if theirs
                    else ""
                )
            )
            rows += cell
        holds = self.pair.exact_holds()  # where the mode cannot hold, rows carry no mode
        for row in rows:
            row.exact = exact if row.library == "specviz" and holds else None
        return rows

    def shard_rows(self, shard: Shard, exact_modes: list[bool], log) -> list[BenchRow]:
        """One prompt kind's rows: its prompts in order, each at every temperature and exact mode."""
        rows = []
        for run_index, prompt in enumerate(shard.prompts):
            for temperature in self.plan.temperatures:
                for exact in exact_modes:
                    rows += self.prompt_rows(shard.kind, prompt, temperature, log, run_index, exact)
        return rows

    def cell_rows(self, key: RowKey, measured: Measured, baseline: Sides, costs, greedy: bool) -> list[BenchRow]:
        """A cell's row, after its transformers counterpart's where one was raced."""
        cell = measured.cell
        run = measured.best.ours
        theirs = measured.best.theirs
        plain = baseline.ours
        events = run.events
        forward_1 = plain.decode_s / len(plain.ids)  # V(1): the plain run's own time per token
        drafted = sum(len(e.proposed) for e in events)
        drafting = [e for e in events if e.proposed]
        speedup = run.tps / plain.tps
        predicted = predicted_speedup(events, costs, forward_1)
        decode_speedup = plain.decode_s / run.decode_s * len(run.ids) / len(plain.ids)
        found = diagnose(plain.events, events, forward_1)
        draft = dict(
            draft_name=cell.draft.name if cell.draft else None,
            draft_dtype=cell.draft.precision if cell.draft else None,
        )
        row = library_row(
            key,
            "specviz",
            cell.method,
            cell.gamma,
            run,
            speedup=speedup,
            alpha=run.alpha,
            tau=run.tau,
            per_tau=speedup / run.tau,
            predicted=predicted,
            efficiency=decode_speedup / predicted if predicted else None,
            iid=None if cell.gamma == "adaptive" else iid_speedup(events, costs, forward_1, cell.gamma),
            mean_gamma=sum(e.gamma for e in events) / len(events),
            by_depth=depth_acceptance(events, max(self.plan.gammas)),
            same_as_plain=run.ids == plain.ids if greedy else None,
            **draft,
            c=sum(e.draft_s for e in events) / drafted / forward_1 if drafted else None,
            diagnosed=found.predicted if found else None,
            decode_speedup=decode_speedup,
            nodes=sum(e.forward_tokens - 1 for e in drafting) / len(drafting) if drafting else None,
            copied=(sum(e.origin not in (None, *DRAFTED) for e in drafting) / len(drafting) if drafting else None),
            vs_transformers=run.tps / theirs.tps if theirs else None,
        )
        if theirs is None:
            return [row]
        hf_plain = baseline.theirs
        theirs_row = library_row(
            key,
            "transformers",
            measured.counterpart,
            cell.gamma,
            theirs,
            speedup=theirs.tps / hf_plain.tps,
            tau=theirs.tau,
            same_as_plain=theirs.ids == hf_plain.ids if greedy else None,
            **draft,
        )
        return [theirs_row, row]


def library_row(key: RowKey, library: str, method: str, gamma, timed, **figures) -> BenchRow:
    """One library's row for a prompt: the method and γ it ran, the median tokens/s of its repeats and their range,
    and what else was measured of it."""
    return BenchRow(
        **asdict(key),
        method=method,
        gamma=gamma,
        library=library,
        tps=timed.tps,
        tps_range=(timed.low, timed.high),
        **figures,
    )


def plain_rows(key: RowKey, baseline: Sides, costs: dict, greedy: bool) -> list[BenchRow]:
    """Plain decoding's row, and transformers' plain row where it ran: an independent reference, whose greedy
    generate must write what specviz's plain decoding wrote."""
    plain = baseline.ours
    hf_plain = baseline.theirs
    rows = [library_row(key, "specviz", PLAIN, None, plain, speedup=1.0, tau=1.0, verify_costs=costs)]
    if hf_plain is not None:
        rows.append(
            library_row(
                key,
                "transformers",
                "transformers plain",
                None,
                hf_plain,
                speedup=1.0,
                vs_transformers=plain.tps / hf_plain.tps,
                same_as_plain=plain.ids == hf_plain.ids if greedy else None,
            )
        )
    return rows


def brought(plan: Plan, target: str) -> tuple[tuple[str, str | None], ...]:
    """Where each model a drafter loads was found (heads for the target), for the drafters that ran and take it: the
    location given, or those shipped for the target; None where no drafter that ran takes it."""
    found = []
    for spec in pair_model_options():
        takers = [k for k in plan.methods if spec.name in {s.name for s in k.options.specs()}]
        given = getattr(plan.options[takers[0].name], spec.name) if takers else None
        found.append((spec.name, str(given or f"shipped for {target}") if takers else None))
    return tuple(found)


def _f(x) -> str:
    return "–" if x is None else f"{x:.2f}"
