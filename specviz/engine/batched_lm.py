"""Several sequences of one model in one KV cache: a forward feeds every row at once, and each row keeps its own length.

The cache is packed: one sequence of entries [heads, columns, dim] in which the rows' committed entries lie one after
another, row i's in the run [starts[i], starts[i] + lengths[i]). A forward appends, after the cache's columns, each
row's feed in turn, and each row only as many columns as it feeds: a row verifying γ drafts pays for its own γ + 1
positions, a row that feeds nothing for none. Each query sees its own row's run, the columns it holds past it and its
own ancestors in its feed (a 4D mask), at its own positions. After a verify forward each row keeps its run, the
columns it held and its root and accepted path, and the cache is packed again in one gather per layer (`keep`): rows
that finished leave with their entries. A drafter that feeds several forwards before the verdict (a draft model
drafting token by token) marks the columns it keeps seeing (`hold`) and packs once per step. Between two steps new
rows may join (`start` again): their entries are appended.

Every row is computed as it would be alone: its queries see exactly its own entries, at its own positions, and under
exact mode each query row's attention is its own one-query call over those entries (models/exact.py). Each row's
prompt is read by a forward of its own (`start`), the same call plain decoding makes.
"""

from dataclasses import dataclass
from itertools import accumulate

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
    """A model and one packed cache of several rows; `rows[i]` names the caller's row that batch row i holds."""

    def __init__(self, model: torch.nn.Module):
        require_custom_mask(model, TreeAttentionUnsupported, TREE_MASK)  # each row's own mask must be honoured
        self.model = model
        self.device = model.device
        self.kv: KVCache | None = None
        self.rows: list[int] = []
        self.lengths: list[int] = []  # committed entries per batch row, packed in this order from column 0
        self.held: list[list[int]] = []  # per batch row, columns past `width` it still sees (a draft's drafts)
        self.columns = 0  # the cache's columns now
        self._block: list[int] = []  # per batch row, the column its feed in the last forward started at
        self._min = torch.finfo(model.dtype).min

    @torch.inference_mode()
    def start(self, prompts: list[list[int]], rows: list[int] | None = None) -> None:
        """Every prompt but its last token into the cache, each by a forward of its own (as plain decoding reads
        it), then after the others: a new batch, or rows joining the one decoding (at a step boundary, after `keep`)."""
        alone = []
        for prompt in prompts:
            lm = CachedLM(self.model)
            lm.read_prompt(prompt)
            alone.append(lm)
        lengths = [lm.length for lm in alone]
        rows = list(range(len(self.rows), len(self.rows) + len(prompts))) if rows is None else list(rows)
        if not self.rows:
            self.kv = KVCache.packed(self.model, [lm.kv for lm in alone], lengths)
        else:
            assert self.columns == self.width and not any(self.held), "rows join between steps"
            self.kv.append([lm.kv for lm in alone], lengths)
        self.rows = self.rows + rows
        self.lengths = self.lengths + lengths
        self.columns = self.width
        self.held += [[] for _ in prompts]

    @property
    def width(self) -> int:
        """The cache's columns at the last packing: every row's committed entries lie before it."""
        return sum(self.lengths)

    @property
    def starts(self) -> list[int]:
        """Per batch row, the column its committed entries start at."""
        return [0, *accumulate(self.lengths)][:-1]

    def row_length(self, i: int) -> int:
        """Entries batch row i has committed and holds: its position for the next token fed."""
        return self.lengths[i] + len(self.held[i])

    @torch.inference_mode()
    def extend(self, feeds: list[Feed]) -> list[torch.Tensor]:
        """One forward of every batch row's feed (a feed may be empty), packed; each row's [m, V] logits."""
        assert len(feeds) == len(self.rows)
        blocks = [0, *accumulate(len(f.tokens) for f in feeds)]  # where each row's feed, run begin
        starts = self.starts
        total = blocks[-1]
        ids = torch.tensor([t for f in feeds for t in f.tokens], dtype=torch.long)
        positions = torch.zeros(total, dtype=torch.long)
        sees = torch.zeros(total, self.columns + total, dtype=torch.bool)
        for i, (feed, at) in enumerate(zip(feeds, blocks)):
            m = len(feed.tokens)
            start = self.row_length(i)
            if not m:
                continue
            positions[at : at + m] = start + torch.tensor(feed.depths)
            sees[at : at + m, starts[i] : starts[i] + self.lengths[i]] = True
            if self.held[i]:
                sees[at : at + m, self.held[i]] = True
            sees[at : at + m, self.columns + at : self.columns + at + m] = feed.sees
        mask = torch.zeros(sees.shape, dtype=self.model.dtype).masked_fill(~sees, self._min)[None, None]
        out = self.model(
            input_ids=ids[None].to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=positions[None].to(self.device),
            past_key_values=self.kv.cache,
            use_cache=True,
        )
        self._block = [self.columns + at for at in blocks[:-1]]
        self.columns += total
        return [out.logits[0, at : at + len(f.tokens)] for f, at in zip(feeds, blocks)]

    def hold(self, kept: list[list[int]]) -> None:
        """After a forward: the rows of its block (by their index in each feed) that each batch row goes on seeing."""
        for i, rows in enumerate(kept):
            self.held[i] += [self._block[i] + r for r in rows]

    @torch.inference_mode()
    def keep(self, kept: list[list[int]], staying: list[int] | None = None, held: list[int] | None = None) -> None:
        """After a verify forward: batch row i keeps its committed entries, the first held[i] of the columns it held
        (default: all) and the rows kept[i] of its feed in the last forward (its root and accepted path, in order);
        only the batch rows `staying` (indexes into this batch, default all) go on. The cache is packed again, the
        staying rows' entries one after another: one gather per layer."""
        staying = list(range(len(self.rows))) if staying is None else staying
        columns = []
        starts = self.starts
        for i in staying:
            mine = list(range(starts[i], starts[i] + self.lengths[i]))
            mine += self.held[i] if held is None else self.held[i][: held[i]]
            columns.append(mine + [self._block[i] + r for r in kept[i]])
        self.kv.gather(torch.tensor([c for row in columns for c in row], dtype=torch.long, device=self.device))
        self.rows = [self.rows[i] for i in staying]
        self.lengths = [len(c) for c in columns]
        self.columns = self.width
        self.held = [[] for _ in staying]
