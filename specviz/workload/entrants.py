"""Which drafters a workload runs, and how: each chosen drafter with its options and its settings (the γ and adaptive
choice it measured best, unless the caller fixes γ for all), or the reason it cannot run with these models. The CLI
and the app's server both ask here, before any model is loaded."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from ..drafters.contract import Recipe
from ..drafters.options import Options
from ..drafters.registry import kind, kinds
from ..errors import InvalidRequest, SpecvizError
from ..events import PLAIN
from ..models.offline import production_name
from ..runtimes.runtime_registry import chosen_or_none
from ..serving.batch_table import ANY_DRAFTER
from ..serving.engine_settings import handoff
from ..serving.handoff import Ran
from ..settings import AUTO, Settings, mode_text, parse_lane
from ..views.grand_prix import RaceLane
from .view import Contender

BEST = "each drafter's measured best γ"
MAX_LANES = 12  # drafter lanes in one Grand Prix, beside plain decoding's


@dataclass(frozen=True)
class Entrant:
    contender: Contender  # its name is the lane's: the drafter's, or with its settings ("draft@2", "draft@a8")
    settings: Settings | None = None  # None: it cannot run (contender.note says why)
    options: Options | None = None
    drafter: str = ""  # the drafter's kind name
    table: tuple = ()  # γ by batch size ([first, last, γ] ranges) for a NAME@table lane; (): its settings' γ
    runtime: str = ""  # in a race comparing runtimes, the one it runs on ("": the race's own)

    @property
    def name(self) -> str:
        return self.contender.name


@dataclass(frozen=True)
class EntryRules:
    """What every entrant is read and checked by: its options (`options_of(kind)`), the target it must fit (by name)
    and whether the pair brings a draft model."""

    options_of: Callable[[Recipe], Options]
    target_name: str
    has_draft: bool
    tables: Mapping[str, tuple] | None = None  # drafter -> γ by batch size as measured; None: no NAME@table lanes here
    no_table: str = "a concurrency sweep measures it"  # where a table comes from, said when a lane asks for none
    runtime: str = AUTO  # what computes the target (a runtime's name; auto: not chosen yet): a drafter that cannot run
    # there says why


def drafter_names(text: str | Sequence[str] | None) -> list[str]:
    """Drafter names from a comma-separated list (or a list), every one checked; none given: every drafter offered."""
    offered = [k.name for k in kinds(menu_only=True)]
    if text is None or text == "":
        return offered
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in offered]
    if unknown:
        raise InvalidRequest(f"unknown drafter {unknown[0]!r}; drafters: {', '.join(offered)}")
    if not names:
        raise InvalidRequest("no drafters chosen")
    return list(dict.fromkeys(names))


def entrants(
    names: Sequence[str],
    base: Settings,
    fixed_gamma: bool,
    rules: EntryRules,
) -> list[Entrant]:
    """Every drafter named, in menu order: its settings (base, or base with the γ and adaptive choice it measured
    best), its options (`options_of`) and its mode line; one that needs a draft model when there is none, or whose
    checks refuse the target, gets the reason instead."""
    return [
        entrant(k, k.name, base if fixed_gamma else best_settings(k, base), rules)
        for k in sorted((kind(n) for n in names), key=lambda k: k.listing.order)
    ]


def entrant(k: Recipe, name: str, settings: Settings, rules: EntryRules, table: tuple = ()) -> Entrant:
    """One drafter at `settings` (or γ by batch size from `table`) under the name `name`, or the reason it cannot run
    with these models."""
    try:
        options = rules.options_of(k)
        if k.draft_needed(options) and not rules.has_draft:
            raise InvalidRequest("it needs a draft model (--draft)")
        k.check_for(options, rules.target_name, chosen_or_none(rules.runtime))
    except SpecvizError as exc:
        return Entrant(Contender(name, k.listing.label, f"not available: {exc}"), drafter=k.name)
    words = k.listing.words(options)
    words = f"{words}, {table_words(table)}" if table else mode_words(words, settings)
    return Entrant(Contender(name, words), settings, options, k.name, table)


def table_words(table: tuple) -> str:
    """A table of γ by batch size as a lane's mode line says it: "γ by batch size 1–3: 4, 4–8: 0"."""
    ranges = ", ".join(
        f"{first}–{last}: {gamma}" if last > first else f"{first}: {gamma}" for first, last, gamma in table
    )
    return f"γ by batch size {ranges}"


