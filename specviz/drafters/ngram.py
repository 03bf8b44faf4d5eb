"""n-gram prompt lookup: find the longest earlier match of the text's end, in the prompt or the output so far, and
propose up to γ tokens of what followed it (among equally long matches, the most recent), from a match of any length,
as transformers' prompt lookup does: a copy is often right beyond where its match began, and γ (or adaptive γ,
which learns how often each position of a copy holds) bounds what a wrong one costs. No second model and no
probabilities: each proposal is a point mass."""

from ..serving.declaration import LlamaSpecType, LookupWindow, PromptLookup, Serving, SglangAlgorithm, VllmMethod
from .contract import BaseDrafter, DrafterProfile, Proposal, Provenance, Recipe
from .listing import FamilyBest, Listing
from .options import Options, option
from .suffix_index import Document, best_chain, longest_match

MAX_NGRAM = 8


class NgramDrafter(BaseDrafter):
    """One chain copied from the text itself, which it indexes as it grows (suffix_index.Document), so a step costs a
    few look-ups, not a scan. One run per start()."""

    profile = DrafterProfile(copies=True)

    def __init__(self, shortest: int = 1):
        self.shortest = shortest
        self.start([])

    def start(self, prompt_ids: list[int], target=None, judges=None) -> None:
        self.text = Document(0, len(prompt_ids))
        self.text.extend(prompt_ids)

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        self.text.follow(tokens)
        found = longest_match(self.text, shortest=self.shortest)
        if not found:
            return None
        chain, origin = best_chain(found, gamma)
        return Proposal((chain,), source=Provenance(origin=origin))


class NgramOptions(Options):
    ngram_min: int = option(
        1,
        "shortest match (n-gram size)",
        "the text's end must match earlier text over at least this many tokens to draft; the longest match is copied",
        low=1,
        high=MAX_NGRAM,
    )


WINDOW = LookupWindow(MAX_NGRAM, lambda o: o.ngram_min)  # the match a copy follows, in every engine

KIND = Recipe(
    "ngram",
    NgramOptions,
    lambda options, ctx: NgramDrafter(options.ngram_min),
    Listing(
        "n-gram prompt lookup",
        "copies what followed the longest earlier match of the text's end",
        order=20,
        counterpart="transformers prompt lookup",
        preferred=(("gamma", 10), ("adaptive", True)),  # a copy holds in runs: let adaptive γ copy up to 10
        lookup=True,
        best_for=(
            FamilyBest("extraction", 10, adaptive=True),  # an earlier run (docs/benchmark-log.md)
            # the family suite, whole-call tok/s, medians of 3, AMX Xeon, 2026-12-03 (docs/benchmarks.md)
            FamilyBest("rag", 10, adaptive=True),  # 3.19 (suffix adaptive 1.93, the hybrid adaptive 2.97)
        ),
    ),
    serving=Serving(
        transformers=PromptLookup(WINDOW),
        vllm=VllmMethod("ngram", window=WINDOW),
        sglang=SglangAlgorithm("NGRAM", window=WINDOW, block=True),
        llama_cpp=LlamaSpecType(
            "ngram-simple",
            window=WINDOW,
            note="llama.cpp looks up one n-gram length; specviz copies after the longest match of at least it",
        ),
    ),
)
