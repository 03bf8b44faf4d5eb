"""The EAGLE drafter: the head drafts at the feature level, as a chain or as EAGLE-2's dynamic tree.

The head keeps its own KV cache over pairs (f_i, x_{i+1}), i = 0, 1, ...: the committed ones, whose features are
the target's (kept beside the target's cache, moved with it on rollback), then this step's drafts. Each step:

1. feed the pairs committed since the last step (the target's true features): the last output guesses the
   feature after the last token, so its scores rank the first draft token;
2. chain: feed the best token back with that guess, γ − 1 times. Dynamic tree (EAGLE-2): keep a frontier of
   nodes scored by their path's log-probability under the head; at each depth feed the `width` best frontier
   nodes in one forward (each sees the committed pairs and its own ancestors, at position = depth), and give
   each its `width` best children;
3. re-rank every node made by its path score and keep the best `nodes` of them (a child never outscores its
   parent, so the kept set is a tree); its root-to-leaf paths go to the engine's tree verification;
4. drop the drafts from the head's cache: the next step starts again from the committed pairs.
"""

import torch

from ...engine.kv_cache import KVCache
from ...engine.tree import additive_mask, branch_sees, draft_position
from ..contract import BaseDrafter, DrafterProfile, Proposal
from ..tree_growth import ROOT, Node, best_next, best_paths, columns_to, grow
from . import NODES
from .head import EagleHead

BEAM = 4  # frontier nodes expanded per depth, and children kept per node


class EagleDrafter(BaseDrafter):
    def __init__(
        self,
        head: EagleHead,
        hidden_layers: tuple[int, ...],
        tree: str = "dynamic",
        nodes: int = NODES,
        width: int = BEAM,
    ):
        self.head = head
        self.profile = DrafterProfile(hidden_layers=tuple(hidden_layers))
        self.tree = tree
        self.nodes = nodes
        self.width = width
        self.target_lm = None
        self.kv = self.cache = None  # the head's KV cache, and the transformers cache its forwards take
        self.fed = 0  # committed pairs in the head's cache
        self.last = None  # the head's feature after the last committed pair
        self._device = head.fc.weight.device

    def max_nodes(self, gamma: int) -> int:
        if self.tree == "chain":
            return gamma
        return min(self.nodes, self.width + (gamma - 1) * self.width * self.width)

    def start(self, prompt_ids: list[int], target, judges=None) -> None:
        self.target_lm = target
        self.kv = KVCache.dynamic()
        self.fed = 0
        self.last = None
        self.cache = self.kv.cache
        self._catch_up(prompt_ids)  # the prompt's pairs: counted as prefill

    @torch.inference_mode()
    def _catch_up(self, tokens: list[int]) -> None:
        """Step 1 (and rollback): the head's cache back to the committed pairs, then every new committed pair fed."""
        self._forget_drafts()
        end = self.target_lm.length  # pairs i < end: the target's feature f_i and the token after it
        if end <= self.fed:
            return
        ids = torch.tensor([tokens[self.fed + 1 : end + 1]], device=self._device)
        features = self.target_lm.hidden(self.fed, end)[None]
        out = self._feed(features, ids, list(range(self.fed, end)), [[]] * (end - self.fed), causal=True)
        self.fed = end
        self.last = out[0, -1]

    def _forget_drafts(self) -> None:
        self.kv.crop(self.fed)

    def _feed(self, features, ids, positions: list[int], ancestors: list[list[int]], causal: bool = False):
        """One head forward over n new pairs after `self.fed` committed ones and any drafts already in its cache.
        Each new row sees the committed pairs, the cache columns in its `ancestors` and itself (or, `causal`,
        every earlier new row)."""
        sees = branch_sees(self.fed, self.kv.entries(), ancestors, causal)
        mask = additive_mask(sees, self.head.fc.weight.dtype, self._device)
        return self.head(features, ids, torch.tensor([positions], device=self._device), mask, self.cache)

    def _pair_position(self, depth: int) -> int:
        """Where the pair that carries the draft token at `depth` sits: at its feature's position, one before the
        token's own (the committed text is one token longer than the committed pairs)."""
        return draft_position(self.fed + 1, depth) - 1

    def _best(self, hidden: torch.Tensor, k: int) -> tuple[list[list[float]], list[list[int]]]:
        """The head's k likeliest next tokens after each feature in [m, H]: log-probabilities and target ids."""
        return best_next(torch.log_softmax(self.head.logits(hidden).float(), dim=-1), k, self.head.token_ids)

    @torch.inference_mode()
    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        if self.target_lm is None:
            return None
        self._catch_up(tokens)
        if self.last is None:  # a one-token prompt: no feature yet, so a plain step
            return None
        grow = self._chain if self.tree == "chain" else self._dynamic_tree
        candidates, forwards = grow(gamma)
        self._forget_drafts()  # step 4
        return Proposal(tuple(candidates), forwards=forwards)

    def _chain(self, gamma: int):
        feature = self.last
        chain = []
        for depth in range(1, gamma + 1):
            token = self._best(feature[None], 1)[1][0][0]
            chain.append(token)
            if depth == gamma:
                break
            ids = torch.tensor([[token]], device=self._device)
            past = self.kv.entries()
            feature = self._feed(feature[None, None], ids, [self._pair_position(depth)], [list(range(self.fed, past))])
            feature = feature[0, -1]
        return [chain], gamma

    def _dynamic_tree(self, gamma: int):
        nodes = self.grow_tree(gamma, self.nodes)
        return best_paths(nodes, self.nodes), max(n.depth for n in nodes)  # step 3

    def grow_tree(self, gamma: int, budget: int | None = None) -> list[Node]:
        """Step 2 for a tree (tree_growth.py); a fed node's state is the head's feature guessed after it."""
        values, ids = self._best(self.last[None], self.width)

        def expand(nodes: list[Node], chosen: list[int], depth: int):
            past = self.kv.entries()
            parents = [nodes[n].parent for n in chosen]
            features = torch.stack([self.last if p == ROOT else nodes[p].state for p in parents])[None]
            out = self._feed(
                features,
                torch.tensor([[nodes[n].token for n in chosen]], device=self._device),
                [self._pair_position(depth)] * len(chosen),
                [columns_to(nodes, p) for p in parents],
            )[0]
            for row, n in enumerate(chosen):
                nodes[n].state = out[row]
                nodes[n].column = past + row
            return self._best(out, self.width)

        return grow((values[0], ids[0]), expand, gamma, self.width, budget)
