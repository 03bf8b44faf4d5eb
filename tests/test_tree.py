"""Token trees: the trie and its mask, tree attention on a real model, cache compaction, tree verdicts."""

from collections import Counter

import pytest
import torch

import specviz.engine.verify as verify
from specviz.analysis.stats import chi_square_p
from specviz.engine.cached_lm import CachedLM
from specviz.engine.tree import ROOT, build_tree, tree_mask, tree_positions
from specviz.engine.verify import verify_greedy, verify_tree_sampled


def test_the_trie_shares_prefixes():
    tree = build_tree([[5, 6, 7], [5, 8], [9], [5, 6]])
    assert tree.tokens == (5, 6, 7, 8, 9)
    assert tree.parents == (ROOT, 0, 1, 0, ROOT)
    assert tree.paths == ((0, 1, 2), (0, 3), (4,), (0, 1))
    assert tree.depths == (1, 2, 3, 2, 1)
    assert tree.children(ROOT) == [0, 4] and tree.children(0) == [1, 3] and tree.path_to(2) == [0, 1, 2]


def test_mask_and_positions_match_a_hand_written_tree():
    tree = build_tree([[5, 6, 7], [5, 8], [9]])
    visible = (tree_mask(tree, 2, torch.float32) == 0).int()[0, 0].tolist()
    assert visible == [
        # prefix  root  5  6  7  8  9
        [1, 1, 1, 0, 0, 0, 0, 0],  # root
        [1, 1, 1, 1, 0, 0, 0, 0],  # 5
        [1, 1, 1, 1, 1, 0, 0, 0],  # 5 6
        [1, 1, 1, 1, 1, 1, 0, 0],  # 5 6 7
        [1, 1, 1, 1, 0, 0, 1, 0],  # 5 8
        [1, 1, 1, 0, 0, 0, 0, 1],  # 9
    ]
    assert tree_positions(tree, 2).tolist() == [[2, 3, 4, 5, 4, 3]]
    blocked = tree_mask(tree, 0, torch.bfloat16)
    assert blocked.dtype == torch.bfloat16 and blocked.min() == torch.finfo(torch.bfloat16).min


def test_a_chain_mask_is_the_causal_mask():
    chain = build_tree([[4, 5, 6]])
    visible = (tree_mask(chain, 3, torch.float32) == 0)[0, 0]
    assert torch.equal(visible, torch.ones(4, 7, dtype=torch.bool).tril(3))


CANDIDATES = [[7, 8, 9, 10], [7, 8, 11], [7, 12], [13, 14, 15], [16]]


def test_every_node_gets_the_logits_of_its_path_run_alone(target):
    prompt = [3, 4, 5, 6, 20, 21]
    tree = build_tree(CANDIDATES)
    lm = CachedLM(target.model)
    lm.extend(torch.tensor(prompt[:-1]), last_only=True)
    logits = lm.extend_tree(prompt[-1], tree)
    assert lm.length == len(prompt) + len(tree.tokens)
    alone = target.model(input_ids=torch.tensor([prompt])).logits[0, -1]
    assert torch.allclose(logits[0], alone, atol=1e-4)
    for node in range(len(tree.tokens)):
        path = [tree.tokens[i] for i in tree.path_to(node)]
        alone = target.model(input_ids=torch.tensor([prompt + path])).logits[0, -1]
        assert torch.allclose(logits[1 + node], alone, atol=1e-4), f"node {node} path {path}"


@pytest.mark.parametrize("keep_path", [[0, 1, 2, 3], [0, 1, 4], [0, 5], [6, 7], [6, 7, 8], [], [9]])
def test_compaction_leaves_what_a_fresh_prefill_of_the_accepted_text_would(target, keep_path):
    prompt = [3, 4, 5, 6, 20, 21]
    tree = build_tree(CANDIDATES)
    lm = CachedLM(target.model)
    lm.extend(torch.tensor(prompt[:-1]), last_only=True)
    lm.extend_tree(prompt[-1], tree)
    lm.keep(len(prompt), keep_path)
    kept = prompt + [tree.tokens[n] for n in keep_path]
    assert lm.length == len(kept) and lm.cache.get_seq_length() == len(kept)
    after = lm.extend(torch.tensor([30, 31]))
    fresh = CachedLM(target.model).extend(torch.tensor(kept + [30, 31]))[-2:]
    assert torch.allclose(after, fresh, atol=1e-4)


