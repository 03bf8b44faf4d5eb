"""Speculative sampling through the whole engine: the output distribution is the target's own."""

import torch
from laws import REFUSED, chain, exact_law

import specviz.engine.verify as verify
from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.events import generated_ids
from specviz.settings import Settings

# The draft model's chain sampled with every filter of the law on (temperature, top-k, top-p) and γ adapting between
# steps; the mutant's test and the Medusa law take plain temperature 1.
SAMPLED = Settings(max_new_tokens=3, gamma=2, temperature=0.8, top_k=5, top_p=0.9, adaptive=True)
PLAIN_T1 = Settings(max_new_tokens=3, gamma=2, temperature=1.0)


def test_speculative_sampling_is_lossless(small, draws):
    target, draft, prompt = small
    assert draws.law_p(target, prompt, SAMPLED, chain(target, draft)) > 1e-3


def test_engine_test_catches_a_wrong_residual(small, draws, monkeypatch):
    target, draft, prompt = small
    monkeypatch.setattr(verify, "residual", lambda p, q: p)
    assert draws.mutant_p(target, prompt, PLAIN_T1, chain(target, draft)) < REFUSED


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


def test_medusa_lossless_mode_keeps_the_target_distribution(small, draws):
    from specviz.drafters.medusa.heads import MedusaHeads
    from specviz.drafters.medusa.medusa_drafter import MedusaDrafter

    target, _, _ = small
    prompt = target.tokenizer.encode("a b c")
    torch.manual_seed(3)
    heads = MedusaHeads(target.model.config.hidden_size, target.vocab_size, 4, 1)
    counts = draws(target, prompt, PLAIN_T1, lambda s, generator: MedusaDrafter(heads))
    assert draws.p(counts, exact_law(target, prompt, PLAIN_T1)) > 1e-3
