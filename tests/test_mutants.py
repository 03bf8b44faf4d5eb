"""The sampling test with teeth: over several steps (partial acceptance, rollback and tree compaction feeding the law
of later tokens), the engine's output must follow the target's exact law of the first HORIZON tokens, and each
mutant (a cache or position bug a careful reader could write) must fail the very same test."""

import pytest
import torch
from laws import REFUSED, SiblingsDrafter, exact_law
from laws import RUNS as LAW_RUNS

from specviz.drafters.registry import build_drafter
from specviz.engine.cached_lm import CachedLM
from specviz.settings import Settings

HORIZON = 4  # tokens whose joint law is tested: a step of γ 2 and the steps after it
# Seeded runs per law: the chain's (laws.RUNS, as EAGLE's and DFlash's on the same target; its rollback mutants show
# within 500) against the tree's, whose compaction and position mutants move the law of the later tokens by little
# and need about 3,000 runs to show.
RUNS = LAW_RUNS
TREE_RUNS = 4000
SETTINGS = Settings(max_new_tokens=HORIZON, gamma=2, temperature=1.0)


def p_value(sensitive, draws, which: str, refuse_below: float | None = None) -> float:
    """The p-value of RUNS (a tree: TREE_RUNS) seeded runs against the target's exact law; with `refuse_below`,
    stopped as soon as it falls below (a mutant's test needs no more)."""
    target, draft, tok = sensitive
    prompt = tok.encode("a b c d")
    make = (
        (lambda s, generator: build_drafter("draft", s, generator, target, draft))
        if which == "chain"
        else (lambda s, generator: SiblingsDrafter(tok))
    )
    law, runs = exact_law(target, prompt, SETTINGS, HORIZON), RUNS if which == "chain" else TREE_RUNS
    if refuse_below is not None:
        return draws.until_refused(target, prompt, SETTINGS, make, law, HORIZON, runs, refuse_below)
    return draws.p(draws(target, prompt, SETTINGS, make, horizon=HORIZON, runs=runs), law)


@pytest.mark.parametrize("which", ["chain", "tree"])
def test_several_steps_of_speculative_sampling_follow_the_targets_law(sensitive, draws, which):
    assert p_value(sensitive, draws, which) > 1e-3


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
def test_each_cache_or_position_mutant_fails_the_same_test(sensitive, draws, monkeypatch, mutant):
    which, apply = MUTANTS[mutant]
    apply(monkeypatch)
    assert p_value(sensitive, draws, which, refuse_below=REFUSED) < REFUSED
