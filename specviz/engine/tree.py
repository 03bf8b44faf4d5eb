"""Token trees: several candidate continuations verified in one target forward.

Candidates are merged into a trie (shared prefixes become shared nodes). The verify forward feeds the
last committed token (the root) followed by every node; each node attends to the cached prefix and to its
own ancestors only, at position prefix + depth. A chain is the tree whose nodes each have one child, and it
needs no mask of its own: the causal one is already right.

The shape of a trie (parents, paths, who sees whom) is kept apart from its tokens, so a drafter whose tree
never changes shape (Medusa's index paths) builds it once and only fills in new tokens each step.
"""

from dataclasses import dataclass
from functools import cached_property

import torch

ROOT = -1  # parent of depth-1 nodes: the last committed token, fed first


def draft_position(committed: int, depth: int) -> int:
    """The position of a draft token `depth` places after the last of `committed` tokens (depth 0: that last
    token itself, the root; positions count from 0)."""
    return committed - 1 + depth


def row_after(node: int) -> int:
    """The verify forward's row that predicts the token after `node`: row 0 follows the root, row 1 + i node i."""
    return 0 if node == ROOT else 1 + node


@dataclass(frozen=True)
class TreeShape:
    parents: tuple[int, ...]  # node i's parent index, ROOT for the first level; a parent comes before its children
    paths: tuple[tuple[int, ...], ...]  # per candidate: its node indices from the root down

    @cached_property
    def depths(self) -> tuple[int, ...]:
        depth: list[int] = []
        for parent in self.parents:
            depth.append(1 if parent == ROOT else depth[parent] + 1)
        return tuple(depth)

    @cached_property
    def _children(self) -> dict[int, list[int]]:
        kids: dict[int, list[int]] = {ROOT: []}
        for node, parent in enumerate(self.parents):
            kids.setdefault(parent, []).append(node)
        return kids

    def children(self, node: int) -> list[int]:
        """Children of `node` (ROOT for the first level), in the order candidates introduced them."""
        return self._children.get(node, [])

    def path_to(self, node: int) -> list[int]:
        path = []
        while node != ROOT:
            path.append(node)
            node = self.parents[node]
        return path[::-1]

    @cached_property
    def is_chain(self) -> bool:
        return self.parents == tuple(range(-1, len(self.parents) - 1))

    @cached_property
    def sees(self) -> torch.Tensor:
        """[1 + n, 1 + n] bool: row 0 is the root, row 1 + i node i. Everyone sees the root; a node also sees itself
        and its ancestors, built from parent pointers (each row copies its parent's row, then adds itself)."""
        n = len(self.parents)
        sees = torch.zeros(1 + n, 1 + n, dtype=torch.bool)
        sees[:, 0] = True
        for i, parent in enumerate(self.parents):
            sees[row_after(i)] = sees[row_after(parent)]
            sees[row_after(i), row_after(i)] = True
        return sees


@dataclass(frozen=True)
class TokenTree:
    tokens: tuple[int, ...]  # node i's token
    shape: TreeShape

    parents = property(lambda self: self.shape.parents)
    paths = property(lambda self: self.shape.paths)
    depths = property(lambda self: self.shape.depths)
    is_chain = property(lambda self: self.shape.is_chain)

    def children(self, node: int) -> list[int]:
        return self.shape.children(node)

    def path_to(self, node: int) -> list[int]:
        return self.shape.path_to(node)

    def candidate(self, index: int) -> tuple[int, ...]:
        return tuple(self.tokens[n] for n in self.paths[index])

    @property
    def candidates(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self.candidate(i) for i in range(len(self.paths)))


def build_tree(candidates) -> TokenTree:
    """The trie of candidate sequences. The labels need only be hashable: index paths give a reusable shape."""
    tokens = []
    parents = []
    index = {}
    paths = []
    for candidate in candidates:
        node = ROOT
        path = []
        for token in candidate:
            key = (node, token)
            if key not in index:
                index[key] = len(tokens)
                tokens.append(token)
                parents.append(node)
            node = index[key]
            path.append(node)
        paths.append(tuple(path))
    return TokenTree(tuple(tokens), TreeShape(tuple(parents), tuple(paths)))


def fill_shape(shape: TreeShape, candidates) -> TokenTree:
    """A known shape with this step's tokens: candidate i's j-th token sits at node shape.paths[i][j]."""
    tokens = [0] * len(shape.parents)
    for path, candidate in zip(shape.paths, candidates):
        for node, token in zip(path, candidate):
            tokens[node] = token
    return TokenTree(tuple(tokens), shape)


EMPTY = build_tree([])  # a plain step: the root alone


def tree_positions(tree: TokenTree, prefix: int, device=None) -> torch.Tensor:
    """[1, 1 + n] position ids: the root at `prefix`, every node at prefix + depth."""
    return torch.tensor([[prefix, *(prefix + d for d in tree.depths)]], device=device)


def tree_mask(tree: TokenTree, prefix: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """[1, 1, 1 + n, prefix + 1 + n] additive mask. Every row sees the whole cached prefix; within the tree, what
    TreeShape.sees allows."""
    sees = tree.shape.sees
    return additive_mask(torch.cat([torch.ones(sees.shape[0], prefix, dtype=torch.bool), sees], dim=1), dtype, device)


def branch_sees(shared: int, past: int, ancestors: list[list[int]], causal: bool = False) -> torch.Tensor:
    """[n, past + n] bool for n rows appended after `past` cache entries (a drafter growing its own tree): row i
    sees entries [0, shared), the entries listed in ancestors[i] and itself; `causal`: every earlier new row too."""
    n = len(ancestors)
    sees = torch.zeros(n, past + n, dtype=torch.bool)
    sees[:, :shared] = True
    for row, columns in enumerate(ancestors):
        sees[row, columns] = True
        sees[row, past + row] = True
    if causal:
        sees[:, past:] = torch.ones(n, n, dtype=torch.bool).tril()
    return sees


def additive_mask(sees: torch.Tensor, dtype: torch.dtype, device=None) -> torch.Tensor:
    """[1, 1, rows, columns] attention mask from a bool one: 0 where a row may look, the dtype's minimum elsewhere."""
    mask = torch.zeros(sees.shape, dtype=dtype).masked_fill(~sees, torch.finfo(dtype).min)
    return mask.to(device)[None, None]
