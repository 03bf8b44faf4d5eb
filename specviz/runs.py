"""Decoding a prompt on an opened pair (runtimes/pair.py): plain decoding and a drafter, each as the events it
yields, with where the two parted and the trace of both; and the lanes of a race as they cross to the device.

The CLI, the benchmark, the workload and the app all decode here; what differs between them (how a request is parsed,
how a step is shown) stays with them.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field

from .drafters.options import Options
from .drafters.registry import NO_DRAFTER, build_drafter, kind
from .drafters.suffix_index import RunMemory
from .engine import generate, new_generator
from .errors import RuntimeUnsupported
from .events import PLAIN, StepEvent, generated_ids
from .models import LoadedModel
from .record import TokenTexts, divergence, make_trace
from .runtimes.choice import check_run
from .runtimes.pair import Pair
from .settings import Settings, mode_text
from .trace import Divergence, RunModels, Side, Trace


def runtime_line(pair: "Pair", events=()) -> str:
    """Which runtime computed the pair and why, and (after a run) the prediction it rests on against the run."""
    chosen = pair.runtime
    if chosen is None:
        return ""
    checked = f"; {check_run(chosen.plan, events).line()}" if chosen.plan is not None and events else ""
    return chosen.reason + checked


def generate_named(
    target: LoadedModel,
    prompt_ids: list[int],
    settings: Settings,
    drafter: str = NO_DRAFTER,
    draft: LoadedModel | None = None,
    options: Options | dict | None = None,
    stop=None,
    memory: RunMemory | None = None,
    explain: bool = True,
) -> Iterator[StepEvent]:
    """The decode loop with the drafter named `drafter` (plain decoding for NO_DRAFTER), sharing one generator seeded
    from the settings. The drafter is built at once, so a bad option fails before the first step. `explain`: each
    step's detail for the screen (the app, a trace); a run nobody looks at step by step goes without."""
    if not settings.greedy and not target.runtime.gives.sampling:
        raise RuntimeUnsupported(f"{target.runtime.name} gives no distribution to sample from: use temperature 0")
    generator = new_generator(target.device, settings.seed)
    built = build_drafter(drafter, settings, generator, target, draft, options, memory)
    return generate(target, prompt_ids, settings, built, generator, stop, explain)


def parted(target: LoadedModel, prompt_ids, plain, spec, settings: Settings, text_of=None) -> Divergence | None:
    """For a greedy run, where the speculative tokens first differ from plain decoding's, with the target's top two
    there; None when they do not, or when the run sampled (two samples may differ and both be right)."""
    if not settings.greedy:
        return None
    text_of = text_of or TokenTexts(target.tokenizer)
    return divergence(target, list(prompt_ids), list(plain), list(spec), text_of)


@dataclass
class Duel:
    """One prompt on one pair: a drafter's side and plain decoding's. Each side keeps its events as it yields them,
    so what parted and the trace follow from what ran, whichever order the caller ran the sides in."""

    pair: Pair
    prompt_ids: list[int]
    settings: Settings
    drafter: str = NO_DRAFTER
    options: Options | None = None
    memory: RunMemory | None = None
    explain: bool = True  # each step's detail, for a run shown step by step (the app, a trace)
    spec_events: list[StepEvent] = field(default_factory=list)
    plain_events: list[StepEvent] = field(default_factory=list)

    def speculative(self, stop=None) -> Iterator[StepEvent]:
        """The drafter's side (plain decoding when the drafter is NO_DRAFTER); its drafter is built now."""
        steps = generate_named(
            self.pair.target,
            self.prompt_ids,
            self.settings,
            self.drafter,
            self.pair.draft,
            self.options,
            stop,
            self.memory,
            self.explain,
        )
        return _kept(steps, self.spec_events)

    def plain(self, stop=None) -> Iterator[StepEvent]:
        steps = generate_named(self.pair.target, self.prompt_ids, self.settings, stop=stop, explain=self.explain)
        return _kept(steps, self.plain_events)

    def spec_ids(self) -> list[int]:
        """The tokens the drafter's side has written so far."""
        return generated_ids(self.spec_events)

    def parted(self, plain_ids: list[int] | None = None, text_of=None) -> Divergence | None:
        """Where the drafter's side parted from plain decoding (`plain_ids`, or the plain side run here)."""
        plain_ids = generated_ids(self.plain_events) if plain_ids is None else plain_ids
        return parted(self.pair.target, self.prompt_ids, plain_ids, self.spec_ids(), self.settings, text_of)

    def trace(self, prompt: str, models: RunModels, made_with: str, extra: dict | None = None) -> Trace:
        """The run as a trace: plain decoding alone, or (with a drafter) the race of both sides; `extra`: what else
        the trace carries (the drafter's settings in other engines)."""
        text_of = TokenTexts(self.pair.target.tokenizer)
        if self.drafter == NO_DRAFTER:
            sides = [Side(PLAIN, "", self.spec_events)]
        else:
            chosen = kind(self.drafter)
            words = mode_text(chosen.listing.words(chosen.parse(self.options)), self.settings)
            found = self.parted(text_of=text_of)
            sides = [Side(PLAIN, "", self.plain_events), Side(self.drafter, words, self.spec_events, found)]
        return make_trace(
            kind="race",
            prompt=prompt,
            prompt_ids=self.prompt_ids,
            settings=self.settings,
            models=models,
            sides=sides,
            text_of=text_of,
            made_with=made_with,
            extra=extra,
        )


def _kept(steps: Iterator[StepEvent], into: list[StepEvent]) -> Iterator[StepEvent]:
    for event in steps:
        into.append(event)
        yield event


@dataclass(frozen=True)
class LaneRun:
    """A drafter lane as it runs: its name in the race, its drafter, its settings and options."""

    name: str
    drafter: str
    settings: Settings
    options: Options | None
    remembers: bool = False  # drafts from the visitor's earlier runs (each lane from its own copy)
    table: tuple = ()  # under load, γ by the batch's size: [first, last, γ] ranges (vLLM's table); (): settings' γ
    runtime: str = ""  # where a race compares runtimes, the one it runs on ("": the race's own)


def lane_runs(entrants) -> list[LaneRun]:
    """The lanes that can run, of a Grand Prix's, sweep's or traffic run's entrants (workload/entrants.lane_entrants),
    in the order asked, as they run."""
    return [
        LaneRun(
            e.name,
            NO_DRAFTER if e.drafter == PLAIN else e.drafter,  # another runtime's plain lane, in a runtime race
            e.settings,
            e.options,
            e.drafter != PLAIN and kind(e.drafter).remembers,
            e.table,
            e.runtime,
        )
        for e in entrants
        if e.settings
    ]
