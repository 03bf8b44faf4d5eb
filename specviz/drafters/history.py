"""History lookup: every earlier occurrence of the last token in the output gives a candidate (the tokens that
followed it); up to m of them are verified together as a token tree, and the longest verified one wins."""

import random

from ..events import OUTPUT
from ..serving.declaration import LlamaSpecType, Serving
from .contract import BaseDrafter, DrafterProfile, Proposal, Provenance, Recipe
from .listing import Listing
from .ngram import KIND as NGRAM
from .options import Options, option
from .suffix import KIND as SUFFIX

MAX_CANDIDATES = 16


class HistoryDrafter(BaseDrafter):
    """m candidates of up to γ tokens each, from where the last token occurred before in the output."""

    profile = DrafterProfile(copies=True)

    def __init__(self, m: int = 4, choice: str = "recent", seed: int = 0):
        self.m = m
        self.choice = choice
        self.rng = random.Random(seed)
        self.start([])

    def max_nodes(self, gamma: int) -> int:
        return self.m * gamma

    def start(self, prompt_ids: list[int], target=None, judges=None) -> None:
        self.prompt_len = len(prompt_ids)
        self.places: dict[int, list[int]] = {}  # token -> where it occurs in the output, extended as it grows
        self.indexed = 0

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        output = tokens[self.prompt_len :]  # the model's own output so far
        if not output:
            return None
        if len(output) < self.indexed:  # another text than the one indexed
            self.start(tokens[: self.prompt_len])
        for i in range(self.indexed, len(output)):
            self.places.setdefault(output[i], []).append(i)
        self.indexed = len(output)
        places = self.places[output[-1]][-2::-1]  # earlier occurrences, most recent first
        if self.choice == "random" and len(places) > self.m:
            places = sorted(self.rng.sample(places, self.m), reverse=True)
        candidates: list[tuple[int, ...]] = []
        for i in places:
            follow = tuple(output[i + 1 : i + 1 + gamma])
            if follow and follow not in candidates:
                candidates.append(follow)
            if len(candidates) == self.m:
                break
        return Proposal(tuple(candidates), source=Provenance(origin=OUTPUT)) if candidates else None


class HistoryOptions(Options):
    candidates: int = option(
        4,
        "history candidates (m)",
        "earlier occurrences of the last token, verified together as a tree",
        low=1,
        high=MAX_CANDIDATES,
    )
    choice: str = option(
        "recent",
        "history choice",
        "the most recent occurrences, or a seeded random choice",
        choices=("recent", "random"),
        flag="--history-choice",
    )


KIND = Recipe(
    "history",
    HistoryOptions,
    lambda o, ctx: HistoryDrafter(o.candidates, o.choice, ctx.settings.seed),
    Listing(
        "history lookup (tree)",
        "earlier continuations of the last token in the output, "
        "verified together as a token tree; it pays where the output repeats itself (lists, repeated "
        "code), rarely elsewhere",
        order=30,
        lookup=True,
        # its tree is wide (several candidates × γ): adaptive γ backs off where a wide verify costs more than it saves
        preferred=(("adaptive", True),),
    ),
    serving=Serving(
        transformers=NGRAM.as_nearest(
            "prompt lookup copies from this request only: no earlier requests' continuations"
        ),
        vllm=SUFFIX.as_nearest("vLLM has no lookup over a tree of earlier continuations; its nearest is `suffix`"),
        sglang=NGRAM.as_nearest("SGLang's n-gram cache of earlier tokens, not specviz's earlier continuations"),
        llama_cpp=LlamaSpecType(
            "ngram-mod",
            note="ngram-mod keeps one next token per hashed n-gram, shared by every request the server has seen; "
            "specviz's history keeps earlier runs' whole continuations",
        ),
    ),
)
