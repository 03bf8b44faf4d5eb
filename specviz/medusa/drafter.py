"""The Medusa drafter: heads on the target's own last hidden state propose a tree of candidates.

A "choice" is an index path: [i0, i1, ...] means the i0-th most likely token of head 0 at depth 1, then the
i1-th of head 1 at depth 2, and so on. The candidates go to the engine's tree verification (tree.py).
"""

import torch

from ..drafters.base import Proposal
from .heads import MedusaHeads

# A sparse default: most weight on the top guesses, a few second choices near the root.
DEFAULT_CHOICES = ((0,), (0, 0), (1,), (0, 1), (0, 0, 0), (1, 0), (2,), (0, 0, 0, 0), (0, 2), (0, 0, 1), (3,))


class MedusaDrafter:
    def __init__(self, heads: MedusaHeads, choices=DEFAULT_CHOICES, acceptance: str = "lossless",
                 epsilon: float = 0.09, delta: float = 0.3):
        """acceptance (for sampled runs; greedy runs are always exact): lossless = tree rejection sampling,
        typical = Medusa's typical acceptance with (ε, δ), faster and lossy by design."""
        if acceptance not in ("lossless", "typical"):
            raise ValueError(f"acceptance must be lossless or typical, got {acceptance!r}")
        self.typical = (epsilon, delta) if acceptance == "typical" else None
        self.heads, self.choices = heads, [tuple(c) for c in choices]
        depth = max(len(c) for c in self.choices)
        if depth > len(heads.heads):
            raise ValueError(f"the tree is {depth} deep but there are only {len(heads.heads)} heads")
        self.widths = [1 + max(c[k] for c in self.choices if len(c) > k) for k in range(depth)]
        self.target_lm = None

    def attach(self, target_lm) -> None:
        """The engine hands over the target's CachedLM (built with keep_hidden) before the first step."""
        self.target_lm = target_lm

    def start(self, prompt_ids: list[int]) -> None:
        pass

    @torch.inference_mode()
    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        hidden = None if self.target_lm is None else self.target_lm.last_hidden
        if hidden is None:  # a one-token prompt: no hidden state yet, so a plain step
            return None
        logits = self.heads(hidden)  # [K, V]: head k guesses the token k + 1 places after tokens[-1]
        top = [torch.topk(logits[k], w).indices.tolist() for k, w in enumerate(self.widths)]
        candidates, seen = [], set()
        for choice in self.choices:
            path = tuple(top[k][i] for k, i in enumerate(choice[:gamma]))
            if path not in seen:
                seen.add(path)
                candidates.append(list(path))
        return Proposal(torch.tensor(candidates[0]), None, forwards=1, candidates=candidates, typical=self.typical)

    def observe(self, accepted: int) -> None:
        pass
