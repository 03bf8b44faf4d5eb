"""A smaller model of the same vocabulary drafts autoregressively, with its own KV cache."""

import torch

from ..cached_lm import CachedLM
from ..sampling import choose, probabilities
from ..settings import MAX_GAMMA, Settings
from ..static_lm import open_lm
from .base import Proposal


def fit_vocab(logits: torch.Tensor, size: int) -> torch.Tensor:
    """Give the draft's logits the target's width: extra ids are cut, missing ones can never be drafted."""
    width = logits.shape[-1]
    if width >= size:
        return logits[..., :size]
    return torch.nn.functional.pad(logits, (0, size - width), value=float("-inf"))


class DraftModelDrafter:
    def __init__(self, model: torch.nn.Module, settings: Settings, generator: torch.Generator, vocab_size: int):
        self.model, self.settings, self.generator, self.vocab_size = model, settings, generator, vocab_size
        self.lm: CachedLM | None = None
        self._base = self._count = 0

    def start(self, prompt_ids: list[int]) -> None:
        self.lm = open_lm(self.model, len(prompt_ids) + self.settings.max_new_tokens + MAX_GAMMA + 1)
        if len(prompt_ids) > 1:
            self.lm.extend(torch.tensor(prompt_ids[:-1]), last_only=True)

    def propose(self, tokens: list[int], gamma: int) -> Proposal:
        # The cache may lag behind `tokens` (tokens accepted last step, the target's own token):
        # the first forward feeds all of them at once, then one drafted token per forward.
        self._base, self._count = len(tokens), gamma
        feed = torch.tensor(tokens[self.lm.length :])
        drafted, dists = [], []
        for i in range(gamma):
            probs = probabilities(fit_vocab(self.lm.extend(feed, last_only=True), self.vocab_size), self.settings)
            feed = choose(probs, self.settings, self.generator)
            drafted.append(feed)
            dists.append(probs)
        return Proposal(torch.cat(drafted), torch.cat(dists), forwards=gamma)

    def observe(self, accepted: int) -> None:
        # The last drafted token was never fed, so at most gamma - 1 drafts sit in the cache.
        self.lm.truncate(self._base + min(accepted, self._count - 1))
