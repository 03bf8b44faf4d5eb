"""Turn logits into the distributions both models sample from: all positions in one tensor op."""

import torch

from ..settings import Settings


def fit_vocab(logits: torch.Tensor, size: int) -> torch.Tensor:
    """Give a draft's logits the target's width: extra ids are cut, missing ones can never be drafted."""
    width = logits.shape[-1]
    if width >= size:
        return logits[..., :size]
    return torch.nn.functional.pad(logits, (0, size - width), value=float("-inf"))


def probabilities(logits: torch.Tensor, settings: Settings) -> torch.Tensor:
    """[n, V] logits -> [n, V] float32 probabilities after temperature, top-k and top-p.

    Greedy settings return the plain softmax: the greedy rule only needs its argmax, and the
    softmax is what the UI shows as p(x) and q(x).
    """
    logits = logits.float()
    if settings.greedy:
        return torch.softmax(logits, dim=-1)
    logits = logits / settings.temperature
    if 0 < settings.top_k < logits.shape[-1]:
        kth = torch.topk(logits, settings.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if settings.top_p < 1.0:
        sorted_logits, _ = torch.sort(logits, dim=-1, descending=True)
        sorted_probs = torch.softmax(sorted_logits, dim=-1)
        # Drop a token when the tokens ranked above it already cover top_p (the top one always stays); a token tied
        # with the last one kept stays too, so neither the sort's order nor the ids decide between equals.
        drop_sorted = (sorted_probs.cumsum(dim=-1) - sorted_probs) >= settings.top_p
        floor = sorted_logits.masked_fill(drop_sorted, float("inf")).amin(dim=-1, keepdim=True)
        logits = logits.masked_fill(logits < floor, float("-inf"))
    return torch.softmax(logits, dim=-1)


def typical_distribution(logits: torch.Tensor, settings: Settings) -> torch.Tensor | None:
    """What typical acceptance measures against: the target's distribution at the run's temperature before any top-k
    or top-p cut. None when the run does not use it, or when probabilities() already returns exactly that."""
    if not settings.lossy or (settings.top_k == 0 and settings.top_p >= 1.0):
        return None
    return torch.softmax(logits.float() / settings.temperature, dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of [n, V] probabilities, drawn with the request's own generator."""
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def choose(probs: torch.Tensor, settings: Settings, generator: torch.Generator) -> torch.Tensor:
    return probs.argmax(dim=-1) if settings.greedy else sample(probs, generator)
