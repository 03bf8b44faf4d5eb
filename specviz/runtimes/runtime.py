"""What a runtime is, in one place: what it gives the engine and the drafters (`Gives`), and what it answers
(`Runtime`): whether it can run a pair here and why not in one line, what the pair would cost on it, how each model
loads, and how it speaks of exact mode and of itself. A module (or small package) in runtimes/ declares one as
RUNTIME; runtime_registry.py finds them, and every command, screen and choice reads them from there.

A model it loads is a `LoadedModel` (models/loading.py) whose class is the runtime's own: the engine asks it for its
caches (`open_lm`, `open_batch`), never which runtime it is.
"""

from contextlib import contextmanager
from dataclasses import dataclass, fields

import torch

from ..models.loading import LoadedModel
from ..settings import AUTO  # as a runtime: none named, so the registry measures those that can run the pair
from ..trace import NO_EXACT_MODE
from .choice import RuntimePlan

SAME = "same"  # a draft's precision: the target's

__all__ = ["AUTO", "SAME", "Gives", "Loading", "Runtime"]


@dataclass(frozen=True)
class Gives:
    """What a runtime hands the engine and the drafters beyond a forward's logits."""

    hidden_states: bool = False  # the target's hidden states, which heads (Medusa, EAGLE, DFlash) and trainers read
    exact_mode: bool = False  # greedy tokens computed as plain decoding computes them, bit for bit (models/exact.py)
    trees: bool = True  # one verify forward over a token tree, not only over a chain
    batches: bool = False  # several requests decoded in one forward (concurrency levels, traffic)
    sampling: bool = True  # next-token distributions a run samples from (temperature above 0)
    assisted_generation: bool = False  # its library's own generate(), which the benchmark races specviz against
    precisions: tuple[str, ...] = ()  # the precisions one may name; (): each model's file as it ships

    def lacks(self) -> list[str]:
        """What it does not give, in words, in the order declared."""
        return [WORDS[f.name] for f in fields(self) if f.name in WORDS and not getattr(self, f.name)]


# What each capability is called when a line says a runtime lacks it.
WORDS = {
    "hidden_states": "the target's hidden states",
    "exact_mode": "an exact mode",
    "trees": "verification of token trees",
    "batches": "batches of requests",
    "sampling": "sampling",
    "assisted_generation": "its library's assisted generation",
}


@dataclass
class Loading:
    """A pair about to load on a runtime, every check that needs no weights passed: what each model will take (for
    the device's memory), how the target and then the draft load, and the precision choice it measured, if any."""

    sizes: list[tuple[str, int]]
    target: object  # () -> LoadedModel
    draft: object = None  # (target) -> LoadedModel; None: no draft model
    precision: object = None  # models/precision_choice.PrecisionChoice, where the target's precision was measured


class Runtime:
    """A runtime: what computes a pair's forwards. A subclass sets the declarations and answers `problem` and
    `prepare`; one with costs it can price answers `plan`, one with an exact mode the three exact verbs."""

    name = ""  # what users pick: --runtime NAME, the app's Runtime choice, a trace's runtime
    summary = ""  # what computes the models, in a few words (the choices' help)
    gives = Gives()
    engine = ""  # the serving engine (serving/engine_settings.ENGINES) that runs what it ran; "": none does
    order = 50  # its place among the choices
    devices = ("cpu",)  # the kinds of device it computes on
    loads = ""  # how its models load, said on the load line ("1/2" and such follow it)
    as_shipped = ""  # where it has no precisions to name: what it computes in instead
    no_exact = ""  # where it has no exact mode: why a greedy race may part from plain decoding there
    raced_by = ""  # how specviz is raced against the runtime's own tools, where the benchmark does not

    def problem(self, ask, where: torch.device) -> str:
        """Why it cannot run the pair `ask` (runtimes/pair.PairAsk) on `where`, in one line; '' when it can."""
        raise NotImplementedError

    def why_not(self, ask, where: torch.device) -> str:
        """Why it will not run the pair `ask` on `where`, in one line ('' when it will): the device, then its own
        problem, then what the ask insists on that it refuses."""
        if where.type not in self.devices:
            return f"{self.name} computes on {' or '.join(self.devices)}, and this model is on {where.type}"
        return self.problem(ask, where) or self.refusal(ask)

    def plan(self, ask, where: torch.device, report) -> RuntimePlan | None:
        """What the pair would cost here, priced (choice.plan_from): measured now or read back. None: not measured,
        so `auto` cannot weigh it against the others."""
        return None

    def prepare(self, ask, where: torch.device, plan: RuntimePlan | None, report) -> Loading:
        """Everything that can fail before weights are read, checked, and how each model then loads."""
        raise NotImplementedError

    def device_line(self, where: torch.device) -> str:
        """How it describes itself on the start-up line."""
        return self.name

    def model_bytes(self, loaded: LoadedModel) -> int:
        """What a loaded model's weights take: what letting it go frees."""
        return 0

    def exact_line(self, target: LoadedModel, wanted: bool) -> str:
        """Exact mode as wanted, where it holds, and the line that says what holds (trace.EXACT_ON, or why not)."""
        return f"exact mode off: {self.name}{NO_EXACT_MODE}{self.no_exact}"

    def exact_holds(self, target: LoadedModel) -> bool:
        return False

    @contextmanager
    def without_exact(self, target: LoadedModel):
        """The target as its own library computes it, for a while; then exact mode as it was."""
        yield

    def refusal(self, ask) -> str:
        """Why it refuses what `ask` insists on ('' when nothing): a precision named, exact mode asked for, a
        capability the caller needs."""
        named = [p for p in (ask.dtype, ask.draft_dtype) if p not in ("", AUTO, SAME)] if ask.insists else []
        if named and not self.gives.precisions:
            return f"--dtype and --draft-dtype name precisions; {self.name} runs {self.as_shipped} (leave them out)"
        wrong = [p for p in named if p not in self.gives.precisions]
        if wrong:
            return f"dtype must be one of {', '.join(self.gives.precisions)} on {self.name}, got {wrong[0]!r}"
        if ask.exact and not self.gives.exact_mode:
            return f"--exact: {self.name} has no exact mode ({self.no_exact})"
        missing = [WORDS[need] for need in ask.needs if not getattr(self.gives, need)]
        return f"{self.name} does not give {missing[0]}" if missing else ""

    def help_line(self) -> str:
        """One line for the choices' help: what computes the models and what it does not give."""
        lacks = self.gives.lacks()
        return f"{self.name}: {self.summary}" + (f" (without {', '.join(lacks)})" if lacks else "")