def _rows(tree, table):
    """p rows for a tree whose target distribution depends only on the node's own token (row 0: the root)."""
    return torch.stack([table["root"], *[table.get(t, table["other"]) for t in tree.tokens]])


def test_greedy_walks_the_argmax_and_picks_the_longest_verified_candidate():
    tree = build_tree([[1, 2, 3], [1, 4], [5]])
    eye = torch.eye(6)
    p = _rows(tree, {"root": eye[1], 1: eye[4], 4: eye[0], "other": eye[2]})
    verdict = verify_greedy(p, tree)
    assert verdict.path == (0, 3) and verdict.next_token == 0 and verdict.winner == 1
    p = _rows(tree, {"root": eye[3], "other": eye[2]})
    assert verify_greedy(p, tree).path == () and verify_greedy(p, tree).next_token == 3


def test_the_winner_shows_the_draft_that_was_rejected_not_a_shorter_candidate():
    tree = build_tree([[1], [1, 2], [3]])  # Medusa-style: a prefix is a candidate of its own
    eye = torch.eye(6)
    p = _rows(tree, {"root": eye[1], 1: eye[4], "other": eye[0]})  # 1 accepted, then 2 rejected for 4
    verdict = verify_greedy(p, tree)
    assert verdict.path == (0,) and verdict.next_token == 4 and verdict.winner == 1  # [1, 2], not [1]


# Siblings 0, 1, 2 at the root; under 0, siblings 3 and 4. Target: first token ~ P1, then ~ P2[first].
V = 6
P1 = torch.tensor([0.30, 0.25, 0.05, 0.20, 0.15, 0.05])
P2 = {0: torch.tensor([0.05, 0.05, 0.10, 0.40, 0.10, 0.30]), "other": torch.tensor([1 / 6] * 6)}
SIBLINGS = build_tree([[0, 3], [0, 4], [1], [2]])
DRAWS = 12_000


def emitted_pairs(draws=DRAWS, seed=0):
    gen = torch.Generator().manual_seed(seed)
    p = _rows(SIBLINGS, {"root": P1, 0: P2[0], "other": P2["other"]})
    firsts, seconds = Counter(), Counter()
    for _ in range(draws):
        v = verify_tree_sampled(p, SIBLINGS, gen)
        out = [SIBLINGS.tokens[n] for n in v.path] + [v.next_token]
        firsts[out[0]] += 1
        if out[0] == 0 and len(out) > 1:
            seconds[out[1]] += 1
    return firsts, seconds


def fit(firsts, seconds):
    return (
        chi_square_p(firsts, dict(enumerate(P1.tolist())), sum(firsts.values())),
        chi_square_p(seconds, dict(enumerate(P2[0].tolist())), sum(seconds.values())),
    )


def test_tree_sampling_reproduces_the_target_distribution():
    firsts, seconds = emitted_pairs()
    assert sum(seconds.values()) > 3000
    assert min(fit(firsts, seconds)) > 1e-3


WRONG_REMOVALS = {
    "keep the rejected token": lambda dist, x: dist,
    "zero it without renormalising": lambda dist, x: dist.index_fill(0, torch.tensor([x]), 0.0),
    "fall back to uniform": lambda dist, x: torch.full_like(dist, 1 / dist.numel()),
}


@pytest.mark.parametrize("name", WRONG_REMOVALS)
def test_a_wrong_residual_is_caught(monkeypatch, name):
    monkeypatch.setattr(verify, "remove", WRONG_REMOVALS[name])
    assert min(fit(*emitted_pairs())) < 1e-6


