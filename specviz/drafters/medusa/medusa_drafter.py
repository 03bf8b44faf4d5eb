"""The Medusa drafter: heads on the target's own last hidden state propose a tree of candidates.

A "choice" is an index path: [i0, i1, ...] means the i0-th most likely token of head 0 at depth 1, then the
i1-th of head 1 at depth 2, and so on. The trie of the choices has the same shape every step, so it is built
once per γ; each step only fills in the heads' guesses, and the engine's tree verification does the rest.
"""

import json

from ...engine.tree import TokenTree, build_tree
from ...errors import InvalidRequest
from ...settings import MAX_GAMMA
from ..contract import BaseDrafter, DrafterProfile, Proposal
from .heads import MedusaHeads

# Candidate trees as index paths: (i0, i1, ...) = head 0's i0-th guess, then head 1's i1-th, ...
# fmt: off
TREES = {
    "sparse": ((0,), (0, 0), (1,), (0, 1), (0, 0, 0), (1, 0), (2,), (0, 0, 0, 0), (0, 2), (0, 0, 1), (3,)),
    "chain": ((0,), (0, 0), (0, 0, 0), (0, 0, 0, 0)),
    "wide": (
        (0,), (1,), (2,), (3,), (4,), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (3, 0), (0, 3),
        (0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0), (0, 0, 2), (2, 1),
        (0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 0), (0, 1, 0, 0), (1, 0, 0, 0),
    ),
}
# fmt: on
DEFAULT_CHOICES = TREES["sparse"]  # most weight on the top guesses, a few second choices near the root
MAX_TREE_PATHS = 64
MAX_TREE_WIDTH = 32


def medusa_tree(spec) -> tuple[tuple[int, ...], ...]:
    """A named tree (sparse, chain, wide) or index paths as JSON text, e.g. '[[0], [0, 0], [1]]'."""
    if isinstance(spec, str) and spec.strip() in TREES:
        return TREES[spec.strip()]
    try:
        paths = json.loads(spec) if isinstance(spec, str) else spec
    except ValueError:
        paths = None
    ok = (
        isinstance(paths, (list, tuple))
        and 0 < len(paths) <= MAX_TREE_PATHS
        and all(
            isinstance(p, (list, tuple))
            and 0 < len(p) <= MAX_GAMMA
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < MAX_TREE_WIDTH for i in p)
            for p in paths
        )
    )
    if not ok:
        raise InvalidRequest(
            f"Medusa tree must be one of {', '.join(TREES)} or a JSON list of up to "
            f"{MAX_TREE_PATHS} index paths like [[0], [0, 0], [1]] (indexes 0..{MAX_TREE_WIDTH - 1})"
        )
    return tuple(tuple(p) for p in paths)


class MedusaDrafter(BaseDrafter):
    def __init__(self, heads: MedusaHeads, choices=DEFAULT_CHOICES):
        self.heads = heads
        self.choices = [tuple(c) for c in choices]
        depth = max(len(c) for c in self.choices)
        if depth > len(heads.heads):
            raise InvalidRequest(f"the Medusa tree is {depth} deep but these heads are only {len(heads.heads)}")
        self.widths = [1 + max(c[k] for c in self.choices if len(c) > k) for k in range(depth)]
        self.profile = DrafterProfile(hidden_layers=(-1,), longest=depth)  # the heads read the final hidden state
        self._tries: dict[int, TokenTree] = {}  # γ -> the trie of the index paths cut at γ
        self.target_lm = None

    def _trie(self, gamma: int) -> TokenTree:
        if gamma not in self._tries:
            self._tries[gamma] = build_tree(dict.fromkeys(c[:gamma] for c in self.choices))  # unique, in order
        return self._tries[gamma]

    def max_nodes(self, gamma: int) -> int:
        return len(self._trie(gamma).tokens)

    def start(self, prompt_ids: list[int], target, judges=None) -> None:
        self.target_lm = target  # the engine's cache of the target, kept with its hidden states

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        hidden = None if self.target_lm is None else self.target_lm.last_hidden
        if hidden is None:  # a one-token prompt: no hidden state yet, so a plain step
            return None
        # The cache ends at tokens[-2] (the target's own last token is fed with the next verify), so the target's
        # LM head on this state gives tokens[-1], and head k (from 0) guesses draft depth k + 1: the token k + 1
        # places after tokens[-1].
        top = self.heads.top_ids(hidden, self.widths)
        trie = self._trie(gamma)
        candidates = tuple(tuple(top[k][i] for k, i in enumerate(trie.candidate(n))) for n in range(len(trie.paths)))
        return Proposal(candidates, forwards=1, shape=trie.shape)
