"""The drafter protocol: propose candidates, then observe the verdict."""

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class Proposal:
    tokens: torch.Tensor  # [g] proposed token ids, on the target's device
    q: torch.Tensor | None  # [g, V] drafter probabilities; None for a deterministic (lookup) drafter
    forwards: int  # drafter model forwards spent on this proposal
    candidates: list[list[int]] | None = None  # several alternative continuations (q must be None): a tree step
    typical: tuple[float, float] | None = None  # (ε, δ): sampled runs use Medusa's lossy typical acceptance


class Drafter(Protocol):
    def start(self, prompt_ids: list[int]) -> None:
        """Called once before the first step (counted as prefill)."""

    def propose(self, tokens: list[int], gamma: int) -> Proposal:
        """Guess the next `gamma` tokens after `tokens` (the prompt plus everything generated)."""

    def observe(self, accepted: int) -> None:
        """The target accepted the first `accepted` proposed tokens; forget the rest."""
