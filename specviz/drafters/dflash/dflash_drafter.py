"""The DFlash drafter: one draft pass fills a block; the first γ positions of it are verified, as a chain or a tree.

Each step:

1. the target's features of the tokens committed since the last pass (kept beside the target's cache, from the
   verify forwards that committed them) become new context rows of the draft's cache;
2. one pass over [the last committed token, mask × (block − 1)] scores every position of the block at once;
3. a chain: each of the first γ positions' best token (γ ≤ block − 1; with adaptive γ, chosen before drafting from
   the verify forward's measured cost and how often each position of the block has held). A tree: of every path
   through the `width` best tokens of each of the first γ positions, the `nodes` likeliest prefixes, a path scored
   by the sum of its positions' log-probabilities (one pass scores every position independently, so a path's
   score is that sum), grown best-first by tree_growth.py; with adaptive γ, cut to the nodes that pay for their
   place in the verify forward at the measured costs (the best few may form a plain chain). Either goes to the
   shared verification as point masses (the verification's lookup rule keeps sampling lossless), a tree in one
   forward with tree attention.

Nothing needs cutting after a rejection: the draft's cache only ever holds committed context, and the block's own
keys and values are dropped at the end of each pass.
"""

import torch

from ...engine.step import BaseDrafter, DrafterProfile, Proposal, Provenance
from ..tree_growth import Node, best_next, grow, paths_that_pay, token_probabilities
from .model import DFlashDraft

TREE_WIDTH = 4  # a tree tries this many of each position's best tokens


class DFlashDrafter(BaseDrafter):
    def __init__(self, draft: DFlashDraft, tree: str = "chain", nodes: int = 16, width: int = TREE_WIDTH):
        self.draft, self.tree, self.nodes, self.width = draft, tree, nodes, width
        self.profile = DrafterProfile(
            hidden_layers=tuple(i + 1 for i in draft.target_layers),  # hidden_states[0] is the embedding
            longest=draft.block_size - 1,
            drafts_block=True,
        )
        self.target_lm = self.cache = None

    def max_nodes(self, gamma: int) -> int:
        depth = min(gamma, self.profile.longest)
        return depth if self.tree == "chain" else min(self.nodes, depth * self.width)

    def start(self, prompt_ids: list[int], target, judges=None) -> None:
        self.judges = judges
        self.target_lm, self.cache = target, self.draft.new_cache()

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
        """Step 3 for a tree: the root-to-leaf paths of the `nodes` likeliest prefixes through the block's positions
        (`scores`: [depth, V]), likeliest leaf first. With adaptive γ, only as many of those nodes as the measured
        verify cost says pay (the first few of them may be a plain chain, or none), and the probabilities along
        the first path, from which the controller learns how far to trust them."""
        values, ids = best_next(torch.log_softmax(scores.float(), dim=-1), self.width)

        def expand(nodes: list[Node], chosen: list[int], depth: int):  # the next position's best, whatever the path
            return [values[depth]] * len(chosen), [ids[depth]] * len(chosen)

        nodes = grow((values[0], ids[0]), expand, len(scores), self.width, self.nodes)
        paths, leaves = paths_that_pay(nodes, self.nodes, self.tree_size, max(n.depth for n in nodes))
        if self.tree_size is None or not paths:
            return paths, None
        return paths, tuple(token_probabilities(nodes, leaves[0]))
