"""The acceptance rules: which drafted tokens the target keeps, and the token it adds after them.

Every rule reads p, the target's distributions from one forward over [root, node 1, ..., node n] (row 0 after
the root, row 1 + i after node i), and walks the token tree of the proposal; a chain is the tree with one
child per node. Which rule runs follows from the settings (greedy at temperature 0; else lossless, or
Medusa's typical acceptance when asked for) and, for lossless, from whether the drafter sampled with a q.
"""

from dataclasses import replace

import torch

from ..settings import Settings
from .sampling import choose
from .step import Verdict
from .tree import ROOT, TokenTree, build_tree


def verify(p: torch.Tensor, tree: TokenTree, q: torch.Tensor | None, settings: Settings,
           generator: torch.Generator) -> Verdict:
    if not tree.tokens:  # a plain step: the target's own token
        return Verdict((), int(choose(p[:1], settings, generator)[0]))
    draft = None if q is None else torch.tensor(tree.tokens, device=p.device)  # a sampled chain
    if settings.greedy or settings.acceptance == "typical":  # typical: lossy by design; the user asked for it
        verdict = verify_greedy(p, tree) if settings.greedy else verify_typical(p, tree)
        return verdict if q is None else replace(verdict, q=tuple(q[torch.arange(len(draft)), draft].tolist()))
    if q is not None:
        return verify_sampled(p, q, draft, generator)
    return verify_tree_sampled(p, tree, generator)


def chain(tokens) -> TokenTree:
    return build_tree([list(tokens)])


def verify_greedy(p: torch.Tensor, tree: TokenTree) -> Verdict:
    """Walk down while some child equals the target's argmax at its parent; the argmax where it stops follows."""
    best = p.argmax(dim=-1).tolist()
    node, path = ROOT, []
    while True:
        child = next((c for c in tree.children(node) if tree.tokens[c] == best[_row(node)]), None)
        if child is None:
            return _verdict(p, tree, path, best[_row(node)])
        path.append(child)
        node = child


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)): what p still owes after q's proposals were accepted where p allowed."""
    r = (p - q).clamp_min(0)
    total = r.sum(dim=-1, keepdim=True)
    # total == 0 means p == q, where a rejection has probability 0; fall back to p for round-off.
    return torch.where(total > 0, r / total.clamp_min(1e-30), p)


def verify_sampled(p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor, generator: torch.Generator) -> Verdict:
    """A sampled chain. p: [g+1, V] target, q: [g, V] draft probabilities, draft: [g] tokens with draft[i] ~ q[i].

    1. accept draft[i] with probability min(1, p_i(x)/q_i(x)): one uniform r_i per position, all at once
    2. the step keeps the accepted prefix, up to the first rejection
    3. after a rejection at i the next token ~ norm(max(0, p_i - q_i)); if none was rejected, ~ p_g (bonus)
    Together these make every output token distributed exactly as the target alone would sample it.
    """
    g = draft.shape[0]
    p_x, q_x = p[torch.arange(g), draft], q[torch.arange(g), draft]
    r = torch.rand(g, generator=generator, device=p.device)
    accepted = int((r * q_x < p_x).int().cumprod(0).sum())
    dist = p[g] if accepted == g else residual(p[accepted], q[accepted])
    next_token = int(torch.multinomial(dist, 1, generator=generator))
    return Verdict(tuple(range(accepted)), next_token, 0, tuple(p_x.tolist()), tuple(q_x.tolist()))


def verify_tree_sampled(p: torch.Tensor, tree: TokenTree, generator: torch.Generator) -> Verdict:
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
            return _verdict(p, tree, path, int(torch.multinomial(dist, 1, generator=generator)))


def remove(dist: torch.Tensor, x: int) -> torch.Tensor:
    """norm(max(0, p' - δx)): the rejected token can no longer be drawn; the rest keeps its proportions."""
    out = dist.clone()
    out[x] = 0.0
    total = out.sum()
    return out / total if total > 0 else dist  # total 0 only by round-off (x had all the mass yet was rejected)


def typical_threshold(probs: torch.Tensor, epsilon: float, delta: float) -> float:
    """Medusa's typical acceptance bar: min(ε, δ·exp(−H(p))). A confident p (low entropy) sets a high bar."""
    entropy = -(probs * probs.clamp_min(1e-30).log()).sum()
    return float(torch.clamp(delta * torch.exp(-entropy), max=epsilon))


def verify_typical(p: torch.Tensor, tree: TokenTree, epsilon: float = 0.09, delta: float = 0.3) -> Verdict:
    """Lossy by design (Medusa's typical acceptance): walk down, taking the most likely child whose p(x) clears
    min(ε, δ·exp(−H)) at its parent; the token after the accepted path is the target's argmax there."""
    node, path = ROOT, []
    while True:
        row = p[_row(node)]
        bar = typical_threshold(row, epsilon, delta)
        passing = [c for c in tree.children(node) if float(row[tree.tokens[c]]) > bar]
        if not passing:
            return _verdict(p, tree, path, int(row.argmax()))
        node = max(passing, key=lambda c: float(row[tree.tokens[c]]))
        path.append(node)


def _row(node: int) -> int:
    return 0 if node == ROOT else 1 + node


def _verdict(p: torch.Tensor, tree: TokenTree, path: list[int], next_token: int) -> Verdict:
    """The longest candidate holding the accepted path is the one shown: when the walk stopped at an inner node, it
    carries the draft token that was tried and rejected there (a shorter one would pass for fully accepted)."""
    holding = [i for i, cand in enumerate(tree.paths) if list(cand[: len(path)]) == path]
    winner = max(holding, key=lambda i: len(tree.paths[i]))
    return Verdict(tuple(path), next_token, winner, token_probs(p, tree, tree.paths[winner]))


def token_probs(p: torch.Tensor, tree: TokenTree, nodes) -> tuple[float, ...]:
    """The target's probability of each node's token given its ancestors (one gather, one host copy)."""
    rows = torch.tensor([_row(tree.parents[n]) for n in nodes], dtype=torch.long, device=p.device)
    cols = torch.tensor([tree.tokens[n] for n in nodes], dtype=torch.long, device=p.device)
    return tuple(p[rows, cols].tolist())
