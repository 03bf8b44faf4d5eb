"""A draft model's own tree: its top candidates at each depth, grown where it is most confident and verified together.
Greedy output equals plain decoding for any draft, each node's draft logits are what its path alone gives, a tree
accepts at least what the chain accepts, sampling keeps the target's law, and a tree rule that skips the renormalising
after a rejected sibling fails that test."""

import pytest
import torch
from laws import REFUSED

import specviz.engine.verify as verify
from specviz.drafters.draft_model import DraftModelDrafter, DraftOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.tree_growth import best_next, columns_to, grow, tokens_to
from specviz.engine import generate
from specviz.engine.adaptive import GammaController
from specviz.engine.cached_lm import CachedLM
from specviz.engine.static_lm import StaticLM
from specviz.engine.tree import draft_position
from specviz.errors import InvalidRequest
from specviz.events import generated_ids, summarize
from specviz.runs import generate_named
from specviz.settings import Settings

TREE = {"draft_tree": "tree", "draft_nodes": 10}


# Each draft meets γ 1, 2 and 5 twice over the three prompts.
TREE_GAMMAS = {"w1 w2 w3 w4": (1, 5), "w5 w5 w5 w5 w5 w5": (2, 5), "w33": (1, 2)}


@pytest.mark.parametrize("which", ["same", "partial", "unrelated", "int8"])
@pytest.mark.parametrize("prompt", list(TREE_GAMMAS))
def test_greedy_draft_trees_equal_plain(target, drafts, tokenizer, which, prompt):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    for gamma in TREE_GAMMAS[prompt]:
        events = list(
            generate_named(target, ids, Settings(max_new_tokens=40, gamma=gamma), "draft", drafts[which], TREE)
        )
        assert generated_ids(events) == plain, f"gamma={gamma}"
        if gamma > 1:
            assert any(e.candidates for e in events)  # really verified as trees


def test_adaptive_draft_trees_equal_plain(target, drafts, tokenizer):
    ids = tokenizer.encode("w1 w2 w3 w4 w5")
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=60)))
    settings = Settings(max_new_tokens=60, gamma=6, adaptive=True)
    assert generated_ids(generate_named(target, ids, settings, "draft", drafts["partial"], TREE)) == plain


@pytest.mark.parametrize("static", [False, True])
def test_every_branch_gets_what_its_path_alone_gives(target, drafts, tokenizer, static):
    """The draft's rows for the tree (mask, positions = depth, cache columns) against the draft run causally over the
    committed text and the node's own path, in the dynamic and the static cache."""
    model = drafts["unrelated"].model
    tokens = tokenizer.encode("w3 w9 w27 w4 w16 w8")
    lm = StaticLM(model, 64) if static else CachedLM(model)
    first = best_next(torch.log_softmax(lm.extend(torch.tensor(tokens), last_only=True).float(), -1), 3)
    rows = {}

    def expand(nodes, chosen, depth):
        past = lm.length
        logits = lm.extend_branches(
            [nodes[n].token for n in chosen],
            [draft_position(len(tokens), depth)] * len(chosen),
            len(tokens),
            [columns_to(nodes, nodes[n].parent) for n in chosen],
        )
        for row, n in enumerate(chosen):
            nodes[n].column, rows[n] = past + row, logits[row]
        return best_next(torch.log_softmax(logits.float(), -1), 3)

    with torch.inference_mode():
        nodes = grow((first[0][0], first[1][0]), expand, 4, 3)
        assert {nodes[n].depth for n in rows} == {1, 2, 3}
        for n, row in rows.items():
            alone = model(torch.tensor([tokens + list(tokens_to(nodes, n))])).logits[0, -1]
            assert torch.allclose(row, alone, atol=1e-4)


def test_a_tree_accepts_at_least_what_the_chain_accepts(target, drafts, tokenizer):
    ids = tokenizer.encode("w1 w2 w3 w4")
    settings = Settings(max_new_tokens=60, gamma=4)
    chain = summarize(list(generate_named(target, ids, settings, "draft", drafts["partial"])))
    tree = summarize(list(generate_named(target, ids, settings, "draft", drafts["partial"], TREE)))
    assert tree.mean_tokens_per_step >= chain.mean_tokens_per_step
    assert tree.target_forwards <= chain.target_forwards


def test_the_tree_keeps_its_node_budget_and_leaves_the_draft_cache_committed(target, drafts, tokenizer):
    tokens = tokenizer.encode("w1 w2 w3")
    settings = Settings(max_new_tokens=20, gamma=4)
    drafter = DraftModelDrafter(drafts["partial"], settings, None, target.vocab_size, "tree", 7)
    drafter.start(tokens)
    proposal = drafter.propose(tokens, 4)
    assert len(proposal.tree().tokens) == 7 and proposal.q is None
    assert drafter.lm.length == len(tokens)


def test_a_trees_size_follows_the_measured_verify_cost():
    """Nodes are kept while their chance of being accepted pays for the verify tokens they add."""
    paths = [[0.9], [0.9, 0.8], [0.3], [0.9, 0.8, 0.7], [0.2], [0.9, 0.1]]  # each node's path, best first
    cheap = GammaController(8, draft_per_token=0.05, forward_1=1.0, slope=0.01)
    dear = GammaController(8, draft_per_token=0.05, forward_1=1.0, slope=0.3)
    assert cheap.tree_size(paths, 3) == 6 > dear.tree_size(paths, 3) >= 2
    for _ in range(50):  # drafts at 0.9 that the target always rejects: the calibration says nothing pays
        dear.calibration.observe((0.9,), 0)
    assert dear.tree_size(paths, 3) <= 1


def test_draft_tree_options_are_checked():
    with pytest.raises(InvalidRequest, match="draft shape must be chain or tree"):
        DraftOptions(draft_tree="bush")
    with pytest.raises(InvalidRequest, match="draft tree nodes must be an integer in 2..64"):
        DraftOptions(draft_nodes=1)


SAMPLED = Settings(max_new_tokens=3, gamma=2, temperature=1.0)


def tree_p(draws, target, draft, prompt, mutant: bool = False) -> float:
    """The p-value of the draft model's sampled trees against the target's law (a mutant's: stopped once refused)."""
    options = {"draft_tree": "tree", "draft_nodes": 6}
    tree = lambda s, generator: build_drafter("draft", s, None, target, draft, options)  # noqa: E731 (one per run)
    return (draws.mutant_p if mutant else draws.law_p)(target, prompt, SAMPLED, tree)


def test_sampled_draft_trees_keep_the_targets_law(small, draws):
    assert tree_p(draws, *small) > 1e-3


def test_a_tree_rule_that_keeps_a_rejected_sibling_drawable_is_caught(small, draws, monkeypatch):
    """The mutant: after a sibling is rejected, it stays in what the next token is drawn from."""
    monkeypatch.setattr(verify, "remove", lambda dist, x: dist)
    assert tree_p(draws, *small, mutant=True) < REFUSED
