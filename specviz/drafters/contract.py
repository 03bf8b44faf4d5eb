"""What a drafter is, in one place: the two halves of its contract.

**What the decode loop calls** (defined beside the loop, in engine/step.py, since the engine imports nothing above
it; every drafter imports it from here). A drafter declares a `DrafterProfile` when it is built (the target's hidden
states it reads, its longest draft, whether it drafts a block in one pass, stops early or copies spans), and answers
four verbs:

    start(prompt_ids, target_cache, judges)   once per generation, after the prompt is in the target's cache
    propose(tokens, γ) -> Proposal | None      every step: candidates (one chain, or several as a tree), q when it
                                               sampled a chain (None: point masses, as a lookup), or None: a plain step
    observe(verdict)                          after verification: the accepted path, the target's own next token
    max_nodes(γ)                              the most tokens one proposal sends (sizes the target's cache)

`BaseDrafter` gives the defaults (a chain of up to γ tokens, nothing to set up). `Judges` are adaptive γ's, lent
through `start` to a drafter that sizes its own draft or tree.

**What the registry builds it from**: a `Recipe`, declared as KIND in the kind's own module (registry.py finds
them): its name, its options, how to build a drafter for one generation, what it needs (a draft model, earlier runs, a
check before any model loads), and what it is in the serving engines (a `Serving`, serving/declaration.py). How menus
and the benchmark list it is its `Listing` (listing.py), apart from the recipe; its options are declared with
options.py. Those two need no torch; this module reads the engine's types.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..engine.step import BaseDrafter, Drafter, DrafterProfile, EachRow, Judges, Proposal, Provenance, Verdict
from ..errors import RuntimeUnsupported
from ..serving.declaration import Nearest, Serving
from .listing import Listing
from .options import Options

__all__ = ["BaseDrafter", "DraftContext", "Drafter", "DrafterProfile", "EachRow", "Judges", "Proposal", "Provenance"]
__all__ += ["Recipe", "Verdict"]


@dataclass(frozen=True)
class DraftContext:
    """What a drafter is built from, once per generation."""

    target: Any  # LoadedModel
    settings: Any  # Settings
    generator: Any  # the torch.Generator the verification draws from too (a batch's drafter: one per row)
    draft: Any = None  # the draft LoadedModel, for a kind that needs one
    memory: Any = None  # the caller's RunMemory (suffix_index.py), for a kind that drafts from earlier runs


@dataclass(frozen=True)
class Recipe:
    """A drafter kind: how to build one of its drafters. `needs_draft` is True, or a predicate of the options, when a
    second model drafts beside the target (the pair's draft, or --draft) at least sometimes."""

    name: str  # what users pick: --drafter NAME, the API's drafter value, the benchmark's method
    options: type  # its Options dataclass
    build: Callable[[Any, DraftContext], Drafter]  # (its options, the context) -> a Drafter for one generation
    listing: Listing  # how menus and the benchmark list it (listing.py)
    needs_draft: bool | Callable[[Any], bool] = False
    precheck: Callable[[Any, str], None] | None = None  # (options, target name): refuse before any model loads
    remembers: bool = False  # drafts from the caller's earlier runs (DraftContext.memory), so run order matters
    # one drafter for a batch of rows whose forwards serve them all (options, context) -> RowDrafting; None: one
    # drafter per row, side by side (engine/step.EachRow)
    build_batch: Callable[[Any, DraftContext], Any] | None = None
    unbatched: str = ""  # why it cannot decode concurrent requests in one batch yet; "": it can
    # what of the target's insides it reads, in words ("": token ids alone): a runtime that hands no hidden states to
    # a caller does not run it
    reads: str = ""
    # what it is in the serving engines (transformers, vLLM, SGLang), or their nearest setting; nothing declared: the
    # handoff says each engine has no equivalent
    serving: Serving = Serving()

    def parse(self, values: Mapping | None) -> Options:
        """Its options from values that may hold other kinds' options too (missing or None: the default)."""
        return values if isinstance(values, self.options) else self.options.parse(values or {})

    def draft_needed(self, options: Options) -> bool:
        """Whether a run with these options drafts with a second model."""
        return self.needs_draft(options) if callable(self.needs_draft) else self.needs_draft

    def check_for(self, options: Options, target_name: str, runtime=None) -> None:
        """Refuse, in one line, before any model loads: a runtime (as the runtimes' registry declares it; None: not
        chosen yet) that does not give what it needs, and what its own precheck refuses."""
        if runtime is not None:
            self.refuse_on(options, runtime)
        if self.precheck is not None:
            self.precheck(options, target_name)

    def refuse_on(self, options: Options, runtime) -> None:
        """One line where `runtime` does not give what this kind needs with these options."""
        why = self.unmet(options, runtime)
        if why:
            raise RuntimeUnsupported(f"{self.name} does not run on {runtime.name}: {why}")

    def unmet(self, options: Options, runtime) -> str:
        """What it needs that `runtime` does not give (its declaration: runtimes/runtime.Gives), in words; '' when
        nothing."""
        if self.reads and not runtime.gives.hidden_states:
            return f"its {self.reads}, which {runtime.name} does not give"
        if self.serving.drafts_a_tree(options) and not runtime.gives.trees:
            return f"it drafts a tree with these options, and {runtime.name} verifies chains only (draft a chain)"
        return ""

    def as_nearest(self, gives_up: str) -> Nearest:
        """This kind standing in, in an engine, for another kind the engine lacks (`gives_up`: what that costs)."""
        return Nearest(gives_up, self.name, self.serving)
