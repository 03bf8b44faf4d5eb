"""A transformers causal LM with its KV cache: extend by some tokens, read their logits, roll back to a length.

CachedLM's verbs (extend, read_prompt, truncate, extend_tree, extend_branches, keep, and the kept hidden rows) are the
one-row cache every runtime's model opens (LoadedModel.open_lm); the loop, the rule and the drafters speak only them."""

import torch

from ..errors import TreeAttentionUnsupported
from ..models.exact import whole_rows
from .kv_cache import KVCache, require_custom_mask
from .tree import TokenTree, additive_mask, branch_sees, tree_mask, tree_positions

TREE_MASK = "a tree mask"  # what a tree forward needs the attention to honour


class CachedLM:
    """Keeps `length` tokens in a DynamicCache for one sequence (batch 1).

    With keep_hidden, the hidden state of every cache entry is kept beside it (what Medusa and EAGLE read):
    `last_hidden` is the last entry's, `hidden(start, end)` a range; rollback forgets rows with their entries and
    compaction moves them with theirs. keep_hidden may name the layers to keep, as indexes into transformers'
    hidden_states (0 = embeddings, -1 = the final, normed state); several are concatenated per row.
    """

    def __init__(self, model: torch.nn.Module, keep_hidden: bool | tuple[int, ...] = False):
        self.model = model
        self.device = model.device
        self.kv = KVCache.dynamic(model)
        self.length = 0
        self.hidden_layers = (-1,) if keep_hidden is True else tuple(keep_hidden or ())
        self.keep_hidden = bool(self.hidden_layers)
        self._hidden: torch.Tensor | None = None  # [capacity, H * layers]: row i belongs to cache entry i

    @property
    def cache(self):
        """The transformers cache a forward takes as past_key_values."""
        return self.kv.cache

    @property
    def last_hidden(self) -> torch.Tensor | None:
        return None if self._hidden is None or self.length == 0 else self._hidden[self.length - 1]

    def hidden(self, start: int, end: int) -> torch.Tensor:
        """[end - start, H * layers] kept hidden rows of cache entries start..end-1."""
        assert self._hidden is not None and 0 <= start <= end <= self.length
        return self._hidden[start:end]

    def _rows_of(self, out) -> torch.Tensor | None:
        """A forward's [q, H * layers] hidden rows, the kept layers side by side (None without keep_hidden)."""
        if not self.keep_hidden:
            return None
        return torch.cat([out.hidden_states[i][0] for i in self.hidden_layers], dim=-1)

    def _remember(self, rows: torch.Tensor | None, start: int) -> None:
        """Keep a forward's hidden rows (nothing without keep_hidden); row 0 belongs to cache entry `start`."""
        if rows is None:
            return
        end = start + len(rows)
        if self._hidden is None or end > len(self._hidden):  # grow by doubling: amortised O(1) per token
            grown = rows.new_empty(max(end, 64, 0 if self._hidden is None else 2 * len(self._hidden)), rows.shape[-1])
            if self._hidden is not None:
                grown[: len(self._hidden)] = self._hidden
            self._hidden = grown
        self._hidden[start:end] = rows

    @torch.inference_mode()
    def extend(self, ids: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """Append [n] token ids at positions length..length+n-1; return their [n, V] logits ([1, V] if last_only)."""
        n = ids.shape[-1]
        positions = torch.arange(self.length, self.length + n, device=self.device).unsqueeze(0)
        mask = torch.ones(1, self.length + n, dtype=torch.long, device=self.device)
        out = self.model(
            input_ids=ids.view(1, n).to(self.device),
            attention_mask=mask,
            position_ids=positions,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1 if last_only else 0,  # 0 keeps all
            output_hidden_states=self.keep_hidden,
        )
        self._remember(self._rows_of(out), self.length)
        self.length += n
        return out.logits[0]

    def read_prompt(self, prompt: list[int]) -> None:
        """The prompt into the cache but its last token, which the first step feeds (the root): one ordinary forward,
        exact mode or not (models/exact.py, whole_rows)."""
        if len(prompt) > 1:
            with whole_rows():
                self.extend(torch.tensor(prompt[:-1]), last_only=True)

    def truncate(self, length: int) -> None:
        """Forget every cached token from `length` on (rollback after a rejection)."""
        assert 0 <= length <= self.length
        if length < self.length:
            self._drop_tail(length)
            self.length = length

    def _drop_tail(self, length: int) -> None:
        """Free the cache entries from `length` on (self.length still counts them)."""
        self.kv.crop(length)

    @torch.inference_mode()
    def extend_tree(self, root: int, tree: TokenTree) -> torch.Tensor:
        """Append the root token and every tree node in one forward; return [1 + n, V] logits (row 0 = root).
        Each node sees the cache, the root and its own ancestors, at position length + depth. A chain is an
        ordinary causal forward (no custom mask, so any attention kernel takes it)."""
        if tree.is_chain:
            return self.extend(torch.tensor([root, *tree.tokens]))
        require_custom_mask(self.model, TreeAttentionUnsupported, TREE_MASK)  # flash kernels would ignore the tree
        mask = tree_mask(tree, self.length, self.model.dtype, self.device)
        try:
            out = self.model(
                input_ids=torch.tensor([[root, *tree.tokens]], device=self.device),
                attention_mask=mask,
                position_ids=tree_positions(tree, self.length, self.device),
                past_key_values=self.cache,
                use_cache=True,
                output_hidden_states=self.keep_hidden,
            )
        except Exception as exc:  # a model that refuses a custom 4D mask must not give silently wrong logits
            raise TreeAttentionUnsupported(
                f"{type(self.model).__name__} does not accept a custom 4D attention mask ({exc}); "
                "use a single-candidate drafter with this model"
            ) from exc
        self._remember(self._rows_of(out), self.length)
        self.length += 1 + len(tree.tokens)
        return out.logits[0]

    @torch.inference_mode()
    def extend_branches(
        self, ids: list[int], positions: list[int], shared: int, ancestors: list[list[int]]
    ) -> torch.Tensor:
        """Append n rows in one forward (a drafter growing its own tree); return their [n, V] logits. Row i holds
        ids[i] at positions[i] and sees cache entries [0, shared), the entries listed in ancestors[i] and itself."""
        n = len(ids)
        sees = branch_sees(shared, self.length, ancestors)
        logits, hidden = self._masked_forward(
            torch.tensor([ids], device=self.device), torch.tensor([positions], device=self.device), sees
        )
        self._remember(hidden, self.length)
        self.length += n
        return logits

    def _masked_forward(self, ids: torch.Tensor, positions: torch.Tensor, sees: torch.Tensor):
        """One forward of [1, q] ids whose row i may look at the cache entries and new rows where sees[i] holds."""
        require_custom_mask(self.model, TreeAttentionUnsupported, TREE_MASK)
        out = self.model(
            input_ids=ids,
            attention_mask=additive_mask(sees, self.model.dtype, self.device),
            position_ids=positions,
            past_key_values=self.cache,
            use_cache=True,
            output_hidden_states=self.keep_hidden,
        )
        return out.logits[0], self._rows_of(out)

    @torch.inference_mode()
    def keep(self, committed: int, nodes: list[int]) -> None:
        """After a verify forward: keep the `committed` entries (the root included) and the accepted tree `nodes`
        (ascending; node i is entry committed + i), drop the rest (tree compaction). Only the kept nodes move, in
        place, to committed, committed + 1, ...; then the tail is cropped (no cache copy)."""
        if nodes == list(range(len(nodes))):  # a chain's accepted prefix: plain rollback
            return self.truncate(committed + len(nodes))
        n = len(nodes)
        source = committed + torch.tensor(nodes, dtype=torch.long, device=self.device)
        self.kv.compact(committed, source)
        if self._hidden is not None:
            self._hidden[committed : committed + n] = self._hidden.index_select(0, source)
        self._drop_tail(committed + n)
        self.length = committed + n
