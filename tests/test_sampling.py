"""Temperature / top-k / top-p: the vectorised version equals a slow per-row reference."""

import pytest
import torch

from specviz.engine.sampling import probabilities, sample
from specviz.settings import Settings


def reference(row: torch.Tensor, s: Settings) -> torch.Tensor:
    logits = row.double() / s.temperature
    keep = torch.ones_like(logits, dtype=torch.bool)
    if s.top_k:
        keep &= logits >= torch.sort(logits, descending=True).values[s.top_k - 1]
    probs = torch.softmax(logits.masked_fill(~keep, float("-inf")), -1)
    if s.top_p < 1:
        order = torch.argsort(probs, descending=True)
        covered, nucleus = 0.0, torch.zeros_like(keep)
        for idx in order.tolist():
            if covered >= s.top_p:
                break
            nucleus[idx] = True
            covered += probs[idx].item()
        keep &= nucleus
    return torch.softmax(logits.masked_fill(~keep, float("-inf")), -1).float()


@pytest.mark.parametrize(
    "s",
    [
        Settings(temperature=1.0),
        Settings(temperature=0.7, top_k=5),
        Settings(temperature=1.3, top_p=0.8),
        Settings(temperature=0.9, top_k=20, top_p=0.5),
        Settings(temperature=1.0, top_p=0.05),
    ],
)
def test_warping_matches_per_row_reference(s):
    logits = torch.randn(7, 50, generator=torch.Generator().manual_seed(3)) * 3
    fast = probabilities(logits, s)
    for row, got in zip(logits, fast):
        assert torch.allclose(got, reference(row, s), atol=1e-6)
    assert torch.allclose(fast.sum(-1), torch.ones(7))


def test_greedy_gives_the_plain_softmax():
    logits = torch.randn(3, 10)
    assert torch.allclose(probabilities(logits, Settings()), torch.softmax(logits, -1))


def test_seeded_sampling_repeats():
    probs = torch.softmax(torch.randn(4, 30), -1)
    a = sample(probs, torch.Generator().manual_seed(9))
    b = sample(probs, torch.Generator().manual_seed(9))
    assert torch.equal(a, b)
