"""n-gram prompt lookup: match the longest suffix of the text (n = max .. 1) against earlier text and propose
what followed its most recent match. No second model and no probabilities: each proposal is a point mass."""

from dataclasses import dataclass

from ..engine.step import BaseDrafter, Proposal
from .kinds import DrafterKind, Options, option

MAX_NGRAM = 8


class NgramDrafter(BaseDrafter):
    """Keeps an index n-gram -> where it last started (with a token after it), extended as the text grows, so a
    step looks up its suffix in O(max_n) instead of scanning the text. One run per start()."""

    def __init__(self, max_n: int = 3, device=None):
        self.max_n = max_n
        self.start([])

    def start(self, prompt_ids: list[int], target=None) -> None:
        self.last_start: dict[tuple[int, ...], int] = {}
        self.indexed = 0  # n-grams ending before this position are in the index

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        if len(tokens) < self.indexed:  # another text than the one indexed
            self.start([])
        for end in range(max(self.indexed, 1), len(tokens)):  # a match must leave a token after it: end < len
            for n in range(1, min(self.max_n, end) + 1):
                self.last_start[tuple(tokens[end - n : end])] = end - n
        self.indexed = max(self.indexed, len(tokens))
        for n in range(min(self.max_n, len(tokens) - 1), 0, -1):  # longest suffix first
            start = self.last_start.get(tuple(tokens[-n:]))
            if start is not None:
                return Proposal((tuple(tokens[start + n : start + n + gamma]),))
        return None


@dataclass(frozen=True)
class NgramOptions(Options):
    ngram_max: int = option(3, "n-gram size", "longest suffix matched against earlier text; falls back to shorter ones",
                            low=1, high=MAX_NGRAM)


KIND = DrafterKind("ngram", "n-gram prompt lookup", "copies what followed the longest earlier match of the text's end",
                   lambda options, ctx: NgramDrafter(options.ngram_max), NgramOptions, order=20)