def test_a_model_that_cannot_take_a_tree_mask_gets_a_clear_error_not_wrong_logits(tokenizer):
    from types import SimpleNamespace

    from tiny import tiny_llama

    from specviz.errors import TreeAttentionUnsupported

    model = tiny_llama(len(tokenizer), seed=5)
    lm = CachedLM(model)
    lm.extend(torch.tensor([3, 4]), last_only=True)
    # what a model loaded with attn_implementation="flash_attention_2" reports (that kernel takes no custom mask)
    lm.model = SimpleNamespace(config=SimpleNamespace(_attn_implementation="flash_attention_2"), dtype=model.dtype)
    with pytest.raises(TreeAttentionUnsupported, match="tree mask"):
        lm.extend_tree(5, build_tree([[6, 7], [8]]))
    assert lm.length == 2  # nothing appended


def test_typical_acceptance_follows_its_definition():
    from specviz.engine.verify import typical_threshold, verify_typical

    flat = torch.full((6,), 1 / 6)  # H = ln 6: bar = min(0.09, 0.3 / 6) = 0.05
    assert typical_threshold(flat, 0.09, 0.3) == pytest.approx(0.05)
    sharp = torch.tensor([0.97, 0.01, 0.01, 0.005, 0.003, 0.002])  # low entropy: the bar is ε
    assert typical_threshold(sharp, 0.09, 0.3) == pytest.approx(0.09)
    tree = build_tree([[1, 2], [3], [4, 5]])
    # root row: token 1 at 0.30, 3 at 0.40, 4 at 0.02 -> 1 and 3 pass. After 1 the row is flat (bar 0.05), so 2 at
    # 1/6 passes too: the longest passing prefix is 1 2, though 3 is the likelier first token
    root = torch.tensor([0.10, 0.30, 0.08, 0.40, 0.02, 0.10])
    p = torch.stack([root, *[torch.full((6,), 1 / 6)] * len(tree.tokens)])
    v = verify_typical(p, tree)
    assert [tree.tokens[n] for n in v.path] == [1, 2] and v.next_token == 0  # argmax of a flat row: the first
    assert [(t.token, t.accepted) for t in v.trials] == [(1, True), (2, True)]
    sharp_after_1 = torch.tensor([0.95, 0.01, 0.01, 0.01, 0.01, 0.01])  # now 2 fails after 1: equal lengths, 3 wins
    p = torch.stack([root, sharp_after_1, *[torch.full((6,), 1 / 6)] * (len(tree.tokens) - 1)])
    v = verify_typical(p, tree)
    assert [tree.tokens[n] for n in v.path] == [3] and v.next_token == 0
    below = torch.tensor([0.90, 0.04, 0.02, 0.02, 0.01, 0.01])  # no candidate clears 0.09
    p = torch.stack([below, *[torch.full((6,), 1 / 6)] * len(tree.tokens)])
    v = verify_typical(p, tree)
    assert v.path == () and v.next_token == 0


def test_typical_acceptance_measures_the_distribution_before_top_k_and_top_p():
    from specviz.engine.sampling import probabilities, typical_distribution
    from specviz.engine.verify import verify
    from specviz.settings import Settings

    logits = torch.log(torch.tensor([[0.40, 0.35, 0.25], [0.34, 0.33, 0.33]]))
    typical = Settings(temperature=1.0, top_k=1, acceptance="typical")
    assert typical_distribution(logits, Settings(temperature=1.0, top_k=1)) is None  # lossless does not use it
    assert typical_distribution(logits, Settings(temperature=1.0, acceptance="typical")) is None  # nothing is cut
    untruncated = typical_distribution(logits, typical)
    assert torch.allclose(untruncated, torch.softmax(logits, dim=-1))
    p = probabilities(logits, typical)  # top-k 1: token 1 has p = 0 after the cut, 0.35 before it
    tree = build_tree([[1]])
    generator = torch.Generator().manual_seed(0)
    assert verify(p, tree, None, typical, generator).path == ()
    assert verify(p, tree, None, typical, generator, untruncated).path == (0,)
