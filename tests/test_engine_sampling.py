"""Speculative sampling through the whole engine: the output distribution is the target's own."""

import pytest
import torch
from laws import SiblingsDrafter, chain, exact_law
from tiny import loaded, perturbed

import specviz.engine.verify as verify
from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.events import generated_ids
from specviz.settings import Settings

SETTINGS = [
    Settings(max_new_tokens=3, gamma=2, temperature=1.0),
    Settings(max_new_tokens=3, gamma=2, temperature=0.8, top_k=5, top_p=0.9),
    Settings(max_new_tokens=3, gamma=2, temperature=1.0, adaptive=True),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=["t1", "t0.8-k5-p0.9", "t1-adaptive"])
def test_speculative_sampling_is_lossless(small, draws, settings):
    target, draft, prompt = small
    assert draws.p(draws(target, prompt, settings, chain(target, draft)), exact_law(target, prompt, settings)) > 1e-3


def test_speculative_sampling_with_an_int8_draft_is_lossless(small, draws):
    """The draft's precision changes only its q; the rejection rule keeps the target's own law."""
    from specviz.models.quantize import int8_rows

    target, draft, prompt = small
    quantized = loaded(int8_rows(perturbed(target.model, seed=12, scale=0.5)), target.tokenizer)
    counts = draws(target, prompt, SETTINGS[0], chain(target, quantized))
    assert draws.p(counts, exact_law(target, prompt, SETTINGS[0])) > 1e-3


def test_engine_test_catches_a_wrong_residual(small, draws, monkeypatch):
    target, draft, prompt = small
    monkeypatch.setattr(verify, "residual", lambda p, q: p)
    assert draws.mutant_p(target, prompt, SETTINGS[0], chain(target, draft)) < 1e-6


def test_same_seed_same_output_other_seed_other_output(target, drafts, tokenizer):
    prompt = tokenizer.encode("w1 w2 w3")

    def once(seed):
        s = Settings(max_new_tokens=30, gamma=3, temperature=1.0, seed=seed)
        gen = new_generator(target.device, seed)
        return generated_ids(
            generate(target, prompt, s, build_drafter("draft", s, gen, target, drafts["partial"]), gen)
        )

    assert once(4) == once(4)
    assert len({tuple(once(seed)) for seed in range(5)}) > 1


@pytest.mark.parametrize("which", ["ngram chain", "tree with siblings"])
def test_tree_verification_is_lossless_through_the_engine(small, draws, which):
    target, _, _ = small
    tok = target.tokenizer
    prompt = tok.encode("a b a b a")  # n-gram lookup matches at once
    settings = SETTINGS[0]
    make = (
        (lambda s, generator: build_drafter("ngram", s, None, target))
        if which == "ngram chain"
        else (lambda s, generator: SiblingsDrafter(tok))
    )
    assert draws.p(draws(target, prompt, settings, make), exact_law(target, prompt, settings)) > 1e-3


def test_engine_tree_test_catches_a_wrong_residual(small, draws, monkeypatch):
    target, _, _ = small
    monkeypatch.setattr(verify, "remove", lambda dist, x: dist)
    prompt = target.tokenizer.encode("a b a b a")
    assert draws.mutant_p(target, prompt, SETTINGS[0], lambda s, generator: SiblingsDrafter(target.tokenizer)) < 1e-6


def test_medusa_lossless_mode_keeps_the_target_distribution(small, draws):
    from specviz.drafters.medusa.heads import MedusaHeads
    from specviz.drafters.medusa.medusa_drafter import MedusaDrafter

    target, _, _ = small
    prompt = target.tokenizer.encode("a b c")
    torch.manual_seed(3)
    heads = MedusaHeads(target.model.config.hidden_size, target.vocab_size, 4, 1)
    counts = draws(target, prompt, SETTINGS[0], lambda s, generator: MedusaDrafter(heads))
    assert draws.p(counts, exact_law(target, prompt, SETTINGS[0])) > 1e-3
