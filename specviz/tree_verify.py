"""The verdict on a token tree from a deterministic drafter (lookup, Medusa): greedy, and lossless sampling.

Row 0 of `p` is the target's distribution after the root (the last committed token); row 1 + i is its
distribution after node i. A chain of drafts is the tree with one child per node.
"""

from dataclasses import dataclass

import torch

from .tree import ROOT, TokenTree


@dataclass(frozen=True)
class TreeVerdict:
    path: list[int]  # accepted node indices, root downwards
    next_token: int  # the target's own token after the accepted path
    winner: int  # index of the candidate the accepted path belongs to (longest verified prefix)


def _row(node: int) -> int:
    return 0 if node == ROOT else 1 + node


def _winner(tree: TokenTree, path: list[int]) -> int:
    """The longest candidate that holds the accepted path: when the walk stopped at an inner node, the one shown
    carries the draft token that was tried and rejected there (a shorter one would pass for fully accepted)."""
    holding = [i for i, cand in enumerate(tree.paths) if list(cand[: len(path)]) == path]
    return max(holding, key=lambda i: len(tree.paths[i]))


def verify_tree_greedy(p: torch.Tensor, tree: TokenTree) -> TreeVerdict:
    """Walk down while some child equals the target's argmax at its parent; the argmax where it stops follows."""
    best = p.argmax(dim=-1).tolist()
    node, path = ROOT, []
    while True:
        child = next((c for c in tree.children(node) if tree.tokens[c] == best[_row(node)]), None)
        if child is None:
            return TreeVerdict(path, best[_row(node)], _winner(tree, path))
        path.append(child)
        node = child


def verify_tree_sampled(p: torch.Tensor, tree: TokenTree, generator: torch.Generator) -> TreeVerdict:
    """Recursive rejection sampling over siblings, with q a point mass on each proposed token:
    1. at a node, try its children in turn: accept child x with probability p'(x) (= min(1, p'(x) / q(x)), q(x) = 1)
    2. on rejection remove x: p' <- norm(max(0, p' - δx)), i.e. zero x and renormalise; try the next child
    3. when every child is rejected, the next token ~ p' (what is left); an accepted child becomes the node
    Every emitted token is then distributed exactly as the target's own sample at that position.
    """
    node, path = ROOT, []
    while True:
        dist = p[_row(node)]
        for child in tree.children(node):
            x = tree.tokens[child]
            if float(torch.rand((), generator=generator, device=dist.device)) < float(dist[x]):
                path.append(child)
                node = child
                break
            dist = remove(dist, x)
        else:
            next_token = int(torch.multinomial(dist, 1, generator=generator))
            return TreeVerdict(path, next_token, _winner(tree, path))


def remove(dist: torch.Tensor, x: int) -> torch.Tensor:
    """norm(max(0, p' - δx)): the rejected token can no longer be drawn; the rest keeps its proportions."""
    out = dist.clone()
    out[x] = 0.0
    total = out.sum()
    return out / total if total > 0 else dist  # total 0 only by round-off (x had all the mass yet was rejected)


def token_probs(p: torch.Tensor, tree: TokenTree, nodes: list[int] | tuple[int, ...]) -> list[float]:
    """The target's probability of each node's token given its ancestors (one gather, one host copy)."""
    rows = torch.tensor([_row(tree.parents[n]) for n in nodes], dtype=torch.long, device=p.device)
    cols = torch.tensor([tree.tokens[n] for n in nodes], dtype=torch.long, device=p.device)
    return p[rows, cols].tolist()


def typical_threshold(probs: torch.Tensor, epsilon: float, delta: float) -> float:
    """Medusa's typical acceptance bar: min(ε, δ·exp(−H(p))). A confident p (low entropy) sets a high bar."""
    entropy = -(probs * probs.clamp_min(1e-30).log()).sum()
    return float(torch.clamp(delta * torch.exp(-entropy), max=epsilon))


def verify_tree_typical(p: torch.Tensor, tree: TokenTree, epsilon: float = 0.09, delta: float = 0.3) -> TreeVerdict:
    """Lossy by design (Medusa's typical acceptance): walk down, taking the most likely child whose p(x) clears
    min(ε, δ·exp(−H)) at its parent; the token after the accepted path is the target's argmax there."""
    node, path = ROOT, []
    while True:
        row = p[_row(node)]
        bar = typical_threshold(row, epsilon, delta)
        passing = [c for c in tree.children(node) if float(row[tree.tokens[c]]) > bar]
        if not passing:
            return TreeVerdict(path, int(row.argmax()), _winner(tree, path))
        node = max(passing, key=lambda c: float(row[tree.tokens[c]]))
        path.append(node)
