"""The sampling test with teeth: over several steps (partial acceptance, rollback and tree compaction feeding the law
of later tokens), the engine's output must follow the target's exact law of the first HORIZON tokens, and each
mutant (a cache or position bug a careful reader could write) must fail the very same test."""

from collections import Counter

import pytest
import torch
from test_engine_sampling import SiblingsDrafter
from tiny import loaded, perturbed, tiny_llama, word_tokenizer

from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.engine.cached_lm import CachedLM
from specviz.engine.sampling import probabilities
from specviz.events import generated_ids
from specviz.settings import Settings
from specviz.stats import chi_square_p

HORIZON = 4  # tokens whose joint law is tested: a step of γ 2 and the steps after it
RUNS = 4000
SETTINGS = Settings(max_new_tokens=HORIZON, gamma=2, temperature=1.0)


@pytest.fixture(scope="module")
def sensitive():
    """A vocabulary of 6 and a target whose next token depends strongly on the context and on positions (a sharper
    head and attention than the other sampling tests use, fast-turning rotary positions), so a stale, missing or
    misplaced cache entry moves the law of later tokens."""
    tok = word_tokenizer(["a", "b", "c", "d"])
    target_model = tiny_llama(len(tok), seed=21, sharpness=1.5, rope_theta=2.0)  # neighbouring positions differ a lot
    with torch.no_grad():
        target_model.lm_head.weight[0] = target_model.lm_head.weight[2] * 0.3  # EOS possible, not dominant
        for layer in target_model.model.layers:  # sharp attention: which entry sits where, and when, matters
            layer.self_attn.q_proj.weight.mul_(12)
            layer.self_attn.k_proj.weight.mul_(12)
    draft = loaded(perturbed(target_model, seed=22, scale=0.5), tok)
    return loaded(target_model, tok), draft, tok


def exact_law(target, prompt: list[int]) -> dict[tuple[int, ...], float]:
    """P(first HORIZON tokens) of the target alone, by walking every continuation (an EOS ends one)."""
    law = {}

    def walk(prefix: list[int], prob: float) -> None:
        if len(prefix) == HORIZON or (prefix and prefix[-1] in target.eos_ids):
            law[tuple(prefix)] = prob
            return
        with torch.no_grad():
            logits = target.model(torch.tensor([prompt + prefix])).logits[0, -1:]
        for token, p in enumerate(probabilities(logits, SETTINGS)[0].tolist()):
            if p > 0:
                walk(prefix + [token], prob * p)

    walk([], 1.0)
    return law


def sampled(target, prompt: list[int], make_drafter) -> Counter:
    counts = Counter()
    for seed in range(RUNS):
        s = Settings(**{**SETTINGS.__dict__, "seed": seed})
        generator = new_generator(target.device, seed)
        counts[tuple(generated_ids(generate(target, prompt, s, make_drafter(s, generator), generator))[:HORIZON])] += 1
    return counts


def chain_drafter(target, draft):
    return lambda s, generator: build_drafter("draft", s, generator, target, draft)


def tree_drafter(tok):
    return lambda s, generator: SiblingsDrafter(tok)


def p_value(sensitive, which: str) -> float:
    target, draft, tok = sensitive
    prompt = tok.encode("a b c d")
    make = chain_drafter(target, draft) if which == "chain" else tree_drafter(tok)
    return chi_square_p(sampled(target, prompt, make), exact_law(target, prompt), RUNS)


@pytest.mark.parametrize("which", ["chain", "tree"])
def test_several_steps_of_speculative_sampling_follow_the_targets_law(sensitive, which):
    assert p_value(sensitive, which) > 1e-3


def _crop_one_short(original):
    def drop_tail(self, length):  # a rollback that leaves the first rejected entry in the cache
        if length + 1 < self.length:
            original(self, length + 1)

    return drop_tail


def _positions_by_index(tree, prefix, device=None):  # every node at its index, not its depth
    return torch.arange(prefix, prefix + 1 + len(tree.tokens), device=device).unsqueeze(0)


MUTANTS = {
    "rollback crops one entry short": (
        "chain",
        lambda mp: mp.setattr(CachedLM, "_drop_tail", _crop_one_short(CachedLM._drop_tail)),
    ),
    "rollback leaves the rejected entries": (
        "chain",
        lambda mp: mp.setattr(CachedLM, "_drop_tail", lambda self, length: None),
    ),
    "compaction keeps the first branch": (
        "tree",
        lambda mp: mp.setattr(CachedLM, "keep", lambda self, start, offsets: self.truncate(start + len(offsets))),
    ),
    "tree positions by index, not depth": (
        "tree",
        lambda mp: mp.setattr("specviz.engine.cached_lm.tree_positions", _positions_by_index),
    ),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_each_cache_or_position_mutant_fails_the_same_test(sensitive, monkeypatch, mutant):
    which, apply = MUTANTS[mutant]
    apply(monkeypatch)
    assert p_value(sensitive, which) < 1e-6
