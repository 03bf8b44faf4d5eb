"""Drafters that need no second model: they copy what followed earlier text. Deterministic, so q is None.

n-gram prompt lookup: match the longest suffix (n = max_n .. 1) against earlier text, propose what followed
its most recent match. History lookup (../shared/seeds/003): every earlier occurrence of the last token in the
output gives a candidate; up to m of them are verified together as a token tree, the longest verified wins.
"""

import random

import torch

from .base import Proposal


def _chain(tokens: list[int], device) -> torch.Tensor:
    return torch.tensor(tokens, dtype=torch.long, device=device)


class NgramDrafter:
    """Keeps an index n-gram -> where it last started (with a token after it), extended as the text grows, so a
    step looks up its suffix in O(max_n) instead of scanning the text. One run per start()."""

    def __init__(self, max_n: int = 3, device=None):
        self.max_n, self.device = max_n, device
        self.start([])

    def start(self, prompt_ids: list[int]) -> None:
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
                return Proposal(_chain(tokens[start + n : start + n + gamma], self.device), None, forwards=0)
        return None

    def observe(self, accepted: int) -> None:
        pass


class HistoryDrafter:
    """m candidates of up to n - 1 tokens each, from where the last token occurred before in the output."""

    def __init__(self, m: int = 4, choice: str = "recent", seed: int = 0, device=None):
        if choice not in ("recent", "random"):
            raise ValueError(f"history choice must be recent or random, got {choice!r}")
        self.m, self.choice, self.device = m, choice, device
        self.rng = random.Random(seed)
        self.start([])

    def start(self, prompt_ids: list[int]) -> None:
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
        last = output[-1]
        places = self.places[last][-2::-1]  # earlier occurrences, most recent first
        if self.choice == "random" and len(places) > self.m:
            places = sorted(self.rng.sample(places, self.m), reverse=True)
        candidates, seen = [], set()
        for i in places:
            follow = tuple(output[i + 1 : i + 1 + gamma])
            if follow and follow not in seen:
                seen.add(follow)
                candidates.append(list(follow))
            if len(candidates) == self.m:
                break
        if not candidates:
            return None
        return Proposal(_chain(candidates[0], self.device), None, forwards=0, candidates=candidates)

    def observe(self, accepted: int) -> None:
        pass
