"""The sampling law on the llama.cpp runtime: the acceptance rule on llama.cpp's own verify distributions keeps the
target's law of the first tokens (a draft model's chain and a tree with siblings, through rollback and sequences),
a wrong residual and each silent cache mutant of the runtime fail the very same test, and a stale cache entry does
not pass silently: llama.cpp refuses the next forward. The tiny models of the transformers law tests, written as
GGUF files (float32) and run by llama.cpp."""

import pytest
from laws import REFUSED, SiblingsDrafter, chain, exact_law
from tiny_gguf import load_tiny, save_gguf

import specviz.engine.verify as verify
from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.runtimes.llama_cpp.llama_lm import MAIN, LlamaLM
from specviz.settings import Settings

HORIZON = 4
SEVERAL = Settings(max_new_tokens=HORIZON, gamma=2, temperature=1.0)
FIRST_TWO = Settings(max_new_tokens=3, gamma=2, temperature=0.8, top_k=5, top_p=0.9)
TREE_RUNS = 4000


@pytest.fixture(scope="module")
def on_llama(tmp_path_factory, small, sensitive):
    """`small` and `sensitive` (conftest.py), each target and draft as llama.cpp loads them."""
    folder = tmp_path_factory.mktemp("law-gguf")
    (small_target, small_draft, prompt), (target, draft, tok) = small, sensitive

    def gguf(loaded, name):
        return load_tiny(save_gguf(loaded.model, folder / f"{name}.gguf"), loaded.tokenizer, name)

    return {
        "small": (gguf(small_target, "small-target"), gguf(small_draft, "small-draft"), prompt),
        "sensitive": (gguf(target, "sensitive-target"), gguf(draft, "sensitive-draft"), tok),
    }


def several_steps(on_llama, draws, which: str, refuse_below: float | None = None) -> float:
    target, draft, tok = on_llama["sensitive"]
    prompt = tok.encode("a b c d")
    make = chain(target, draft) if which == "chain" else (lambda s, generator: SiblingsDrafter(tok))
    law, runs = exact_law(target, prompt, SEVERAL, HORIZON), draws.runs if which == "chain" else TREE_RUNS
    if refuse_below is not None:
        return draws.until_refused(target, prompt, SEVERAL, make, law, HORIZON, runs, refuse_below)
    return draws.p(draws(target, prompt, SEVERAL, make, horizon=HORIZON, runs=runs), law)


def test_speculative_sampling_on_llama_cpp_keeps_the_targets_law(on_llama, draws):
    target, draft, prompt = on_llama["small"]
    assert draws.law_p(target, prompt, FIRST_TWO, chain(target, draft)) > 1e-3


def test_a_wrong_residual_on_llama_cpp_is_caught(on_llama, draws, monkeypatch):
    target, draft, prompt = on_llama["small"]
    monkeypatch.setattr(verify, "residual", lambda p, q: p)
    assert (
        draws.mutant_p(target, prompt, Settings(max_new_tokens=3, gamma=2, temperature=1.0), chain(target, draft))
        < REFUSED
    )


@pytest.mark.parametrize("which", ["chain", "tree"])
def test_several_steps_on_llama_cpp_follow_the_targets_law(on_llama, draws, which):
    assert several_steps(on_llama, draws, which) > 1e-3


def _leaves_see_no_prefix(original):
    def extend_tree(self, root, tree):
        share = self.ctx.share
        self.ctx.share = lambda source, destination, start=-1, end=-1: (
            None if source == MAIN else share(source, destination, start, end)
        )
        try:
            return original(self, root, tree)
        finally:
            self.ctx.share = share

    return extend_tree


def _path_from_the_last_leaf(original):
    def keep(self, committed, nodes):  # the accepted positions' cells read from the last leaf, whatever it holds
        if self.leaves and nodes:
            last = self.leaves[-1][0]
            self.leaves = [(last, tuple(nodes))] + [leaf for leaf in self.leaves if leaf[0] != last]
        return original(self, committed, nodes)

    return keep


MUTANTS = {  # each computes every position, and a law it moves, without llama.cpp noticing
    "the accepted path is taken from the last leaf's cells": lambda mp: mp.setattr(
        LlamaLM, "keep", _path_from_the_last_leaf(LlamaLM.keep)
    ),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_each_silent_cache_mutant_of_the_runtime_fails_the_same_test(on_llama, draws, monkeypatch, mutant):
    MUTANTS[mutant](monkeypatch)
    assert several_steps(on_llama, draws, "tree", refuse_below=REFUSED) < REFUSED


def _short_rollback(original):
    def truncate(self, length):  # the cell at `length` stays in sequence 0; the count says it went
        if length + 1 < self.length:
            original(self, length + 1)
            self.chain = self.length = length
        else:
            original(self, length)

    return truncate


REFUSED_LOUDLY = {  # the transformers runtime's silent kind of bug: llama.cpp's own checks stop it
    "a rollback leaves the first rejected entry": ("chain", lambda mp: mp.setattr(
        LlamaLM, "truncate", _short_rollback(LlamaLM.truncate))),
    "a verify tree's leaves do not hold the prefix": ("tree", lambda mp: mp.setattr(
        LlamaLM, "extend_tree", _leaves_see_no_prefix(LlamaLM.extend_tree))),
}  # fmt: skip


@pytest.mark.parametrize("mutant", list(REFUSED_LOUDLY))
def test_a_stale_or_missing_cache_entry_is_refused_not_passed_silently(on_llama, draws, monkeypatch, mutant):
    """llama.cpp requires each sequence's positions to stay consecutive and the sequences one token joins to hold the
    same positions, so a stale entry or a leaf without its prefix fails the next forward loudly instead of being
    read."""
    which, apply = REFUSED_LOUDLY[mutant]
    apply(monkeypatch)
    target, draft, tok = on_llama["sensitive"]
    prompt = tok.encode("a b c d")
    with pytest.raises(RuntimeError, match="refused"):
        for seed in range(200):
            settings = Settings(**{**SEVERAL.__dict__, "seed": seed, "max_new_tokens": 12})
            generator = new_generator(target.device, seed)
            made = build_drafter("draft", settings, generator, target, draft) if which == "chain" else None
            list(generate(target, prompt, settings, made or SiblingsDrafter(tok), generator))
