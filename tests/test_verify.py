"""The acceptance rule on hand-made distributions: outputs must follow the target exactly."""

from collections import Counter

import pytest
import torch

import specviz.engine.verify as verify
from specviz.analysis.stats import chi_square_p
from specviz.engine.verify import chain, residual, verify_greedy, verify_sampled

# Context-free target rows p_0..p_2 and draft rows q_0, q_1 over 6 tokens: every output position i
# of one step must then be distributed as p_i, whatever the draft proposes.
P = torch.tensor(
    [
        [0.40, 0.25, 0.15, 0.10, 0.06, 0.04],
        [0.05, 0.05, 0.50, 0.20, 0.10, 0.10],
        [0.10, 0.30, 0.10, 0.30, 0.10, 0.10],
    ]
)
Q = torch.tensor(
    [
        [0.10, 0.40, 0.05, 0.30, 0.05, 0.10],
        [0.30, 0.10, 0.20, 0.10, 0.25, 0.05],
    ]
)
DRAWS = 20_000


def position_counts(p, q, draws, seed=0):
    """Run the verdict `draws` times; count the token emitted at each position of the step."""
    gen = torch.Generator().manual_seed(seed)
    counts = [Counter() for _ in range(p.shape[0])]
    for _ in range(draws):
        draft = torch.multinomial(q, 1, generator=gen).squeeze(-1)
        v = verify_sampled(p, q, draft, gen)
        out = draft[: v.accepted].tolist() + [v.next_token]
        for i, tok in enumerate(out):
            counts[i][tok] += 1
    return counts


def p_values(counts, p):
    return [chi_square_p(c, dict(enumerate(row.tolist())), sum(c.values())) for c, row in zip(counts, p)]


def test_each_position_follows_the_target():
    counts = position_counts(P, Q, DRAWS)
    assert sum(counts[0].values()) == DRAWS and sum(counts[2].values()) > 1000  # bonus path exercised
    assert min(p_values(counts, P)) > 1e-3


WRONG_RESIDUALS = {
    "sample from p": lambda p, q: p,
    "sample from q": lambda p, q: q,
    "reversed difference": lambda p, q: (q - p).clamp_min(0) + 1e-12,
    "no clamp (abs)": lambda p, q: (p - q).abs(),
}


@pytest.mark.parametrize("name", WRONG_RESIDUALS)
def test_a_wrong_residual_is_caught(monkeypatch, name):
    monkeypatch.setattr(verify, "residual", WRONG_RESIDUALS[name])
    counts = [Counter() for _ in P]
    for seed in range(10):  # up to DRAWS, 2,000 at a time: a wrong residual shows long before the last
        counts = [a + b for a, b in zip(counts, position_counts(P, Q, DRAWS // 10, seed))]
        if min(p_values(counts, P)) < 1e-6:
            break
    assert min(p_values(counts, P)) < 1e-6, name


def test_residual_is_normalised_positive_part():
    p, q = P[0], Q[0]
    expected = torch.tensor([0.30, 0.0, 0.10, 0.0, 0.01, 0.0]) / 0.41
    assert torch.allclose(residual(p, q), expected, atol=1e-6)
    assert torch.equal(residual(p, p), p)  # p == q: nothing owed, fall back to p


def test_identical_draft_is_always_accepted():
    gen = torch.Generator().manual_seed(1)
    for _ in range(200):
        draft = torch.multinomial(P[:2], 1, generator=gen).squeeze(-1)
        assert verify_sampled(P, P[:2], draft, gen).accepted == 2


def test_greedy_accepts_while_the_draft_is_the_argmax():
    p = torch.eye(5)[[2, 4, 1, 0]] * 0.6 + 0.1  # argmax per row: 2, 4, 1, 0
    assert verify_greedy(p, chain([2, 4, 1])).accepted == 3
    v = verify_greedy(p, chain([2, 3, 1]))
    assert (v.accepted, v.next_token) == (1, 4)
    v = verify_greedy(p, chain([0, 4, 1]))
    assert (v.accepted, v.next_token) == (0, 2)
    assert verify_greedy(p, chain([2, 4, 1])).next_token == 0  # bonus
