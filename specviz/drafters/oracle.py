"""A drafter with a set acceptance rate, for measuring the engine against the theory (benchmarks only).

It knows the target's greedy continuation (a plain run made beforehand) and proposes, at every draft position,
the target's own next token with probability α and a wrong one otherwise, so acceptance is exactly the
paper's i.i.d. model with no drafting cost: E(γ) = (1 − α^(γ+1)) / (1 − α) tokens for one verify forward.
Greedy only. If the run ever leaves the reference (a bf16 near-tie), it stops proposing: plain steps.
"""

import random

import torch

from .base import Proposal


class OracleDrafter:
    def __init__(self, reference: list[int], alpha: float, vocab_size: int, seed: int = 0, device=None):
        self.reference, self.alpha, self.vocab_size, self.device = list(reference), alpha, vocab_size, device
        self.rng = random.Random(seed)
        self.prompt_len = 0

    def start(self, prompt_ids: list[int]) -> None:
        self.prompt_len = len(prompt_ids)

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        done = len(tokens) - self.prompt_len
        if tokens[self.prompt_len:] != self.reference[:done]:
            return None  # off the reference: the target's next token is no longer known
        follow = self.reference[done : done + gamma]
        if not follow:
            return None
        draft = [t if self.rng.random() < self.alpha else (t + 1 + self.rng.randrange(self.vocab_size - 1)) % self.vocab_size
                 for t in follow]
        return Proposal(torch.tensor(draft, dtype=torch.long, device=self.device), None, forwards=0)

    def observe(self, accepted: int) -> None:
        pass
