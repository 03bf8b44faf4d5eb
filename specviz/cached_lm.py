"""A causal LM with its KV cache: extend by some tokens, read their logits, roll back to a length."""

import torch
from transformers import DynamicCache


class CachedLM:
    """Keeps `length` tokens in a DynamicCache for one sequence (batch 1)."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.device = model.device
        self.cache = DynamicCache(config=model.config)
        self.length = 0

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
        )
        self.length += n
        return out.logits[0]

    def truncate(self, length: int) -> None:
        """Forget every cached token from `length` on (rollback after a rejection)."""
        assert 0 <= length <= self.length
        if length < self.length:
            # transformers 5.x: crop(-k) removes the last k tokens (older versions took the new length).
            self.cache.crop(length - self.length)
            self.length = length
