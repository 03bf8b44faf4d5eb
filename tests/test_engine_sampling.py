"""Speculative sampling through the whole engine: the output distribution is the target's own."""

from collections import Counter

import pytest
import torch
from tiny import loaded, perturbed, tiny_llama, word_tokenizer

import specviz.engine.verify as verify
from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.engine.sampling import probabilities
from specviz.engine.step import BaseDrafter, Proposal
from specviz.events import generated_ids
from specviz.settings import Settings
from specviz.stats import chi_square_p

RUNS = 3000


@pytest.fixture(scope="module")
def small():
    """Vocabulary of 8 so the joint law of two tokens has few enough cells to test."""
    tok = word_tokenizer(["a", "b", "c", "d", "e", "f"])
    target_model = tiny_llama(len(tok), seed=11, sharpness=0.1)  # spread-out p: max about 0.3
    with torch.no_grad():
        target_model.lm_head.weight[0] = target_model.lm_head.weight[2] * 0.5  # make EOS a real outcome
    draft_model = perturbed(target_model, seed=12, scale=0.5)  # alpha about 0.85: accepts and rejects both common
    return loaded(target_model, tok), loaded(draft_model, tok), tok.encode("a b c")


def exact_two_token_law(target, prompt, settings):
    """P(t1, t2) of the target alone: p(t1) p(t2 | t1); a first EOS ends the run."""

    def dist(ids):
        with torch.no_grad():
            logits = target.model(torch.tensor([ids])).logits[0, -1:]
        return probabilities(logits, settings)[0].tolist()

    law, first = {}, dist(prompt)
    for t1, p1 in enumerate(first):
        if t1 in target.eos_ids:
            law[(t1,)] = p1
            continue
        for t2, p2 in enumerate(dist(prompt + [t1])):
            law[(t1, t2)] = p1 * p2
    return law


def sampled_law(target, draft, prompt, settings):
    counts = Counter()
    for seed in range(RUNS):
        s = Settings(**{**settings.__dict__, "seed": seed})
        generator = new_generator(target.device, seed)
        drafter = build_drafter("draft", s, generator, target, draft)
        counts[tuple(generated_ids(generate(target, prompt, s, drafter, generator))[:2])] += 1
    return counts


SETTINGS = [
    Settings(max_new_tokens=3, gamma=2, temperature=1.0),
    Settings(max_new_tokens=3, gamma=2, temperature=0.8, top_k=5, top_p=0.9),
    Settings(max_new_tokens=3, gamma=2, temperature=1.0, adaptive=True),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=["t1", "t0.8-k5-p0.9", "t1-adaptive"])
def test_speculative_sampling_is_lossless(small, settings):
    target, draft, prompt = small
    law = exact_two_token_law(target, prompt, settings)
    assert chi_square_p(sampled_law(target, draft, prompt, settings), law, RUNS) > 1e-3


def test_speculative_sampling_with_an_int8_draft_is_lossless(small):
    """The draft's precision changes only its q; the rejection rule keeps the target's own law."""
    from specviz.models.quantize import int8_dynamic

    target, draft, prompt = small
    quantized = loaded(int8_dynamic(perturbed(target.model, seed=12, scale=0.5)), target.tokenizer)
    law = exact_two_token_law(target, prompt, SETTINGS[0])
    assert chi_square_p(sampled_law(target, quantized, prompt, SETTINGS[0]), law, RUNS) > 1e-3


def test_engine_test_catches_a_wrong_residual(small, monkeypatch):
    target, draft, prompt = small
    monkeypatch.setattr(verify, "residual", lambda p, q: p)
    law = exact_two_token_law(target, prompt, SETTINGS[0])
    assert chi_square_p(sampled_law(target, draft, prompt, SETTINGS[0]), law, RUNS) < 1e-6


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


class SiblingsDrafter(BaseDrafter):
    """Always proposes the same three alternatives (a deterministic tree with siblings at two levels)."""

    def __init__(self, tok):
        a, b, c = tok.convert_tokens_to_ids(["a", "b", "c"])
        self.candidates = [[a, b], [a, c], [b], [c, a]]

    def max_nodes(self, gamma):
        return 6

    def propose(self, tokens, gamma):
        return Proposal(tuple(tuple(c[:gamma]) for c in self.candidates))


def lookup_law(target, prompt, settings, make_drafter):
    counts = Counter()
    for seed in range(RUNS):
        s = Settings(**{**settings.__dict__, "seed": seed})
        counts[
            tuple(generated_ids(generate(target, prompt, s, make_drafter(s), new_generator(target.device, seed)))[:2])
        ] += 1
    return counts


@pytest.mark.parametrize("which", ["ngram chain", "tree with siblings"])
def test_tree_verification_is_lossless_through_the_engine(small, which):
    target, _, _ = small
    tok = target.tokenizer
    prompt = tok.encode("a b a b a")  # n-gram lookup matches at once
    settings = SETTINGS[0]
    make = (
        (lambda s: build_drafter("ngram", s, None, target))
        if which == "ngram chain"
        else (lambda s: SiblingsDrafter(tok))
    )
    law = exact_two_token_law(target, prompt, settings)
    assert chi_square_p(lookup_law(target, prompt, settings, make), law, RUNS) > 1e-3


def test_engine_tree_test_catches_a_wrong_residual(small, monkeypatch):
    target, _, _ = small
    monkeypatch.setattr(verify, "remove", lambda dist, x: dist)
    prompt = target.tokenizer.encode("a b a b a")
    law = exact_two_token_law(target, prompt, SETTINGS[0])
    counts = lookup_law(target, prompt, SETTINGS[0], lambda s: SiblingsDrafter(target.tokenizer))
    assert chi_square_p(counts, law, RUNS) < 1e-6


def test_medusa_lossless_mode_keeps_the_target_distribution(small):
    from specviz.drafters.medusa.drafter import MedusaDrafter
    from specviz.drafters.medusa.heads import MedusaHeads

    target, _, _ = small
    prompt = target.tokenizer.encode("a b c")
    torch.manual_seed(3)
    heads = MedusaHeads(target.model.config.hidden_size, target.vocab_size, 4, 1)
    law = exact_two_token_law(target, prompt, SETTINGS[0])
    counts = lookup_law(target, prompt, SETTINGS[0], lambda s: MedusaDrafter(heads))
    assert chi_square_p(counts, law, RUNS) > 1e-3
