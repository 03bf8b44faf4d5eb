"""The acceptance rules: which drafted tokens the target keeps, and the token it adds after them.

Every rule reads p, the target's distributions from one forward over [root, node 1, ..., node n] (row 0 after
the root, row 1 + i after node i), and walks the token tree of the proposal; a chain is the tree with one
child per node. Which rule runs follows from the settings (greedy at temperature 0; else lossless, or
Medusa's typical acceptance when asked for) and, for lossless, from whether the drafter sampled with a q.
"""

import math
from dataclasses import replace

import torch

from ..events import Trial
from ..settings import Settings
from .sampling import choose
from .step import Verdict
from .tree import ROOT, TokenTree, build_tree, row_after


def verify(
    p: torch.Tensor,
    tree: TokenTree,
    q: torch.Tensor | None,
    settings: Settings,
    generator: torch.Generator,
    untruncated: torch.Tensor | None = None,
) -> Verdict:
    """`untruncated`: the target's distribution at the run's temperature before top-k and top-p, for typical
    acceptance (None: the same as p)."""
    if not tree.tokens:  # a plain step: the target's own token
        return Verdict((), int(choose(p[:1], settings, generator)[0]))
    draft = None if q is None else torch.tensor(tree.tokens, device=p.device)  # a sampled chain
    if settings.greedy or settings.acceptance == "typical":  # typical: lossy by design; the user asked for it
        verdict = (
            verify_greedy(p, tree)
            if settings.greedy
            else verify_typical(p if untruncated is None else untruncated, tree)
        )
        if q is None:
            return verdict
        q_x = q[torch.arange(len(draft)), draft].tolist()
        trials = tuple(replace(t, q=q_x[t.depth - 1]) for t in verdict.trials)
        return replace(verdict, q=tuple(q_x), trials=trials)
    if q is not None:
        return verify_sampled(p, q, draft, generator)
    return verify_tree_sampled(p, tree, generator)


def chain(tokens) -> TokenTree:
    return build_tree([list(tokens)])


def verify_greedy(p: torch.Tensor, tree: TokenTree) -> Verdict:
    """Walk down while some child equals the target's argmax at its parent; the argmax where it stops follows."""
    best = p.argmax(dim=-1).tolist()
    node = ROOT  # tried: (node, its parent's row) in the order compared
    path = []
    tried = []
    while True:
        child = None
        for c in tree.children(node):
            tried.append((c, row_after(node)))
            if tree.tokens[c] == best[row_after(node)]:
                child = c
                break
        if child is None:
            break
        path.append(child)
        node = child
    probs = p[[row for _, row in tried], [tree.tokens[c] for c, _ in tried]].tolist() if tried else []
    trials = tuple(Trial(tree.depths[c], tree.tokens[c], pr, 1.0, c in path) for (c, _), pr in zip(tried, probs))
    return _verdict(p, tree, path, best[row_after(node)], trials)


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)): what p still owes after q's proposals were accepted where p allowed."""
    r = (p - q).clamp_min(0)
    total = r.sum(dim=-1, keepdim=True)
    # total == 0 means p == q, where a rejection has probability 0; fall back to p for round-off.
    return torch.where(total > 0, r / total.clamp_min(1e-30), p)


def passes(p_x, q_x, u):
    """Whether each drafted token x passes: u < p(x) / q(x) for a uniform u, i.e. with probability min(1, p(x)/q(x))
    (written without the division, so that q(x) = 0 cannot divide). Tensors or floats."""
    return u * q_x < p_x


def accepted_prefix(passed: torch.Tensor) -> int:
    """How many drafted tokens the step keeps: those before the first that did not pass."""
    return int(passed.int().cumprod(0).sum())


def verify_sampled(p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor, generator: torch.Generator) -> Verdict:
    """A sampled chain. p: [g+1, V] target, q: [g, V] draft probabilities, draft: [g] tokens with draft[i] ~ q[i].

    1. accept draft[i] with probability min(1, p_i(x)/q_i(x)): one uniform r_i per position, all at once
    2. the step keeps the accepted prefix, up to the first rejection
    3. after a rejection at i the next token ~ norm(max(0, p_i - q_i)); if none was rejected, ~ p_g (bonus)
    Together these make every output token distributed exactly as the target alone would sample it.
    """
    g = draft.shape[0]
    p_x = p[torch.arange(g), draft]
    q_x = q[torch.arange(g), draft]
    r = torch.rand(g, generator=generator, device=p.device)
    accepted = accepted_prefix(passes(p_x, q_x, r))
    dist = p[g] if accepted == g else residual(p[accepted], q[accepted])
    next_token = int(torch.multinomial(dist, 1, generator=generator))
    px, qx, u = torch.stack([p_x, q_x, r.to(p_x.dtype)]).tolist()
    trials = tuple(Trial(i + 1, int(draft[i]), px[i], qx[i], i < accepted, u[i]) for i in range(min(accepted + 1, g)))
    return Verdict(tuple(range(accepted)), next_token, 0, tuple(px), tuple(qx), trials, None if accepted == g else dist)


