"""BatchedLM's contract on a llama.cpp context: several rows decoded together, each its own sequence, every row's feed
in one forward (a ragged batch: a row pays for its own positions only), rows leaving and joining between steps.

A row's committed entries are its sequence's positions 0..length-1; what it feeds a forward goes after them, a
chain in its own sequence, a tree in sequences of its leaves that hold the row's cells too (as LlamaLM verifies a
tree). `hold` lets a row go on seeing what it fed (a draft model drafting token by token); `keep` keeps each row's
committed entries, the held ones asked for and the accepted rows of its last feed, and lets the rest go.
"""

import weakref

import torch

from ...engine.batched_lm import Feed
from ...errors import InvalidRequest
from .binding import MICRO_BATCH, Sequences

BATCH_CONTEXT = 16384  # entries of a batch whose caller does not say how many its rows hold together


class LlamaRows:
    """A model's rows in one llama.cpp context; `rows[i]` names the caller's row that batch row i holds."""

    def __init__(self, model, capacity: int = 0):
        """`capacity`: the entries every row together may hold at once (default BATCH_CONTEXT)."""
        self.model = model
        self.device = model.device
        self.ctx = model.take_context(capacity or BATCH_CONTEXT)
        weakref.finalize(self, model.give_context, self.ctx)
        self.rows: list[int] = []
        self.lengths: list[int] = []  # committed entries per batch row
        self.held: list[list[int]] = []  # per batch row, the positions past its length it still sees
        self.sequence: list[int] = []  # per batch row, its llama.cpp sequence
        self._fed: list[tuple[int, int, list[tuple[int, tuple[int, ...]]]]] = []  # per row: (first position, rows fed,
        # leaves of its tree: (sequence, path as feed rows))
        self._sequences = Sequences(self.ctx, 0, "a batch")

    def row_length(self, i: int) -> int:
        return self.lengths[i] + len(self.held[i])

    def start(self, prompts: list[list[int]], rows: list[int] | None = None) -> None:
        """Every prompt but its last token into a sequence of its own, each read by forwards of its own (as plain
        decoding reads it), appended to the batch."""
        ctx = self.ctx
        rows = list(range(len(self.rows), len(self.rows) + len(prompts))) if rows is None else list(rows)
        for prompt in prompts:
            sequence = self._sequences.take()
            text = prompt[:-1]
            for at in range(0, len(text), MICRO_BATCH):
                piece = text[at : at + MICRO_BATCH]
                last = [i == len(piece) - 1 for i in range(len(piece))]
                ctx.forward(piece, range(at, at + len(piece)), [(sequence,)] * len(piece), last)
            self.sequence.append(sequence)
            self.lengths.append(len(text))
            self.held.append([])
        self.rows += rows

    def extend(self, feeds: list[Feed]) -> list[torch.Tensor]:
        """One forward of every batch row's feed (a feed may be empty); each row's [m, V] logits."""
        assert len(feeds) == len(self.rows)
        batch = []
        self._fed = []
        for i, feed in enumerate(feeds):
            start = self.row_length(i)
            if not feed.tokens:
                self._fed.append((start, 0, []))
                continue
            if _is_chain(feed):
                batch += [(t, start + d, (self.sequence[i],)) for t, d in zip(feed.tokens, feed.depths)]
                self._fed.append((start, len(feed.tokens), []))
                continue
            leaves = self._leaves(i, feed)
            below = {r: tuple(s for s, path in leaves if r in path) for r in range(1, len(feed.tokens))}
            batch.append((feed.tokens[0], start, (self.sequence[i], *(s for s, _ in leaves))))
            batch += [(feed.tokens[r], start + feed.depths[r], below[r]) for r in range(1, len(feed.tokens))]
            self._fed.append((start, len(feed.tokens), leaves))
        if len(batch) > MICRO_BATCH:
            raise InvalidRequest(f"a batch step of {len(batch)} tokens is more than llama.cpp's {MICRO_BATCH}")
        logits = torch.empty(0)
        if batch:
            tokens, positions, sequences = zip(*batch)
            logits = torch.from_numpy(self.ctx.forward(tokens, positions, sequences, [True] * len(batch)))
        out = []
        at = 0
        for _, fed, _ in self._fed:
            out.append(logits[at : at + fed])
            at += fed
        return out

    def _leaves(self, i: int, feed: Feed) -> list[tuple[int, tuple[int, ...]]]:
        """A tree feed's leaves (feed rows no other row sees as an ancestor), each a new sequence holding row i's
        cells, with its path of feed rows from the root."""
        sees = feed.sees
        m = len(feed.tokens)
        leaves = [r for r in range(1, m) if not any(bool(sees[c, r]) for c in range(m) if c != r)]
        out = []
        for leaf in leaves:
            sequence = self._sequences.take()
            self.ctx.share(self.sequence[i], sequence, 0, self.row_length(i))
            path = tuple(r for r in range(1, m) if bool(sees[leaf, r]))
            out.append((sequence, path))
        return out

    def hold(self, kept: list[list[int]]) -> None:
        """After a forward: the rows of its feed (by index) each batch row goes on seeing (a chain's, in order)."""
        for i, rows in enumerate(kept):
            start, fed, leaves = self._fed[i]
            assert not leaves and list(rows) == list(range(len(rows))), "a row holds a chain's leading rows"
            self.held[i] += [start + r for r in rows]

    def keep(self, kept: list[list[int]], staying: list[int] | None = None, held: list[int] | None = None) -> None:
        """After a verify forward: batch row i keeps its committed entries, the first held[i] of the entries it held
        (default: all) and the rows kept[i] of its last feed (its root and accepted path, in order); only the batch
        rows `staying` (indexes, default all) go on."""
        staying = list(range(len(self.rows))) if staying is None else staying
        lengths = []
        for i in range(len(self.rows)):
            start, _, leaves = self._fed[i] if i < len(self._fed) else (self.row_length(i), 0, [])
            own = self.lengths[i] + (len(self.held[i]) if held is None else held[i])
            rows = list(kept[i])
            if leaves and len(rows) > 1:  # the root is the row's own; the accepted nodes come from a leaf's cells
                path = tuple(rows[1:])
                holder = next(s for s, p in leaves if p[: len(path)] == path)
                self.ctx.share(holder, self.sequence[i], start + 1, start + len(rows))
            for sequence, _ in leaves:
                self._sequences.give_back(sequence)
            assert rows == list(range(len(rows))) or leaves, "a chain keeps its leading rows"
            length = own + len(rows) if rows else own
            if rows and own != start:  # held entries dropped before the feed: only a chain fed after them
                raise AssertionError("a row keeps fed rows only after all it held")
            self.ctx.remove(self.sequence[i], length, -1)
            lengths.append(length)
        for i in set(range(len(self.rows))) - set(staying):
            self._sequences.give_back(self.sequence[i])
        self.rows = [self.rows[i] for i in staying]
        self.sequence = [self.sequence[i] for i in staying]
        self.lengths = [lengths[i] for i in staying]
        self.held = [[] for _ in staying]
        self._fed = []


def _is_chain(feed: Feed) -> bool:
    """A feed whose every row sees all rows before it: fed to the row's own sequence as it is."""
    m = len(feed.tokens)
    return bool(torch.equal(feed.sees, torch.ones(m, m, dtype=torch.bool).tril()))
