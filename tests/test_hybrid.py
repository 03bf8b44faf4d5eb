"""The hybrid drafter: each step a lookup or a model drafter (the draft model, or the target's EAGLE head) drafts,
whichever promises more tokens per second. Greedy output equals plain decoding whatever it picks, sampling keeps the
target's law (and the harness catches a wrong tree rule through it), each step says where its draft came from, and
the choice follows the measured worth."""

import dataclasses

import pytest
import torch
from laws import REFUSED
from test_eagle import random_head

import specviz.engine.verify as verify
from specviz.drafters.hybrid import BUCKETS, HybridDrafter, bucket
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix import SuffixDrafter
from specviz.drafters.suffix_index import RunMemory
from specviz.engine import generate
from specviz.engine.step import BaseDrafter, Proposal, Provenance
from specviz.events import HEAD, MODEL, PROMPT, generated_ids
from specviz.render.explain import explain_step
from specviz.runs import generate_named
from specviz.settings import Settings

# (γ, adaptive) on each prompt: each draft and branch meets all six over the three prompts.
HYBRID_RUNS = {
    "w1 w2 w3 w4 w1 w2 w3 w4 w1 w2": ((1, False), (6, True)),
    "w5 w9 w33": ((3, False), (1, True)),
    "w7": ((6, False), (3, True)),
}


@pytest.mark.parametrize("branch", ["none", "copy"])
@pytest.mark.parametrize("which", ["same", "partial", "unrelated"])
@pytest.mark.parametrize("prompt", list(HYBRID_RUNS))
def test_greedy_hybrid_equals_plain(target, drafts, tokenizer, which, prompt, branch):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    for gamma, adaptive in HYBRID_RUNS[prompt]:
        settings = Settings(max_new_tokens=40, gamma=gamma, adaptive=adaptive)
        events = list(generate_named(target, ids, settings, "hybrid", drafts[which], {"hybrid_branch": branch}))
        assert generated_ids(events) == plain, f"gamma={gamma} adaptive={adaptive}"


@pytest.mark.parametrize("prompt", ["w1 w2 w3 w4 w1 w2 w3 w4 w1 w2", "w5 w9 w33", "w7"])
def test_greedy_hybrid_with_the_eagle_head_equals_plain(target, tokenizer, prompt):
    """The EAGLE head as the model side: it reads the target's features, catching up over the steps the lookup
    drafted, so a copied stretch must leave its cache and features right for the next tree it grows."""
    ids, head = tokenizer.encode(prompt), random_head(target, seed=4)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    options = {"hybrid_model": "eagle", "eagle": (head, (-1,))}
    for gamma in (1, 3, 6):
        for adaptive in (False, True):
            events = list(
                generate_named(
                    target, ids, Settings(max_new_tokens=40, gamma=gamma, adaptive=adaptive), "hybrid", options=options
                )
            )
            assert generated_ids(events) == plain, f"gamma={gamma} adaptive={adaptive}"
    if prompt.startswith("w1"):  # each step names its origin, and the step explanation says who wrote a draft
        drafted = [
            e
            for e in generate_named(target, ids, Settings(max_new_tokens=40, gamma=4), "hybrid", options=options)
            if e.proposed
        ]
        origins = {e.origin for e in drafted}
        assert PROMPT in origins and HEAD in origins and MODEL not in origins
        by_head = next(e for e in drafted if e.origin == HEAD)
        assert "The EAGLE head wrote this draft" in explain_step(by_head, tokenizer.decode)


def test_each_step_says_whether_it_copied_or_the_model_drafted(target, drafts, tokenizer):
    ids = tokenizer.encode("w1 w2 w3 w4 w1 w2 w3 w4 w1 w2")
    origins = {
        e.origin
        for e in generate_named(target, ids, Settings(max_new_tokens=40, gamma=4), "hybrid", drafts["partial"])
        if e.proposed
    }
    assert PROMPT in origins and MODEL in origins


def test_earlier_runs_are_copied_through_the_callers_memory(target, drafts, tokenizer):
    memory, ids = RunMemory(), tokenizer.encode("w3 w9 w27")
    settings = Settings(max_new_tokens=30, gamma=6)
    first = list(generate_named(target, ids, settings, "hybrid", drafts["unrelated"], memory=memory))
    memory.remember(ids, generated_ids(first))
    again = list(generate_named(target, ids, settings, "hybrid", drafts["unrelated"], memory=memory))
    assert generated_ids(again) == generated_ids(first)
    assert len(again) < len(first) and "an earlier run" in {e.origin for e in again}


