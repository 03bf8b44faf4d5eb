"""Opening a pair and running it: the one place that loads a target and its draft, and decodes a prompt through plain
decoding and a drafter, with where the two parted and the trace of both.

The CLI, the benchmark, the workload and the app all open their models and decode here; what differs between them
(how a request is parsed, how a step is shown) stays with them.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .drafters.options import Options
from .drafters.registry import NO_DRAFTER, build_drafter, kind
from .drafters.suffix_index import RunMemory
from .engine import generate, new_generator
from .errors import InvalidRequest
from .events import PLAIN, StepEvent, generated_ids
from .models import LoadedModel, load_model
from .models.device import resolve_device
from .models.exact import exact_for, exact_problem, is_exact
from .models.loading import check_loadable, quiet_transformers
from .models.precision_choice import PrecisionChoice, for_pair
from .models.vocabulary import check_draft_fits, same_vocabulary
from .record import TokenTexts, divergence, make_trace
from .runtimes.choice import (
    AUTO,
    LLAMA_CPP,
    TRANSFORMERS,
    RuntimeChoice,
    choose,
    named,
    plan_from,
    transformers_plan,
)
from .settings import Settings, mode_text
from .trace import Divergence, RunModels, Side, Trace


@dataclass
class Pair:
    """A loaded target and, when a drafter needs one, its draft model."""

    target: LoadedModel
    draft: LoadedModel | None = None
    exact: str = ""  # the target's exact mode in one line, as choose_exact left it
    choice: PrecisionChoice | None = None  # how the target's precision was chosen, where it was measured
    runtime: RuntimeChoice | None = None  # which runtime computes the target, and why

    def choose_exact(self, wanted: bool) -> str:
        """Exact mode as wanted, where it holds here; the line that says what holds (models/exact.exact_for)."""
        self.exact = LLAMA_NOT_EXACT if self.target.runtime == LLAMA_CPP else exact_for(self.target.model, wanted)
        return self.exact

    def same_vocab(self) -> bool:
        """The draft (where there is one) reads the target's token ids: no bridge between tokenizers."""
        return self.draft is None or same_vocabulary(self.target, self.draft)

    def exact_holds(self) -> bool:
        """Whether exact mode can hold for this target on this machine (the device, the precision, the kernels)."""
        return self.target.runtime != LLAMA_CPP and not exact_problem(self.target.model)

    @contextmanager
    def without_exact(self):
        """The target as its own modeling code runs it, for a while (transformers' generate, raced beside specviz),
        then exact mode as it was."""
        if self.target.runtime == LLAMA_CPP:  # llama.cpp has no exact mode to take off
            yield
            return
        was = is_exact(self.target.model)
        line = self.exact
        exact_for(self.target.model, False)
        try:
            yield
        finally:
            exact_for(self.target.model, was)
            self.exact = line


def choose_precision(target: str, draft: str = "", device: str = "auto", report=lambda _: None) -> PrecisionChoice:
    """The target's precision measured best for this pair on this device (models/precision_choice.py): only the
    configs are read; the measurement is kept in the cache folder. `report` hears the measuring and the reason."""
    source, offline = _config_source(target)
    draft_source = _config_source(draft)[0] if draft else ""
    choice = for_pair(source, draft_source, resolve_device(device), bool(offline), report)
    report(f"precision: {choice.reason}")
    return choice


# What a greedy race on llama.cpp may show, in the words of the exact-mode line.
LLAMA_NOT_EXACT = (
    "exact mode off: llama.cpp computes a forward of several tokens with other kernels than one token's (a repacked "
    "product of 4 rows or more; one query over a cache of 512 entries or more is split otherwise), so a greedy race "
    "may part from plain decoding at a near tie, and the badge says where"
)


def choose_runtime(target: str, draft: str = "", device: str = "auto", asked: str = AUTO, report=lambda _: None):
    """The runtime the pair runs on (runtime_choice.py): as asked, or measured where both could run it (a CPU,
    llama.cpp installed, a GGUF for each model). Asking for llama.cpp where it cannot run is one line."""
    from .runtimes.llama_cpp.binding import installed

    where = resolve_device(device)
    if asked == TRANSFORMERS:
        return named(TRANSFORMERS, "transformers, as asked")
    problem = _llama_problem(target, draft, where, installed)
    if asked == LLAMA_CPP:
        if problem:
            raise InvalidRequest(f"--runtime llama.cpp: {problem}")
        return named(LLAMA_CPP, "llama.cpp, as asked")
    if problem:
        return RuntimeChoice(TRANSFORMERS, f"transformers: {problem}")
    only_gguf = next((n for n in (target, draft) if n and _gguf_file(n)), "")
    if only_gguf:
        return RuntimeChoice(LLAMA_CPP, f"llama.cpp: '{only_gguf}' is a GGUF file, which only llama.cpp loads here")
    plans = {LLAMA_CPP: _llama_plan(target, draft, report)}
    precision = choose_precision(target, draft, device, report)
    theirs = transformers_plan(precision, precision.table)
    if theirs is not None:
        plans[TRANSFORMERS] = theirs
    choice = choose(plans, precision, precision.device)
    report(f"runtime: {choice.reason}")
    return choice


