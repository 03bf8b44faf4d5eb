"""Token trees: several candidate continuations verified in one target forward.

Candidates are merged into a trie (shared prefixes become shared nodes). The verify forward feeds the
last committed token (the root) followed by every node; each node attends to the cached prefix and to its
own ancestors only, at position prefix + depth. A chain is the tree whose nodes each have one child.
Medusa's candidate trees use the same machinery.
"""

from dataclasses import dataclass

import torch

ROOT = -1  # parent of depth-1 nodes: the last committed token, fed first


@dataclass(frozen=True)
class TokenTree:
    tokens: tuple[int, ...]  # node i's token; a parent always comes before its children
    parents: tuple[int, ...]  # node i's parent index, ROOT for the first level
    paths: tuple[tuple[int, ...], ...]  # per candidate: its node indices from the root down

    @property
    def depths(self) -> tuple[int, ...]:
        depth: list[int] = []
        for parent in self.parents:
            depth.append(1 if parent == ROOT else depth[parent] + 1)
        return tuple(depth)

    def children(self, node: int) -> list[int]:
        """Children of `node` (ROOT for the first level), in the order candidates introduced them."""
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def path_to(self, node: int) -> list[int]:
        path = []
        while node != ROOT:
            path.append(node)
            node = self.parents[node]
        return path[::-1]


def build_tree(candidates: list[list[int]]) -> TokenTree:
    tokens, parents, index, paths = [], [], {}, []
    for candidate in candidates:
        node, path = ROOT, []
        for token in candidate:
            key = (node, token)
            if key not in index:
                index[key] = len(tokens)
                tokens.append(token)
                parents.append(node)
            node = index[key]
            path.append(node)
        paths.append(tuple(path))
    return TokenTree(tuple(tokens), tuple(parents), tuple(paths))


def tree_positions(tree: TokenTree, prefix: int, device=None) -> torch.Tensor:
    """[1, 1 + n] position ids: the root at `prefix`, every node at prefix + depth."""
    return torch.tensor([[prefix, *(prefix + d for d in tree.depths)]], device=device)


def tree_mask(tree: TokenTree, prefix: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """[1, 1, 1 + n, prefix + 1 + n] additive mask: 0 where a row may look, the dtype's minimum elsewhere.

    Row 0 is the root; row 1 + i is node i. Everyone sees the whole cached prefix and the root; a node also
    sees itself and its ancestors, built from parent pointers (each row copies its parent's row, then adds itself).
    """
    n = len(tree.tokens)
    sees = torch.zeros(1 + n, 1 + n, dtype=torch.bool)
    sees[:, 0] = True
    for i, parent in enumerate(tree.parents):
        sees[1 + i] = sees[1 + parent] if parent != ROOT else sees[0]
        sees[1 + i, 1 + i] = True
    full = torch.cat([torch.ones(1 + n, prefix, dtype=torch.bool), sees], dim=1)
    mask = torch.zeros(full.shape, dtype=dtype).masked_fill(~full, torch.finfo(dtype).min)
    return mask.to(device)[None, None]