def test_the_choice_follows_the_measured_worth(target, drafts):
    drafter = build_drafter("hybrid", Settings(), None, target, drafts["partial"])
    assert isinstance(drafter, HybridDrafter)
    assert drafter.rate(bucket(16)) > drafter.rate(MODEL) > drafter.rate(bucket(1))  # the priors
    for _ in range(20):  # long matches measured poor, the model measured good and as fast
        drafter.tokens[bucket(16)].add(1)
        drafter.tokens[MODEL].add(4)
        drafter.seconds[MODEL].add(1.0)
        drafter.seconds["lookup"].add(1.0)
    assert drafter.rate(MODEL) > drafter.rate(bucket(16))


SAMPLED = Settings(max_new_tokens=3, gamma=2, temperature=1.0)


def hybrid_p(draws, target, prompt, draft=None, options=None, mutant: bool = False) -> float:
    """The p-value of the hybrid's sampled output against the target's law (a mutant's: stopped once refused)."""
    hybrid = lambda s, generator: build_drafter("hybrid", s, None, target, draft, options)  # noqa: E731 (one per run)
    return (draws.mutant_p if mutant else draws.law_p)(target, prompt, SAMPLED, hybrid)


def test_sampled_hybrid_keeps_the_targets_law(small, draws):
    """The lookup's copy, the model's sampled chain and, with the copy branch, a short match's copy riding beside the
    model's tree (one tree of point masses), step after step: the hybrid's every path."""
    target, draft, _ = small
    prompt = target.tokenizer.encode("a b a b a")  # the lookup matches at once; the model drafts after
    assert hybrid_p(draws, target, prompt, draft, {"hybrid_branch": "copy"}) > 1e-3


def test_a_tree_rule_that_keeps_a_rejected_sibling_drawable_is_caught_through_the_hybrid(small, draws, monkeypatch):
    """Both sides of the hybrid propose point masses (a copy, the model's tree): a rejected sibling left drawable in
    what the next token comes from must fail the same test."""
    monkeypatch.setattr(verify, "remove", lambda dist, x: dist)
    target, draft, prompt = small
    assert hybrid_p(draws, target, prompt, draft, mutant=True) < REFUSED


def test_the_copy_rides_beside_the_models_tree_as_one_more_branch(target, drafts):
    drafter = build_drafter("hybrid", Settings(), None, target, drafts["partial"], {"hybrid_branch": "copy"})
    by_model, by_prompt = Provenance(origin=MODEL), Provenance(origin=PROMPT)
    tree, copy = Proposal(((1, 2), (3,)), source=by_model), Proposal(((5, 6, 7),), source=by_prompt)
    merged = drafter.beside(tree, copy)
    assert merged.candidates == ((1, 2), (3,), (5, 6, 7))
    assert [merged.origin_of(i) for i in range(3)] == [MODEL, MODEL, PROMPT]
    assert drafter.beside(tree, Proposal(((1, 2),), source=by_prompt)) == tree  # the tree already holds the copy
    assert drafter.beside(tree, None) == tree
    sampled = Proposal(((1, 2),), q=torch.full((2, 8), 0.125), source=by_model)  # a sampled chain's q is its alone
    assert drafter.beside(sampled, copy) is sampled
    alone = build_drafter("hybrid", Settings(), None, target, drafts["partial"])  # by default off on a CPU
    assert alone.beside(tree, copy) == tree


def test_the_copy_branch_rides_by_default_where_the_target_is_on_a_gpu(target, drafts):
    """auto: on where a wider verify costs almost nothing (a GPU), off on a CPU; copy and none as asked."""
    on_gpu = dataclasses.replace(target, device=torch.device("cuda"))  # built, never run: no GPU needed
    assert build_drafter("hybrid", Settings(), None, on_gpu, drafts["partial"]).branch
    assert not build_drafter("hybrid", Settings(), None, target, drafts["partial"]).branch
    assert not build_drafter("hybrid", Settings(), None, on_gpu, drafts["partial"], {"hybrid_branch": "none"}).branch
    assert build_drafter("hybrid", Settings(), None, target, drafts["partial"], {"hybrid_branch": "copy"}).branch


