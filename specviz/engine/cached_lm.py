"""A causal LM with its KV cache: extend by some tokens, read their logits, roll back to a length."""

import torch
from transformers import DynamicCache

from ..errors import TreeAttentionUnsupported
from .tree import TokenTree, tree_mask, tree_positions


def attention_of(model: torch.nn.Module) -> str:
    return getattr(model.config, "_attn_implementation", None) or ""


def takes_custom_mask(model: torch.nn.Module) -> bool:
    """Whether the model's attention honours a 4D float mask (sdpa, eager); flash kernels ignore one."""
    return not attention_of(model).startswith("flash")


class CachedLM:
    """Keeps `length` tokens in a DynamicCache for one sequence (batch 1).

    With keep_hidden, `last_hidden` is the final hidden state at the last cached position (what Medusa heads
    read): each forward's hidden rows are kept until the next one, and rollback picks the right row.
    """

    def __init__(self, model: torch.nn.Module, keep_hidden: bool = False):
        self.model = model
        self.device = model.device
        self.cache = DynamicCache(config=model.config)
        self.length = 0
        self.keep_hidden = keep_hidden
        self.last_hidden: torch.Tensor | None = None
        self._rows: torch.Tensor | None = None  # hidden states of the last forward, one row per cache entry it added
        self._rows_start = 0

    def _remember(self, hidden: torch.Tensor | None, start: int) -> None:
        """Keep a forward's [q, H] final hidden rows (None without keep_hidden); row 0 is cache entry `start`."""
        if self.keep_hidden:
            self._rows, self._rows_start = hidden, start
            self.last_hidden = hidden[-1]

    def _last_entry_is(self, entry: int) -> None:
        if self._rows is not None:
            row = entry - self._rows_start
            self.last_hidden = self._rows[row] if 0 <= row < len(self._rows) else None

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
        self._remember(out.hidden_states[-1][0] if self.keep_hidden else None, self.length)
        self.length += n
        return out.logits[0]

    def truncate(self, length: int) -> None:
        """Forget every cached token from `length` on (rollback after a rejection)."""
        assert 0 <= length <= self.length
        if length < self.length:
            self._drop_tail(length)
            self.length = length
            self._last_entry_is(length - 1)

    def _drop_tail(self, length: int) -> None:
        """Free the cache entries from `length` on (self.length still counts them)."""
        # transformers 5.x: crop(-k) removes the last k tokens (older versions took the new length).
        self.cache.crop(length - self.length)

    @torch.inference_mode()
    def extend_tree(self, root: int, tree: TokenTree) -> torch.Tensor:
        """Append the root token and every tree node in one forward; return [1 + n, V] logits (row 0 = root).
        Each node sees the cache, the root and its own ancestors, at position length + depth. A chain is an
        ordinary causal forward (no custom mask, so any attention kernel takes it)."""
        if tree.is_chain:
            return self.extend(torch.tensor([root, *tree.tokens]))
        if not takes_custom_mask(self.model):  # flash kernels take no arbitrary mask and would ignore the tree
            raise TreeAttentionUnsupported(f"attention implementation {attention_of(self.model)!r} cannot take a "
                                           "tree mask; load the model with sdpa or eager attention")
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
                "use a single-candidate drafter with this model") from exc
        self._remember(out.hidden_states[-1][0] if self.keep_hidden else None, self.length)
        self.length += 1 + len(tree.tokens)
        return out.logits[0]

    @torch.inference_mode()
    def keep(self, start: int, offsets: list[int]) -> None:
        """Keep cache entries [0, start) and start + each offset (ascending); drop the rest (tree compaction).
        Only the kept entries move, in place, to start, start + 1, ...; then the tail is cropped (no cache copy)."""
        if offsets == list(range(len(offsets))):  # a contiguous run: plain rollback
            return self.truncate(start + len(offsets))
        self._last_entry_is(start + offsets[-1])
        n, source = len(offsets), start + torch.tensor(offsets, dtype=torch.long, device=self.device)
        for layer in self.cache.layers:
            layer.keys[..., start : start + n, :] = layer.keys.index_select(-2, source)
            layer.values[..., start : start + n, :] = layer.values.index_select(-2, source)
        self._drop_tail(start + n)
        self.length = start + n
