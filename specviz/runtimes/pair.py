"""A pair of models, and the one place one is opened: asked for by names (`PairAsk`), its runtime chosen
(runtime_registry.py), everything that can fail before weights are read checked (`prepare_pair`), then the target
and its draft loaded (`load_pair`, which says each step as it starts). The CLI, the app's shelf, a workload and its
Ray shards, the benchmark and the trainers all open theirs here; a `Pair` answers exact mode and how it describes
itself through its runtime, never by the runtime's name.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from ..errors import InvalidRequest
from ..models.device import check_fits, resolve_device
from ..models.loading import LoadedModel
from ..models.vocabulary import check_draft_fits, same_vocabulary
from ..trace import RunModels
from .choice import RuntimeChoice, plan_from
from .runtime import AUTO, Loading, Runtime
from .runtime_registry import choose, runtime

MEASURED = " (auto: measured fastest on this device)"


@dataclass(frozen=True)
class PairAsk:
    """A pair as asked for, by names: plain data (a Ray actor and a GPU worker are handed it whole)."""

    target: str
    draft: str = ""  # "": no draft model
    runtime: str = AUTO  # a runtime's name, or auto: measured among those that can run the pair here
    dtype: str = AUTO  # the target's precision, where the runtime has precisions; auto: measured
    draft_dtype: str = ""  # the draft's; "": the fastest on the device, else the target's; SAME: the target's
    exact: bool | None = None  # exact mode: True insists on it (a runtime without it refuses); None: on where it holds
    # and costs little here
    insists: bool = False  # the precisions were named: a runtime without them refuses, rather than ignores, them
    device: str = "auto"
    label: str = ""  # the pair's name on screen ("" : target ← draft)
    brings: tuple = ()  # (option, location) of the heads the pair brings, counted in what it takes
    needs: tuple[str, ...] = ()  # what the caller needs of the runtime (runtime.Gives fields): the trainers, hidden
    # states; the benchmark, assisted generation

    @property
    def name(self) -> str:
        return self.label or (f"{self.target} ← {self.draft}" if self.draft else self.target)


@dataclass
class Pair:
    """A loaded target and, when a drafter needs one, its draft model, on one runtime."""

    target: LoadedModel
    draft: LoadedModel | None = None
    exact: str = ""  # the target's exact mode in one line, as choose_exact left it
    choice: object = None  # models/precision_choice.PrecisionChoice: how the target's precision was measured
    runtime: RuntimeChoice | None = None  # which runtime computes the pair, and why
    ask: PairAsk | None = None  # what it was opened from

    @property
    def runs_on(self) -> Runtime:
        return self.target.runtime

    def choose_exact(self, wanted: bool) -> str:
        """Exact mode as wanted, where it holds here; the line that says what holds."""
        self.exact = self.runs_on.exact_line(self.target, wanted)
        return self.exact

    def same_vocab(self) -> bool:
        """The draft (where there is one) reads the target's token ids: no bridge between tokenizers."""
        return self.draft is None or same_vocabulary(self.target, self.draft)

    def exact_holds(self) -> bool:
        """Whether exact mode can hold for this target on this machine (the runtime, the precision, the kernels)."""
        return self.runs_on.exact_holds(self.target)

    @contextmanager
    def without_exact(self):
        """The target as its own library computes it, for a while (transformers' generate, raced beside specviz),
        then exact mode as it was."""
        with self.runs_on.without_exact(self.target):
            yield

    def precision_words(self) -> str:
        """The pair's precisions in a few words, and whether they (or the runtime) were measured fastest here."""
        target = self.target.precision
        draft = self.draft.precision if self.draft is not None else ""
        words = target if draft in ("", target) else f"{target}, draft {draft}"
        measured = self.choice is not None or bool(self.runtime and self.runtime.asked == AUTO and self.runtime.plans)
        return words + MEASURED * measured

    def prompt_line(self, prompt_tokens: int, exact: str) -> str:
        """What a run says when it starts: the prompt's length, the pair, its precisions and runtime, exact mode."""
        return f"prompt: {prompt_tokens} tokens; {self.name}, {self.precision_words()} on {self.runs_on.name}; {exact}"

    @property
    def name(self) -> str:
        return self.ask.name if self.ask else self.target.name

    def models(self, exact: str = "") -> RunModels:
        """The run's models as a trace records them (`exact`: the line the device answered with)."""
        ask = self.ask or PairAsk(self.target.name, self.draft.name if self.draft else "")
        return RunModels(
            target=ask.target,
            draft=ask.draft if self.draft is not None else "",
            pair=self.name,
            precision=self.target.precision,
            draft_precision=self.draft.precision if self.draft is not None else "",
            device=self.target.device.type,
            exact=exact,
            runtime=self.runs_on.name,
        )

    def loaded(self) -> list[LoadedModel]:
        return [m for m in (self.target, self.draft) if m is not None]

    def weight_bytes(self) -> int:
        """What its models' weights take: what letting the pair go frees."""
        return sum(self.runs_on.model_bytes(m) for m in self.loaded())

    def run_eagerly(self) -> None:
        """Both models on their runtime's plainest path: a pair runs one path, so a fast-path failure of either
        turns it off for both."""
        for model in self.loaded():
            model.run_eagerly()

    def answers(self, ask: PairAsk) -> bool:
        """Whether this pair is what `ask` asks for: the same models and label, on the runtime named (or, for auto,
        the one auto chose before), at the precisions named (or measured, as before)."""
        mine = self.ask
        models = lambda a: (a.target, a.draft, a.device, a.name)  # noqa: E731
        if mine is None or models(ask) != models(mine):
            return False
        if ask.runtime not in (mine.runtime, self.runs_on.name) or self.runs_on.refusal(ask):
            return False
        if not self.runs_on.gives.precisions:
            return True
        asked = (ask.dtype, ask.draft_dtype)
        held = (self.target.precision, self.draft.precision if self.draft is not None else "")
        return asked in ((mine.dtype, mine.draft_dtype), held) or (ask.dtype == held[0] and not ask.draft_dtype)