def _gguf_file(name: str) -> bool:
    """A model given as a .gguf file (or a folder holding one and no transformers model): llama.cpp's alone."""
    from .models.offline import PRESETS

    path = Path(name).expanduser()
    if name in PRESETS or not path.exists():
        return False
    return path.suffix == ".gguf" or (path.is_dir() and not (path / "config.json").is_file())


def _llama_problem(target: str, draft: str, where, installed) -> str:
    """Why llama.cpp cannot run this pair here ('' when it can)."""
    from .runtimes.llama_cpp.gguf_model import gguf_problem

    if where.type != "cpu":
        return f"the model runs on {where.type}, where transformers runs it (llama.cpp is specviz's CPU runtime)"
    if not installed():
        return 'llama.cpp is not installed (pip install "specviz[llama]")'
    return next((p for p in (gguf_problem(target), gguf_problem(draft) if draft else "") if p), "")


def _llama_plan(target: str, draft: str, report):
    """llama.cpp's plan for the pair: each model's forward measured on its GGUF (kept from before, else now)."""
    from .runtimes.llama_cpp.forward_costs import forward_curve, kept_curve
    from .runtimes.llama_cpp.gguf_model import GgufModel, locate_gguf

    def measured(name: str) -> tuple[dict, str]:
        path = locate_gguf(name)
        kept = kept_curve(path)
        if kept is None:
            model = GgufModel(path)
            kept = forward_curve(model, report), model.describe()
        return kept

    curve, words = measured(target)
    draft_s = measured(draft)[0][1] if draft else 0.0
    return plan_from(LLAMA_CPP, f"GGUF {words}", curve, draft_s)


def llama_plan_of(pair: "Pair"):
    """llama.cpp's plan for a loaded pair, from the curves measured at load."""
    draft_s = pair.draft.forward_curve[1] if pair.draft is not None and pair.draft.forward_curve else 0.0
    return plan_from(LLAMA_CPP, f"GGUF {pair.target.model.describe()}", pair.target.forward_curve, draft_s)


def runtime_line(pair: "Pair", events=()) -> str:
    """Which runtime computed the pair and why, and (after a run) the prediction it rests on against the run."""
    from .runtimes.choice import check_run

    chosen = pair.runtime
    if chosen is None:
        return ""
    checked = f"; {check_run(chosen.plan, events).line()}" if chosen.plan is not None and events else ""
    return chosen.reason + checked


def open_gguf(name: str, tokenizer=None, report=lambda _: None) -> LoadedModel:
    """A model for the llama.cpp runtime: its GGUF loaded by llama.cpp, its forward's cost measured (once)."""
    from .runtimes.llama_cpp.gguf_model import load_gguf

    quiet_transformers()
    return load_gguf(name, tokenizer, report)


def _config_source(name: str) -> tuple[str, bool]:
    """Where a model's config is read for the precision's measurement, and whether the Hub is out of reach: an
    offline preset not converted yet is read from its GGUF (converting it takes minutes, reading it a moment)."""
    from .models.offline import PRESETS, converted_path

    if name in PRESETS and not (converted_path(PRESETS[name]) / "config.json").is_file():
        from .runtimes.llama_cpp.gguf_model import preset_file

        return str(preset_file(name)), False
    source, _, offline = check_loadable(name)
    return source, bool(offline)


def open_target(name: str, dtype: str = "bfloat16", device: str = "auto", tokenizer=None) -> LoadedModel:
    """A target as a run uses it: loaded (`tokenizer`: its own, when the caller read it already), and exact mode's
    probe of this machine's kernels made once, at load, rather than inside the first run."""
    quiet_transformers()
    target = load_model(name, dtype, device, tokenizer)
    exact_problem(target.model)
    return target


def open_draft(target: LoadedModel, name: str, dtype: str, device: str = "auto", tokenizer=None) -> LoadedModel:
    """A draft model for `target` in the target's runtime, checked against the target's vocabulary (the same, or
    enough in common)."""
    draft = open_gguf(name, tokenizer) if target.runtime == LLAMA_CPP else load_model(name, dtype, device, tokenizer)
    check_draft_fits(target, draft)
    return draft


def open_pair(
    target: str, dtype: str = "bfloat16", device: str = "auto", draft: str = "", draft_dtype: str = "", exact=True
) -> Pair:
    """The target in exact mode as `exact` asks (where it holds) and, when `draft` is named, the draft model at
    `draft_dtype` (default: the target's precision)."""
    loaded = open_target(target, dtype, device)
    pair = Pair(loaded, open_draft(loaded, draft, draft_dtype or dtype, device) if draft else None)
    pair.choose_exact(exact)
    return pair


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
