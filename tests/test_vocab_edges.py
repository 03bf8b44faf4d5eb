"""Edges of the vocabulary: a draft whose output layer is wider (padded, as Qwen 7B's 152,064 rows against 0.5B's
151,936) or narrower than the target's, top-k at or beyond the vocabulary, and ties at the top-p edge."""

import pytest
import torch
from laws import chain
from tiny import loaded, perturbed

from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.engine.sampling import probabilities
from specviz.events import generated_ids
from specviz.settings import Settings


def resized(target, rows: int):
    """A draft that partly agrees with `target`, its output layer resized to `rows` ids. Padded rows are made loud,
    so a draft that offered them would be caught at once."""
    model = perturbed(target.model, seed=12, scale=0.5)
    size = model.config.vocab_size
    model.resize_token_embeddings(rows, mean_resizing=False)
    with torch.no_grad():
        if rows > size:
            model.lm_head.weight[size:] = model.lm_head.weight[1:2] * 20
    return loaded(model, target.tokenizer, f"draft-{rows}")


@pytest.fixture(scope="module", params=["padded", "cut"])
def odd_draft(request, small):
    target = small[0]
    size = target.model.config.vocab_size
    return resized(target, size + 4 if request.param == "padded" else size - 2)


def test_a_draft_with_a_padded_or_cut_vocabulary_keeps_greedy_output(small, odd_draft):
    target, _, prompt = small
    plain = generated_ids(generate(target, prompt, Settings(max_new_tokens=30)))
    s = Settings(max_new_tokens=30, gamma=3)
    events = list(generate(target, prompt, s, build_drafter("draft", s, None, target, odd_draft)))
    assert generated_ids(events) == plain
    size = target.model.config.vocab_size
    assert all(t < size for e in events for t in e.proposed)  # a padded id is never offered


def test_a_draft_with_a_cut_vocabulary_keeps_the_targets_law(small, draws):
    """(A padded draft's law, with its padded rows carrying mass: test_cross_vocab_layout.py.)"""
    target, _, prompt = small
    odd_draft = resized(target, target.model.config.vocab_size - 2)
    sampled = Settings(max_new_tokens=3, gamma=2, temperature=1.0)
    assert draws.law_p(target, prompt, sampled, chain(target, odd_draft)) > 1e-3


def test_top_k_at_or_beyond_the_vocabulary_changes_nothing(small):
    target, draft, prompt = small
    size = target.model.config.vocab_size
    logits = torch.randn(3, size)
    base = Settings(temperature=0.7)
    for k in (size, size + 1, 10**6):
        at_k = Settings(temperature=0.7, top_k=k)
        assert torch.equal(probabilities(logits, at_k), probabilities(logits, base))
        runs = []
        for s in (base, at_k):
            s = Settings(**{**s.__dict__, "max_new_tokens": 20, "gamma": 3, "seed": 5})
            generator = new_generator(target.device, 5)
            runs.append(
                generated_ids(
                    generate(target, prompt, s, build_drafter("draft", s, generator, target, draft), generator)
                )
            )
        assert runs[0] == runs[1]


def test_tokens_tied_at_the_top_p_edge_are_kept_or_dropped_together():
    probs = torch.tensor([[0.3, 0.4, 0.3], [0.2, 0.2, 0.6], [0.25, 0.5, 0.25]])
    for top_p in (0.5, 0.65, 0.7, 0.75):
        p = probabilities(probs.log(), Settings(temperature=1.0, top_p=top_p))
        assert p[0, 0] == p[0, 2] and p[1, 0] == p[1, 1] and p[2, 0] == p[2, 2], top_p
        flipped = probabilities(probs.log().flip(-1), Settings(temperature=1.0, top_p=top_p)).flip(-1)
        assert torch.allclose(p, flipped), top_p  # nor does the tokens' order decide
    p = probabilities(probs.log(), Settings(temperature=1.0, top_p=0.5))
    assert p[1, 2] == 1.0  # 0.6 alone covers 0.5: the tied pair below it goes, both of it
