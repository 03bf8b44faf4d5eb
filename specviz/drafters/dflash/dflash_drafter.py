"""The DFlash drafter: one draft pass fills a block; the first γ positions of it are verified, as a chain or a tree.

Each step:

1. the target's features of the tokens committed since the last pass (kept beside the target's cache, from the
   verify forwards that committed them) become new context rows of the draft's cache;
2. one pass over [the last committed token, mask × (block − 1)] scores every position of the block at once;
3. a chain: each of the first γ positions' best token (γ ≤ block − 1; with adaptive γ, chosen before drafting from
   the verify forward's measured cost and how often each position of the block has held). A tree: that same chain,
   whole, then the likeliest other prefixes through the `width` best tokens of each position until `nodes` nodes, a
   path scored by the sum of its positions' log-probabilities (one pass scores every position independently, so a
   path's score is that sum). Greedy verification accepts the longest candidate the target agrees with, so a tree
   holding the chain accepts at least what the chain accepts from the same text; the branches then go where the
   chain is likeliest to fail (a sibling of the chain's d-th token scores the chance that the chain's first d − 1
   tokens hold and the d-th is that sibling instead). With adaptive γ, cut to the first nodes in that order that
   pay for their place in the verify forward at the measured costs: none (a plain step), a prefix of the chain, or
   the chain and its best branches. Either goes to the shared verification as point masses (the verification's
   lookup rule keeps sampling lossless), a tree in one forward with tree attention.

Nothing needs cutting after a rejection: the draft's cache only ever holds committed context, and the block's own
keys and values are dropped at the end of each pass.
"""

import heapq
import itertools

import torch

from ...engine.step import BaseDrafter, DrafterProfile, Proposal, Provenance
from ..tree_growth import ROOT, Node, best_next, token_probabilities, tokens_to
from .model import DFlashDraft

TREE_WIDTH = 4  # a tree tries this many of each position's best tokens


class DFlashDrafter(BaseDrafter):
    def __init__(self, draft: DFlashDraft, tree: str = "chain", nodes: int = 16, width: int = TREE_WIDTH):
        self.draft = draft
        self.tree = tree
        self.nodes = nodes
        self.width = width
        self.profile = DrafterProfile(
            hidden_layers=tuple(i + 1 for i in draft.target_layers),  # hidden_states[0] is the embedding
            longest=draft.block_size - 1,
            drafts_block=True,
        )
        self.target_lm = self.cache = None

    def max_nodes(self, gamma: int) -> int:
        depth = min(gamma, self.profile.longest)
        if self.tree == "chain":
            return depth
        return min(self.nodes, sum(self.width**d for d in range(1, depth + 1)))  # every prefix through the widths

    def start(self, prompt_ids: list[int], target, judges=None) -> None:
        self.judges = judges
        self.target_lm = target
        self.cache = self.draft.new_cache()

    @torch.inference_mode()
    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        if self.target_lm is None:
            return None
        committed = self.target_lm.length  # entries whose features the target has computed: tokens[:-1]
        self.cache.crop(committed)
        if committed > self.cache.length:  # step 1
            features = self.target_lm.hidden(self.cache.length, committed)
        else:  # nothing new (a one-token prompt's first step has no context at all)
            features = self.draft.fc.weight.new_zeros(0, self.draft.fc.in_features)
        scores = self.draft.fill(features, tokens[-1], self.cache)  # step 2
        depth = min(gamma, self.profile.longest)
        if self.tree == "chain":  # step 3
            return Proposal(
                (tuple(scores[:depth].argmax(dim=-1).tolist()),), forwards=1, source=Provenance(block=len(scores))
            )
        paths, confidence = self.block_tree(scores[:depth])
        if not paths:  # adaptive: no node pays for its place in the verify forward
            return None
        return Proposal(tuple(paths), forwards=1, confidence=confidence, source=Provenance(block=len(scores)))

    def block_tree(self, scores: torch.Tensor) -> tuple[list[tuple[int, ...]], tuple[float, ...] | None]:
        """Step 3 for a tree (`scores`: [depth, V]): the root-to-leaf paths of the chain and its best branches
        (chain_then_branches), the chain first, then likeliest leaf first. With adaptive γ, only the first nodes that
        the measured verify cost says pay (none, a prefix of the chain, or more), and the probabilities along the
        chain, from which the controller learns how far to trust them, as it does from a chain's."""
        logp = torch.log_softmax(scores.float(), dim=-1)
        nodes = chain_then_branches(logp, scores.argmax(dim=-1).tolist(), self.width, self.nodes)
        kept = len(nodes)
        if self.tree_size is not None:  # each node's path probabilities, in the order the nodes are cut
            kept = self.tree_size([token_probabilities(nodes, n) for n in range(kept)], len(scores))
        if not kept:
            return [], None
        inner = {nodes[n].parent for n in range(kept)}
        leaves = [n for n in range(kept) if n not in inner]  # the first is the (cut) chain's last node
        leaves = leaves[:1] + sorted(leaves[1:], key=lambda n: -nodes[n].score)
        confidence = None if self.tree_size is None else tuple(token_probabilities(nodes, leaves[0]))
        return [tokens_to(nodes, leaf) for leaf in leaves], confidence


def chain_then_branches(logp: torch.Tensor, chain: list[int], width: int, budget: int) -> list[Node]:
    """The chain's nodes root downwards, then, best first, the likeliest other prefixes through each position's
    `width` best tokens (`logp`: [depth, V]), `budget` nodes in all; a node's score is its path's log-probability,
    the sum of its positions' (each position is scored on its own). A child never outscores its parent and only a
    kept node's children are open, so taking the best open prefix each time keeps every first n nodes a tree, and
    the branches are exactly the best ones outside the chain; ties go to the prefix opened first."""
    values, ids = best_next(logp, width)
    nodes: list[Node] = []
    for d, token in enumerate(chain[:budget]):  # node d is the chain's (d + 1)-th token
        score = (nodes[-1].score if d else 0.0) + float(logp[d, token])
        nodes.append(Node(token, d - 1 if d else ROOT, d + 1, score))
    if len(nodes) < len(chain):  # the budget ends inside the chain: no room for a branch
        return nodes
    opened: list[tuple[float, int, int, int]] = []  # a heap of (−score, order opened, parent, token)
    order = itertools.count()

    def open_children(parent: int, skip: int | None) -> None:
        depth = 0 if parent == ROOT else nodes[parent].depth
        if depth == len(chain):
            return
        base = 0.0 if parent == ROOT else nodes[parent].score
        for value, token in zip(values[depth], ids[depth]):
            if token != skip:  # the chain's own child is kept already
                heapq.heappush(opened, (-(base + value), next(order), parent, token))

    for n in (ROOT, *range(len(chain) - 1)):
        open_children(n, chain[0 if n == ROOT else n + 1])
    while opened and len(nodes) < budget:
        score, _, parent, token = heapq.heappop(opened)
        nodes.append(Node(token, parent, 1 if parent == ROOT else nodes[parent].depth + 1, -score))
        open_children(len(nodes) - 1, None)
    return nodes
