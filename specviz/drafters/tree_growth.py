"""Growing a token tree from a drafter's own top candidates (EAGLE-2's dynamic tree), for any drafter that scores
next tokens: the EAGLE head over features, a draft model over tokens.

Every node carries the log-probability of its path under the drafter. Depth 1 holds the drafter's `width` best
tokens after the committed text; at each further depth the `width` best nodes of the frontier are fed in one
forward (each row sees the committed text and its own ancestors, at position = depth) and each gets its `width`
best children. Of everything made, the `budget` best nodes are kept: a child never outscores its parent, so the
kept nodes form a tree, and its root-to-leaf paths go to the engine's tree verification as point masses.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

ROOT = -1  # the parent of a depth-1 node: the last committed token


@dataclass
class Node:
    token: int
    parent: int  # index of its parent in the node list; ROOT for depth 1
    depth: int
    score: float  # log-probability of its path under the drafter
    column: int | None = None  # where the drafter's cache holds it, once fed
    state: Any = None  # what the drafter keeps per fed node (EAGLE: the feature guessed after it)


# expand(nodes, chosen, depth): feed the chosen nodes (all of that depth) in one forward, record their column and
# state, and return each one's best next tokens as (log-probabilities, ids), a list per chosen node.
Expand = Callable[[list[Node], list[int], int], tuple[list[list[float]], list[list[int]]]]


def best_next(logp: torch.Tensor, k: int, to_ids=None) -> tuple[list[list[float]], list[list[int]]]:
    """The k likeliest tokens of each row of [m, V] log-probabilities: values and ids, as lists. `to_ids` maps the
    columns to token ids first (a head with its own vocabulary)."""
    top = torch.topk(logp, min(k, logp.shape[-1]), dim=-1)
    return top.values.tolist(), (top.indices if to_ids is None else to_ids(top.indices)).tolist()


def grow(
    first: tuple[list[float], list[int]],
    expand: Expand,
    depth: int,
    width: int,
    budget: int | None = None,
    go_on: Callable[[list[float]], bool] | None = None,
) -> list[Node]:
    """Every node made down to `depth`, parents before children. `first`: the best tokens after the committed text.
    With a `budget`, growth stops once `budget` nodes outscore the whole frontier: no deeper node could be kept.
    With `go_on`, it stops when go_on(the drafter's probability of each token on the likeliest path) says no."""
    nodes = [Node(token, ROOT, 1, value) for value, token in zip(*first)]
    frontier = list(range(len(nodes)))
    for d in range(2, depth + 1):
        if budget is not None and _settled(nodes, frontier, budget):
            break
        if go_on is not None and not go_on(token_probabilities(nodes, max(frontier, key=lambda n: nodes[n].score))):
            break
        chosen = sorted(frontier, key=lambda n: -nodes[n].score)[:width]  # the most confident branches
        values, ids = expand(nodes, chosen, d - 1)
        frontier = []
        for n, row_values, row_ids in zip(chosen, values, ids):
            for value, token in zip(row_values, row_ids):
                nodes.append(Node(token, n, d, nodes[n].score + value))
                frontier.append(len(nodes) - 1)
    return nodes


def _settled(nodes: list[Node], frontier: list[int], budget: int) -> bool:
    best_open = max(nodes[n].score for n in frontier)
    return sum(node.score > best_open for node in nodes) >= budget


def best_nodes(nodes: list[Node], budget: int) -> list[int]:
    """The `budget` best-scored nodes, best first; ties keep the earlier (shallower) node, so a parent always comes
    before its child."""
    return sorted(range(len(nodes)), key=lambda n: (-nodes[n].score, n))[:budget]


def best_paths(nodes: list[Node], budget: int, with_leaves: bool = False):
    """The root-to-leaf token paths of the `budget` best-scored nodes (best_nodes), likeliest leaf first;
    with_leaves: (paths, their leaf nodes)."""
    kept = best_nodes(nodes, budget)
    inner = {nodes[n].parent for n in kept}
    leaves = sorted((n for n in kept if n not in inner), key=lambda n: -nodes[n].score)
    paths = [tokens_to(nodes, leaf) for leaf in leaves]
    return (paths, leaves) if with_leaves else paths


def paths_that_pay(nodes: list[Node], budget: int, tree_size, depth: int) -> tuple[list, list]:
    """best_paths of the `budget` best nodes, with their leaves; under adaptive γ (`tree_size`, its judge of what
    pays: each node's path probabilities, best first, and the depth drafted -> how many to verify) only as many as
    it says pay, perhaps none: ([], [])."""
    if tree_size is not None:
        budget = tree_size([token_probabilities(nodes, n) for n in best_nodes(nodes, budget)], depth)
    return best_paths(nodes, budget, with_leaves=True) if budget else ([], [])


def tokens_to(nodes: list[Node], node: int) -> tuple[int, ...]:
    path = []
    while node != ROOT:
        path.append(nodes[node].token)
        node = nodes[node].parent
    return tuple(path[::-1])


def token_probabilities(nodes: list[Node], node: int) -> list[float]:
    """The drafter's probability of each token on the path to `node`, root downwards."""
    probs = []
    while node != ROOT:
        parent = nodes[node].parent
        probs.append(math.exp(nodes[node].score - (0.0 if parent == ROOT else nodes[parent].score)))
        node = parent
    return probs[::-1]


def columns_to(nodes: list[Node], node: int) -> list[int]:
    """The cache columns of `node` and its ancestors (all fed already); the root has none."""
    columns = []
    while node != ROOT:
        columns.append(nodes[node].column)
        node = nodes[node].parent
    return columns
