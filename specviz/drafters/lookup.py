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
    def __init__(self, max_n: int = 3, device=None):
        self.max_n, self.device = max_n, device

    def start(self, prompt_ids: list[int]) -> None:
        pass

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        for n in range(min(self.max_n, len(tokens) - 1), 0, -1):
            suffix = tokens[-n:]
            # most recent earlier match first; it must leave at least one token after it
            for start in range(len(tokens) - n - 1, -1, -1):
                if tokens[start : start + n] == suffix:
                    follow = tokens[start + n : start + n + gamma]
                    return Proposal(_chain(follow, self.device), None, forwards=0)
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
        self.prompt_len = 0

    def start(self, prompt_ids: list[int]) -> None:
        self.prompt_len = len(prompt_ids)

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        output = tokens[self.prompt_len :]  # the model's own output so far
        if not output:
            return None
        last = output[-1]
        places = [i for i in range(len(output) - 2, -1, -1) if output[i] == last]  # most recent first
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