def verify_tree_sampled(p: torch.Tensor, tree: TokenTree, generator: torch.Generator) -> Verdict:
    """Recursive rejection sampling over siblings, with q a point mass on each proposed token:
    1. at a node, try its children in turn: accept child x with probability p'(x) (= min(1, p'(x) / q(x)), q(x) = 1)
    2. on rejection remove x: p' <- norm(max(0, p' - δx)), i.e. zero x and renormalise; try the next child
    3. when every child is rejected, the next token ~ p' (what is left); an accepted child becomes the node
    Every emitted token is then distributed exactly as the target's own sample at that position.
    """
    node = ROOT
    path = []
    trials = []
    while True:
        dist = p[row_after(node)]
        for child in tree.children(node):
            x = tree.tokens[child]
            u = float(torch.rand((), generator=generator, device=dist.device))
            px = float(dist[x])
            kept = passes(px, 1.0, u)  # q(x) = 1
            trials.append(Trial(tree.depths[child], x, px, 1.0, kept, u))
            if kept:
                path.append(child)
                node = child
                break
            dist = remove(dist, x)
        else:
            drawn = int(torch.multinomial(dist, 1, generator=generator))
            removed = bool(tree.children(node))  # the token came from what the rejected siblings left over
            return _verdict(p, tree, path, drawn, tuple(trials), dist if removed else None)


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
    """Lossy by design (Medusa's typical acceptance). A drafted token passes when the target gives it more than
    min(ε, δ·exp(−H)) at its parent, p being the target's distribution at the run's temperature before any top-k or
    top-p cut; the longest candidate prefix that passes throughout is accepted (between equally long ones, the
    likelier); the token after it is the target's argmax there."""
    rows = [row_after(tree.parents[n]) for n in range(len(tree.tokens))]
    bars = {row: typical_threshold(p[row], epsilon, delta) for row in set(rows)}
    probs = p[rows, list(tree.tokens)].tolist()
    reach: dict[int, tuple[int, float]] = {}  # a node whose path from the root passes throughout: (depth, log p)
    for n, parent in enumerate(tree.parents):  # parents come before their children
        above = (0, 0.0) if parent == ROOT else reach.get(parent)
        if above is not None and probs[n] > bars[rows[n]]:
            reach[n] = (above[0] + 1, above[1] + math.log(probs[n]))
    end = max(reach, key=reach.get) if reach else None
    path = [] if end is None else list(tree.path_to(end))
    shown = _verdict(p, tree, path, 0)
    tried = tree.paths[shown.winner][: len(path) + 1]  # the shown candidate up to its first failing token
    trials = tuple(
        Trial(tree.depths[n], tree.tokens[n], probs[n], 1.0, n in reach and i < len(path), bar=bars[rows[n]])
        for i, n in enumerate(tried)
    )
    return replace(shown, next_token=int(p[row_after(path[-1] if path else ROOT)].argmax()), trials=trials)


def _verdict(p: torch.Tensor, tree: TokenTree, path: list[int], next_token: int, trials=(), drawn_from=None) -> Verdict:
    """The longest candidate holding the accepted path is the one shown: when the walk stopped at an inner node, it
    carries the draft token that was tried and rejected there (a shorter one would pass for fully accepted)."""
    holding = [i for i, cand in enumerate(tree.paths) if list(cand[: len(path)]) == path]
    winner = max(holding, key=lambda i: len(tree.paths[i]))
    return Verdict(tuple(path), next_token, winner, token_probs(p, tree, tree.paths[winner]), None, trials, drawn_from)


def token_probs(p: torch.Tensor, tree: TokenTree, nodes) -> tuple[float, ...]:
    """The target's probability of each node's token given its ancestors (one gather, one host copy)."""
    rows = torch.tensor([row_after(tree.parents[n]) for n in nodes], dtype=torch.long, device=p.device)
    cols = torch.tensor([tree.tokens[n] for n in nodes], dtype=torch.long, device=p.device)
    return tuple(p[rows, cols].tolist())
