"""The Medusa drafter: heads on the target's own last hidden state propose a tree of candidates.

A "choice" is an index path: [i0, i1, ...] means the i0-th most likely token of head 0 at depth 1, then the
i1-th of head 1 at depth 2, and so on. The candidates go to the engine's tree verification (tree.py).
"""

import torch

from ..drafters.base import Proposal
from ..errors import InvalidRequest
from ..settings import ACCEPTANCE_MODES, MEDUSA_TREES
from .heads import MedusaHeads

DEFAULT_CHOICES = MEDUSA_TREES["sparse"]  # most weight on the top guesses, a few second choices near the root


class MedusaDrafter:
    def __init__(self, heads: MedusaHeads, choices=DEFAULT_CHOICES, acceptance: str = "lossless",
                 epsilon: float = 0.09, delta: float = 0.3):
        """acceptance (for sampled runs; greedy runs are always exact): lossless = tree rejection sampling,
        typical = Medusa's typical acceptance with (ε, δ), faster and lossy by design; greedy = exact (T = 0 only)."""
        if acceptance not in ACCEPTANCE_MODES:
            raise InvalidRequest(f"acceptance must be one of {', '.join(ACCEPTANCE_MODES)}, got {acceptance!r}")
        self.typical = (epsilon, delta) if acceptance == "typical" else None
        self.heads, self.choices = heads, [tuple(c) for c in choices]
        depth = max(len(c) for c in self.choices)
        if depth > len(heads.heads):
            raise InvalidRequest(f"the Medusa tree is {depth} deep but these heads are only {len(heads.heads)}")
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
        top = self.heads.top_ids(hidden, self.widths)  # head k guesses the token k + 1 places after tokens[-1]
        candidates, seen = [], set()
        for choice in self.choices:
            path = tuple(top[k][i] for k, i in enumerate(choice[:gamma]))
            if path not in seen:
                seen.add(path)
                candidates.append(list(path))
        return Proposal(torch.tensor(candidates[0]), None, forwards=1, candidates=candidates, typical=self.typical)

    def observe(self, accepted: int) -> None:
        pass