@dataclass
class Prepared:
    """A pair ready to load: its runtime chosen and every check that needs no weights passed."""

    ask: PairAsk
    choice: RuntimeChoice
    runtime: Runtime
    loading: Loading


def prepare_pair(ask: PairAsk, report=lambda _: None, freed: int = 0, choice: RuntimeChoice | None = None) -> Prepared:
    """The pair's runtime (as named or measured), its checks before any weights are read, and whether its weights
    fit the device with `freed` bytes let go (the pairs it replaces)."""
    choice = choice or choose(ask, report)
    chosen = runtime(choice.runtime)
    where = resolve_device(ask.device)
    loading = chosen.prepare(ask, where, choice.plan, report)
    check_fits(loading.sizes, where, freed)
    return Prepared(ask, choice, chosen, loading)


def load_pair(ready: Prepared) -> Iterator[str]:
    """Load the target, then its draft, saying each before it starts (yielded); returns the Pair."""
    ask = ready.ask
    how = f"; {ready.runtime.loads}" if ready.runtime.loads else ""
    steps = [f"target {ask.target}", f"draft {ask.draft}"] if ask.draft else [f"target {ask.target}"]
    lines = [f"loading {what} on {ready.runtime.name} ({i}/{len(steps)}{how})" for i, what in enumerate(steps, 1)]
    yield lines[0]
    target = ready.loading.target()
    draft = None
    if ask.draft:
        yield lines[1]
        draft = ready.loading.draft(target)
        check_draft_fits(target, draft)
    choice = ready.choice if ready.choice.plan is not None else _priced_at_load(ready.choice, target, draft)
    pair = Pair(target, draft, choice=ready.loading.precision, runtime=choice, ask=ask)
    precision = ready.loading.precision
    pair.choose_exact(ask.exact if ask.exact is not None else (precision.exact if precision else True))
    return pair


def _priced_at_load(choice: RuntimeChoice, target: LoadedModel, draft: LoadedModel | None) -> RuntimeChoice:
    """A runtime named rather than measured, priced from the forward curves its models measured as they loaded
    (where its models measure one), so a run can be checked against what its costs predict."""
    if not target.forward_curve:
        return choice
    draft_s = draft.forward_curve[1] if draft is not None and draft.forward_curve else 0.0
    plan = plan_from(choice.runtime, target.precision, target.forward_curve, draft_s)
    return replace(choice, plans={choice.runtime: plan})


def open_pair(ask: PairAsk, report=lambda _: None, choice: RuntimeChoice | None = None) -> Pair:
    """The pair `ask` names, loaded: its runtime chosen (`choice`: already, by the caller), checked, each model loaded
    in turn."""
    loading = load_pair(prepare_pair(ask, report, choice=choice))
    while True:
        try:
            next(loading)
        except StopIteration as done:
            return done.value


def open_draft(pair: Pair, name: str, dtype: str = "") -> LoadedModel:
    """Another draft model for `pair`'s target on its runtime, at `dtype` (the benchmark's drafts at several
    precisions), checked against the target's vocabulary."""
    if pair.ask is None:
        raise InvalidRequest("a draft is opened beside a pair that open_pair opened")
    ask = replace(pair.ask, draft=name, draft_dtype=dtype)
    draft = pair.runs_on.prepare(ask, pair.target.device, None, lambda _: None).draft(pair.target)
    check_draft_fits(pair.target, draft)
    return draft
