"""CachedLM's contract on a llama.cpp context: extend by some tokens and read their logits, roll back to a length,
verify a token tree, let a drafter grow its own tree, keep a tree's accepted path.

Sequence 0 holds the committed text, token i at position i. A tree lives in further sequences for one step: llama.cpp
masks attention by sequence, so each leaf of a verify tree is a sequence that holds the prefix's cells (shared, not
copied), the root and its own path's nodes; a node on several leaves' paths is one cell in all their sequences.
Keeping the accepted path hands its cells to sequence 0 and lets every leaf's sequence go. A drafter's own tree
(`extend_branches`) gives each new row a sequence of its own holding the prefix and the row's ancestors.
"""

import weakref

import numpy as np
import torch

from ...engine.tree import TokenTree
from ...errors import InvalidRequest, RuntimeUnsupported
from .binding import MICRO_BATCH, Context, Sequences

MAIN = 0  # the committed text's sequence


class LlamaLM:
    """One sequence of a llama.cpp model (batch 1), with CachedLM's verbs. `length` counts the cache's entries: the
    committed text's, then (while a step is under way) the tree rows fed after it, each a (sequence, position)."""

    keep_hidden = False
    last_hidden = None

    def __init__(self, model, capacity: int):
        self.model = model
        self.device = model.device
        self.ctx: Context = model.take_context(capacity)
        weakref.finalize(self, model.give_context, self.ctx)
        self.length = 0
        self.chain = 0  # entries [0, chain) are sequence 0's positions 0..chain-1
        self.rows: list[tuple[int, int]] = []  # entries chain.. : (sequence, position) of each tree row fed since
        self.leaves: list[tuple[int, tuple[int, ...]]] = []  # a pending verify tree: (leaf's sequence, its path)
        self.root: tuple[int, torch.Tensor] | None = None  # the prompt's last token, read with it: (id, its logits)
        self._sequences = Sequences(self.ctx, MAIN + 1, "a step")

    def hidden(self, start: int, end: int):
        raise RuntimeUnsupported("llama.cpp does not hand specviz the target's hidden states")

    # -- the committed text ------------------------------------------------------------------------------------
    def read_prompt(self, prompt: list[int]) -> None:
        """The prompt into the cache as llama.cpp's own tools read it: every token, the last one too, in micro-batches
        of MICRO_BATCH, keeping the last one's logits. The cache then counts the prompt but its last token (the
        engine's root, which the first step feeds): that step reads the root's logits kept here and feeds only what
        follows it, so plain decoding's first token and every later one are llama.cpp's."""
        if not prompt:
            return
        logits = self.extend(torch.tensor(prompt), last_only=True)
        self.chain = self.length = len(prompt) - 1
        self.root = (prompt[-1], logits)

    def _after_root(self, ids: list[int]) -> tuple[list[int], torch.Tensor | None]:
        """`ids` starting with the root read with the prompt: the rest to feed, and the root's logits; else as
        given."""
        root = self.root
        self.root = None
        if root is None or not ids or ids[0] != root[0]:
            if root is not None:  # another token at the root's place: the cell read with the prompt goes
                self.ctx.remove(MAIN, self.chain, -1)
            return ids, None
        self.chain = self.length = self.length + 1
        return ids[1:], root[1]

    def extend(self, ids: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """Append [n] token ids at positions length..length+n-1; return their [n, V] logits ([1, V] if last_only)."""
        assert not self.rows and not self.leaves, "a step's tree rows are kept or dropped before the text grows"
        ids, kept = self._after_root([int(t) for t in ids.reshape(-1).tolist()])
        if kept is not None and (last_only or not ids):
            return kept if not ids else self.extend(torch.tensor(ids), last_only=True)
        self._check_room(len(ids))
        out = [] if kept is None else [kept.numpy()]
        for start in range(0, len(ids), MICRO_BATCH):  # a long prompt is read a micro-batch at a time
            piece = ids[start : start + MICRO_BATCH]
            last_piece = start + MICRO_BATCH >= len(ids)
            wanted = [(not last_only) or (last_piece and i == len(piece) - 1) for i in range(len(piece))]
            positions = range(self.length, self.length + len(piece))
            out.append(self.ctx.forward(piece, positions, [(MAIN,)] * len(piece), wanted))
            self.length += len(piece)
        self.chain = self.length
        return torch.from_numpy(np.concatenate(out) if len(out) > 1 else out[0])

    def truncate(self, length: int) -> None:
        """Forget every entry from `length` on: a pending verify tree's sequences go whole, a drafter's tree rows from
        `length` on with theirs, then sequence 0's tail."""
        assert 0 <= length <= self.length
        if self.root is not None:  # the prompt's last token goes too (the cache stops before it)
            self.root = None
            self.ctx.remove(MAIN, self.chain, -1)
        for sequence, _ in self.leaves:
            self._sequences.give_back(sequence)
        self.leaves = []
        keep = max(0, length - self.chain)
        for sequence in {s for s, _ in self.rows[keep:]} - {s for s, _ in self.rows[:keep]}:
            self._sequences.give_back(sequence)
        self.rows = self.rows[:keep]
        if length < self.chain:
            self.ctx.remove(MAIN, length, -1)
            self.chain = length
        self.length = self.chain + len(self.rows)

    # -- a verify tree -----------------------------------------------------------------------------------------
    def extend_tree(self, root: int, tree: TokenTree) -> torch.Tensor:
        """Append the root and every tree node in one forward; return [1 + n, V] logits (row 0 = root). A chain is
        fed to sequence 0 as it is; a tree gives each leaf a sequence holding the prefix, and each node the
        sequences of the leaves below it, so a node sees the cache, the root and its own ancestors."""
        if tree.is_chain:
            return self.extend(torch.tensor([root, *tree.tokens]))
        assert not self.rows and not self.leaves
        ids, kept = self._after_root([root])
        self._check_room(1 + len(tree.tokens))
        shape = tree.shape
        base = self.length - (kept is not None)
        leaves = [node for node in range(len(tree.tokens)) if not shape.children(node)]
        if len(leaves) > len(self._sequences):
            raise InvalidRequest(f"a tree of {len(leaves)} leaves needs more sequences than llama.cpp has")
        sequences = {leaf: self._sequences.take() for leaf in leaves}
        below = {node: [] for node in range(len(tree.tokens))}
        for leaf, sequence in sequences.items():
            self.ctx.share(MAIN, sequence, 0, base + (kept is not None))  # a root read with the prompt is shared too
            for node in shape.path_to(leaf):
                below[node].append(sequence)
        feed = [] if kept is not None else [(root, base, (MAIN, *sequences.values()))]
        feed += [(t, base + d, tuple(below[n])) for n, (t, d) in enumerate(zip(tree.tokens, tree.depths))]
        logits = self._forward(feed)
        if kept is not None:
            logits = torch.cat([kept, logits])
        self.leaves = [(sequences[leaf], tuple(shape.path_to(leaf))) for leaf in leaves]
        self.chain = base + 1  # the root joined sequence 0
        self.length = base + 1 + len(tree.tokens)
        return logits

    def keep(self, committed: int, nodes: list[int]) -> None:
        """After a verify forward: keep the `committed` entries (the root included) and the accepted tree `nodes`
        (a path, ascending); drop the rest. The path's cells join sequence 0; every leaf's sequence goes."""
        if not self.leaves:
            return self.truncate(committed + len(nodes))
        assert committed == self.chain
        if nodes:
            holder = next(s for s, path in self.leaves if tuple(path[: len(nodes)]) == tuple(nodes))
            self.ctx.share(holder, MAIN, committed, committed + len(nodes))
        self.truncate(committed)
        self.chain = self.length = committed + len(nodes)

    # -- a drafter's own tree ----------------------------------------------------------------------------------
    def extend_branches(
        self, ids: list[int], positions: list[int], shared: int, ancestors: list[list[int]]
    ) -> torch.Tensor:
        """Append n rows in one forward; return their [n, V] logits. Row i holds ids[i] at positions[i] and sees
        entries [0, shared), the entries listed in ancestors[i] and itself: a sequence of its own holds those."""
        assert shared <= self.chain and not self.leaves
        self._check_room(len(ids))
        feed = []
        cells = []
        for token, position, seen in zip(ids, positions, ancestors):
            sequence = self._sequences.take()
            self.ctx.share(MAIN, sequence, 0, shared)
            for column in sorted(seen, key=lambda c: self._cell(c)[1]):
                holder, at = self._cell(column)
                self.ctx.share(holder, sequence, at, at + 1)
            feed.append((token, position, (sequence,)))
            cells.append((sequence, position))
        logits = self._forward(feed)
        self.rows += cells
        self.length += len(ids)
        return logits

    # -- the rest ----------------------------------------------------------------------------------------------
    def _cell(self, column: int) -> tuple[int, int]:
        return (MAIN, column) if column < self.chain else self.rows[column - self.chain]

    def _forward(self, feed: list[tuple[int, int, tuple[int, ...]]]) -> torch.Tensor:
        tokens, positions, sequences = zip(*feed)
        return torch.from_numpy(self.ctx.forward(tokens, positions, sequences, [True] * len(feed)))

    def _check_room(self, n: int) -> None:
        if self.length + n > self.ctx.n_ctx:
            raise InvalidRequest(f"the text would outgrow llama.cpp's context of {self.ctx.n_ctx} tokens")