class TwoGuesses(BaseDrafter):
    """A model side that always drafts the same two one-token branches (point masses), whatever the text."""

    def propose(self, tokens, gamma):
        return Proposal(((1,), (2,)), forwards=1)


def test_a_step_the_model_drafted_can_be_won_by_the_copy_beside_it(target, tokenizer):
    """The lookup never drafts alone here (its worth set near zero), so every copy rides beside the model's two
    guesses: where the copy holds, the shown candidate is the copy, named as copied, and the output stays plain's."""
    ids = tokenizer.encode("w5 w9 w33")
    hybrid = HybridDrafter(SuffixDrafter(), TwoGuesses(), branch=True)
    for b in range(len(BUCKETS)):
        hybrid.tokens[b].value = 1e-6
    events = list(generate(target, ids, Settings(max_new_tokens=40, gamma=4), hybrid))
    assert generated_ids(events) == generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    won = [e for e in events if e.origin not in (None, MODEL) and e.accepted > 0]
    assert won and all(len(e.candidates) == 3 and e.draft_forwards == 1 for e in won)


class DearModel(TwoGuesses):
    """A model side whose drafted token costs as much as a plain step, as measured before the run; it counts how
    often it is asked."""

    profile = dataclasses.replace(TwoGuesses.profile, position_s=1.0)

    def __init__(self):
        self.asked = self.started = 0

    def start(self, prompt_ids, target=None, judges=None):
        self.started += 1

    def propose(self, tokens, gamma):
        self.asked += 1
        return super().propose(tokens, gamma)


def test_a_model_side_that_could_never_pay_is_left_out_and_only_the_lookup_drafts():
    """Where the costs measured before the run say even drafts that all held would lose (a Q4 draft model on a CPU,
    against llama.cpp's multi-token verify), the hybrid never reads with its model: a probe would only cost."""
    from specviz.engine.adaptive import GammaController
    from specviz.engine.step import Judges

    controller = GammaController(8, forward_1=1.0, curve={1: 1.0, 2: 1.6, 4: 2.9, 8: 5.0})
    assert not controller.pays_at(1.0) and controller.pays_at(0.0)
    model = DearModel()
    hybrid = HybridDrafter(SuffixDrafter(), model)
    hybrid.start([1, 2, 3, 1, 2], judges=controller.judges())
    assert hybrid.propose([1, 2, 3, 1, 2], 4).candidates[0][:1] == (3,)  # the lookup's copy
    assert hybrid.propose([1, 2, 3, 1, 2, 3, 9], 4) is None  # nothing to copy: a plain step, not the model's guess
    assert model.started == model.asked == 0
    fair = HybridDrafter(SuffixDrafter(), DearModel())  # no measured curve: the judges cannot say, the model drafts
    fair.start([1, 2, 3], judges=Judges(lambda paths, depth: len(paths)))
    assert fair.propose([1, 2, 3, 9], 4) is not None and fair.model.asked == 1


def test_a_probe_priced_by_a_measured_curve_drafts_the_shortest_draft_that_could_pay():
    from specviz.engine.adaptive import GammaController

    # a verify of 2 tokens costs 1.6 plain steps; a free lookup whose drafts hardly hold
    controller = GammaController(8, forward_1=1.0, draft_per_token=0.0, curve={1: 1.0, 2: 1.6, 4: 2.9, 8: 5.0})
    controller.accepted, controller.tested = 0.2, 2.0
    choices = [controller.next_gamma() for _ in range(9)]
    assert choices == [0] * 8 + [1]


def test_a_model_side_left_out_stays_out_when_the_judges_change_their_mind():
    """The judges' estimates move as a run measures its steps; a model side left out at the start never started, so
    the hybrid keeps it out for the whole run rather than ask an unstarted model to draft."""
    from specviz.engine.step import Judges

    verdict = {"pays": False}
    hybrid = HybridDrafter(SuffixDrafter(), DearModel())
    hybrid.start([1, 2, 3, 1, 2], judges=Judges(lambda paths, depth: len(paths), None, lambda cost: verdict["pays"]))
    verdict["pays"] = True  # later in the run, a draft of this cost could pay
    assert hybrid.propose([1, 2, 3, 1, 2, 3, 9], 4) is None  # still the lookup alone: nothing to copy here
    assert hybrid.model.started == hybrid.model.asked == 0
