"""What a drafter kind is in the serving engines, as the kind's own module declares it (its Recipe carries a `Serving`).
For each engine one of: the engine's own way of drafting like it (a type below per engine), a `Nearest` (the engine
has no such method: another kind's setting it runs in its place, or none, and what that gives up), or nothing (the
handoff then says the engine has no equivalent). What depends on a run is read from the kind's options by callables
declared here; the writers (engine_settings.py and the engine modules) spell every engine key."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Read = Callable[[Any], Any]  # the kind's own options -> a value

ENGINE_FIELDS = (  # engine -> Serving field
    ("transformers", "transformers"),
    ("vLLM", "vllm"),
    ("SGLang", "sglang"),
    ("llama.cpp", "llama_cpp"),
)


def _never(options) -> bool:
    return False


def _one(options) -> int:
    return 1


@dataclass(frozen=True)
class Weights:
    """The model an engine drafts with: the pair's draft model (`read` None), or the location one of the kind's options
    names (a head's folder or Hub id); `placeholder` is written where none is known."""

    read: Read | None = None
    placeholder: str = "DRAFT"

    def location(self, options, pair_draft: str) -> str:
        """Where the engine loads it from (options None: the kind runs at its defaults, or stands in for another)."""
        if self.read is None:
            return pair_draft or self.placeholder
        found = self.read(options) if options is not None else None
        return found if isinstance(found, str) and found else self.placeholder  # loaded objects are no location


PAIR_DRAFT = Weights()


@dataclass(frozen=True)
class LookupWindow:
    """The lengths of the match a lookup copies after: the shortest from the kind's options, the longest fixed."""

    longest: int
    shortest: Read = _one

    def shortest_for(self, options) -> int:
        return self.shortest(options) if options is not None else 1


@dataclass(frozen=True)
class CacheLimits:
    """How far vLLM's suffix decoding drafts per matched token and how many earlier requests it keeps, from the
    kind's options (a kind without options, or a stand-in, leaves vLLM's defaults)."""

    spec_factor: Read
    cached_requests: Read


@dataclass(frozen=True)
class AssistedGeneration:
    """transformers' generate(assistant_model=...): the pair's draft model drafts a chain."""


@dataclass(frozen=True)
class PromptLookup:
    """transformers' generate(prompt_lookup_num_tokens=...): a chain copied from this request's own text."""

    window: LookupWindow


@dataclass(frozen=True)
class VllmMethod:
    """A `method` of vLLM's --speculative-config: what it drafts with, the match it copies after, its cache, and
    whether vLLM's adaptive verification (each step's draft sized by its own cost model) serves it."""

    method: str
    weights: Weights | None = None
    window: LookupWindow | None = None
    cache: CacheLimits | None = None
    adaptive_verification: bool = False
    note: str = ""  # what else the engine offers near it, or gives up, in words


@dataclass(frozen=True)
class SglangAlgorithm:
    """An algorithm of SGLang's --speculative-algorithm. `block`: it drafts its tokens at once (a lookup's copy, one
    pass of a block drafter), so SGLang counts draft tokens, not the steps of a chain."""

    algorithm: str
    weights: Weights | None = None
    window: LookupWindow | None = None
    block: bool = False


@dataclass(frozen=True)
class LlamaSpecType:
    """A --spec-type of llama.cpp's server: what it drafts with (-md: the pair's draft model, or a head converted to
    GGUF), the n-gram a lookup matches, and `with_lookup`: a draft model beside ngram-simple, which llama.cpp asks
    first and falls back from (the hybrid's nearest)."""

    spec_type: str
    weights: Weights | None = None
    window: LookupWindow | None = None
    with_lookup: bool = False
    note: str = ""  # what else llama.cpp offers near it, or gives up, in words


@dataclass(frozen=True)
class Nearest:
    """The engine has no such method. `stand_in` names the kind whose setting there runs in its place, `of` is that
    kind's declaration; with none, `plain` says the engine decodes plainly instead (the same tokens, none of the
    speedup), else nothing runs. `gives_up`: what that costs, in words a user reads."""

    gives_up: str
    stand_in: str | None = None
    of: "Serving | None" = None
    plain: bool = False


@dataclass(frozen=True)
class Serving:
    """What a drafter kind is in each engine (None: it declares nothing there). `tree`: whether specviz verifies a
    tree of candidates (True, or a predicate of the kind's options), which each engine's single chain gives up."""

    transformers: AssistedGeneration | PromptLookup | Nearest | None = None
    vllm: VllmMethod | Nearest | None = None
    sglang: SglangAlgorithm | Nearest | None = None
    llama_cpp: LlamaSpecType | Nearest | None = None
    tree: bool | Read = _never

    def declared(self, engine: str):
        """What it declares for `engine` (one of ENGINE_FIELDS' names)."""
        return getattr(self, dict(ENGINE_FIELDS)[engine])

    def drafts_a_tree(self, options) -> bool:
        if isinstance(self.tree, bool):
            return self.tree
        return options is not None and bool(self.tree(options))