def lane_entrants(
    text: str | Sequence[str] | None,
    base: Settings,
    fixed_gamma: bool,
    rules: EntryRules,
) -> list[Entrant]:
    """The lanes of a Grand Prix, in the order given: `NAME` (at its measured best, or at `base` when `fixed_gamma`),
    `NAME@G` (a fixed γ G), `NAME@aG` (adaptive γ up to G) or, under load, `NAME@table` (γ by batch size as the
    drafter's table in `rules.tables` gives it), comma-separated; none given: every drafter offered, in menu order.
    The same drafter may race at several settings; a lane named twice is refused."""
    if text is None or (isinstance(text, str) and not text.strip()) or (not isinstance(text, str) and not text):
        return entrants(drafter_names(None), base, fixed_gamma, rules)
    items = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    lanes = []
    seen = set()
    for item in items:
        lane = parse_lane(item)
        [drafter] = drafter_names([lane.drafter])
        k = kind(drafter)
        settings = base if fixed_gamma else best_settings(k, base)
        table = ()
        if lane.table:
            table = _table_of(item, drafter, rules)
            widest = max(gamma for _, _, gamma in table)  # a measured table may say 0 (plain) at every size
            settings = replace(base, gamma=max(1, widest), adaptive=False)
        elif lane.gamma is not None:
            settings = replace(base, gamma=lane.gamma, adaptive=lane.adaptive)  # the range is checked here
        label = str(replace(lane, drafter=drafter))
        if label in seen:
            raise InvalidRequest(f"lane {label!r} is named twice")
        seen.add(label)
        lanes.append(entrant(k, label, settings, rules, table))
    if len(lanes) > MAX_LANES:
        raise InvalidRequest(f"{len(lanes)} lanes: a Grand Prix races at most {MAX_LANES} beside plain decoding")
    return lanes


def _table_of(item: str, drafter: str, rules: EntryRules) -> tuple:
    """The measured table a NAME@table lane follows; refused in one line where none can be had."""
    if rules.tables is None:
        raise InvalidRequest(f"lane {item!r}: a table of γ by batch size runs only under load (concurrency, traffic)")
    table = rules.tables.get(drafter, rules.tables.get(ANY_DRAFTER))
    if table is None:
        raise InvalidRequest(f"lane {item!r}: no table of γ by batch size for {drafter} here; {rules.no_table}")
    return table


def mode_words(drafter_words: str, settings: Settings) -> str:
    """A drafter's mode line as the race says it, with its γ: in a workload each may run at its own."""
    return mode_text(drafter_words, settings) + ("" if settings.adaptive else f", γ = {settings.gamma}")


def best_settings(k: Recipe, base: Settings) -> Settings:
    """`base` with the γ and adaptive choice the drafter measured fastest with: its declared preference, else the
    settings' own default (γ 4, fixed), as `generate` runs it when no γ is given. Never the γ `base` happens to
    carry (the app's sidebar holds the chosen drafter's), so "each drafter's best" means one thing in the app and
    the CLI."""
    return replace(
        base,
        gamma=k.listing.prefers("gamma", Settings.gamma),
        adaptive=k.listing.prefers("adaptive", Settings.adaptive),
    )


def setting_words(fixed_gamma: bool, base: Settings) -> str:
    if not fixed_gamma:
        return BEST
    return f"γ = {base.gamma} for every drafter" + (", adaptive" if base.adaptive else ", fixed")


def lane_of(e: Entrant) -> RaceLane:
    """An entrant as a Grand Prix lane, not yet started (one that cannot run is done, with its reason)."""
    at = e.settings
    lane = RaceLane(
        e.name,
        drafter=e.drafter,
        words=e.contender.words,
        note=e.contender.note,
        gamma=at.gamma if at else 0,
        adaptive=bool(at and at.adaptive),
        runtime=e.runtime,
    )
    lane.done = not lane.runs
    return lane


def across_runtimes(chosen: Sequence[Entrant], base: Settings, rules: EntryRules, others: Sequence[str]):
    """A race that compares runtimes: the entrants on the race's own runtime, then for each other runtime its own
    plain decoding and every entrant again, named "NAME · RUNTIME" and checked against that runtime (a head that
    reads hidden states a runtime does not give says why there)."""
    out = list(chosen)
    for runtime in others:
        own = replace(rules, runtime=runtime)
        words = f"plain decoding on {runtime}: one target forward per token"
        out.append(Entrant(Contender(f"{PLAIN} · {runtime}", words), base, None, PLAIN, runtime=runtime))
        for e in chosen:
            again = entrant(kind(e.drafter), f"{e.name} · {runtime}", e.settings or base, own, e.table)
            out.append(replace(again, runtime=runtime, settings=again.settings if e.settings else None))
    return out


def ran_on(runtime) -> dict:
    """What a handoff says of the runtime a run was on (a runtimes/runtime.Runtime; None: not said)."""
    return {"runtime": runtime.name, "runtime_engine": runtime.engine} if runtime is not None else {}


def production(
    chosen: Sequence[Entrant],
    target: str,
    draft: str,
    prompt: str,
    chat: bool,
    same_vocab: bool = True,
    batch_tables: Mapping[str, tuple] = MappingProxyType({}),
    runtime=None,
) -> tuple:
    """Every runnable entrant's settings for transformers, vLLM and SGLang (as its kind declares them), the models
    (as specviz was given them) named as another engine loads them; `same_vocab`: the draft reads the target's ids;
    `batch_tables`: vLLM's draft length per batch-size range, by drafter, where a concurrency sweep measured one;
    `runtime`: the runtime they ran on (runtimes/runtime.Runtime), which each handoff places among the engines."""
    target = production_name(target)
    draft = production_name(draft)
    return tuple(
        handoff(
            Ran(
                e.drafter,
                e.settings,
                e.options,
                target,
                draft,
                prompt,
                chat,
                same_vocab,
                batch_tables.get(e.drafter, ()),
                name=e.contender.name,
                serving=kind(e.drafter).serving,
                **ran_on(runtime),
            )
        )
        for e in chosen
        if e.settings and e.drafter != PLAIN  # another runtime's plain lane has no setting to hand on
    )
