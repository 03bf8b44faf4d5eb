"""Several sequences of one model in one KV cache: a forward feeds every row at once, and each row keeps its own length.

The cache is [rows, heads, width, dim] with each row right-aligned: row b's committed entries fill the columns
[width - length_b, width), the columns before them are padding no query ever sees. A forward appends the same number
of columns q to every row (a row with fewer tokens pads its block; the padding sees only itself and is never kept).
After a verify forward each row keeps its root and accepted path and the cache is re-aligned in one gather per layer
(`keep`): rows that accepted fewer tokens than others get more padding, and rows that finished leave the batch. A
drafter that feeds several forwards before the verdict (a draft model drafting token by token) marks the columns it
keeps seeing (`hold`) and re-aligns once per step. Between two steps new rows may join (`start` again): the rows there
are padded at the left to the widest, and the new ones appended.

Every row is computed as it would be alone: its queries see exactly its own entries (a 4D mask per row), at its own
positions, and under exact mode each query row's attention is its own one-query call over those entries
(models/exact.py). Each row's prompt is read by a forward of its own (`start`), the same call plain decoding makes.
"""

from dataclasses import dataclass

import torch

from ..errors import TreeAttentionUnsupported
from .cached_lm import TREE_MASK, CachedLM
from .kv_cache import KVCache, require_custom_mask
from .tree import TokenTree


@dataclass(frozen=True)
class Feed:
    """What one row feeds a forward: tokens, which of them each sees (its ancestors and itself), their depths."""

    tokens: tuple[int, ...]
    sees: torch.Tensor  # [m, m] bool
    depths: tuple[int, ...]

    @classmethod
    def chain(cls, tokens) -> "Feed":
        m = len(tokens)
        return cls(tuple(tokens), torch.ones(m, m, dtype=torch.bool).tril(), tuple(range(m)))

    @classmethod
    def verify(cls, root: int, tree: TokenTree) -> "Feed":
        """The root and every node of a proposal's tree (row 0 the root, row 1 + i node i)."""
        return cls((root, *tree.tokens), tree.shape.sees, (0, *tree.depths))


class BatchedLM:
    """A model and one cache of several rows; `rows[i]` names the caller's row that batch row i holds."""

    def __init__(self, model: torch.nn.Module):
        require_custom_mask(model, TreeAttentionUnsupported, TREE_MASK)  # each row's own mask must be honoured
        self.model, self.device = model, model.device
        self.kv: KVCache | None = None
        self.rows: list[int] = []
        self.lengths: list[int] = []  # committed entries per batch row
        self.width = 0  # the cache's columns at the last re-alignment: every row's entries end here
        self.held: list[list[int]] = []  # per batch row, columns past `width` it still sees (a draft's drafts)
        self.columns = 0  # the cache's columns now
        self._block = 0  # the first column of the last forward's block
        self._min = torch.finfo(model.dtype).min

    @torch.inference_mode()
    def start(self, prompts: list[list[int]], rows: list[int] | None = None) -> None:
        """Every prompt but its last token into the cache, each by a forward of its own (as plain decoding reads
        it), then side by side: a new batch, or rows joining the one decoding (at a step boundary, after `keep`)."""
        alone = []
        for prompt in prompts:
            lm = CachedLM(self.model)
            if len(prompt) > 1:
                lm.extend(torch.tensor(prompt[:-1]), last_only=True)
            alone.append(lm)
        lengths = [lm.length for lm in alone]
        rows = list(range(len(self.rows), len(self.rows) + len(prompts))) if rows is None else list(rows)
        if not self.rows:
            self.width = max(lengths, default=0)
            self.kv = KVCache.stacked(self.model, [lm.kv for lm in alone], lengths, self.width)
        else:
            assert self.columns == self.width and not any(self.held), "rows join between steps"
            self.width = max(self.width, *lengths)
            self.kv.add_rows([lm.kv for lm in alone], lengths, self.width)
        self.columns = self.width
        self.rows, self.lengths = self.rows + rows, self.lengths + lengths
        self.held += [[] for _ in prompts]

    def row_length(self, i: int) -> int:
        """Entries batch row i has committed and holds: its position for the next token fed."""
        return self.lengths[i] + len(self.held[i])

    @torch.inference_mode()
    def extend(self, feeds: list[Feed]) -> list[torch.Tensor]:
        """One forward of every batch row's feed; each row's [m, V] logits."""
        assert len(feeds) == len(self.rows)
        q = max(len(f.tokens) for f in feeds)
        ids = torch.zeros(len(feeds), q, dtype=torch.long)
        positions = torch.zeros(len(feeds), q, dtype=torch.long)
        sees = torch.zeros(len(feeds), q, self.columns + q, dtype=torch.bool)
        for i, feed in enumerate(feeds):
            m, start = len(feed.tokens), self.row_length(i)
            ids[i, :m] = torch.tensor(feed.tokens)
            positions[i, :m] = start + torch.tensor(feed.depths)
            positions[i, m:] = start  # padding: any position; it sees only itself
            sees[i, :m, self.width - self.lengths[i] : self.width] = True
            if self.held[i]:
                sees[i, :m, self.held[i]] = True
            sees[i, :m, self.columns : self.columns + m] = feed.sees
            sees[i, m:, self.columns + m : self.columns + q] = torch.eye(q - m, dtype=torch.bool)
        mask = torch.zeros(sees.shape, dtype=self.model.dtype).masked_fill(~sees, self._min)[:, None]
        out = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=positions.to(self.device),
            past_key_values=self.kv.cache,
            use_cache=True,
        )
        self._block, self.columns = self.columns, self.columns + q
        return [out.logits[i, : len(f.tokens)] for i, f in enumerate(feeds)]

    def hold(self, kept: list[list[int]]) -> None:
        """After a forward: the rows of its block (by their index in each feed) that each batch row goes on seeing."""
        for i, rows in enumerate(kept):
            self.held[i] += [self._block + r for r in rows]

    @torch.inference_mode()
    def keep(self, kept: list[list[int]], staying: list[int] | None = None, held: list[int] | None = None) -> None:
        """After a verify forward: batch row i keeps its committed entries, the first held[i] of the columns it held
        (default: all) and the rows kept[i] of the last block (its root and accepted path, in order); only the batch
        rows `staying` (indexes into this batch, default all) go on. The cache is re-aligned so that every row's
        entries end at the same column again: one gather per layer."""
        staying = list(range(len(self.rows))) if staying is None else staying
        columns = []
        for i in staying:
            mine = list(range(self.width - self.lengths[i], self.width))
            mine += self.held[i] if held is None else self.held[i][: held[i]]
            columns.append(mine + [self._block + r for r in kept[i]])
        width = max((len(c) for c in columns), default=0)
        index = torch.tensor([[c[0] if c else 0] * (width - len(c)) + c for c in columns], dtype=torch.long)
        self.kv.realign(torch.tensor(staying, dtype=torch.long, device=self.device), index.to(self.device))
        self.rows = [self.rows[i] for i in staying]
        self.lengths = [len(c) for c in columns]
        self.width = self.columns = width
        self.held = [[] for _ in staying]
