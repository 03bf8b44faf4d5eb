"""The DFlash draft model: a few decoder layers that fill a whole block of tokens in one non-causal pass.

The block is the last committed token followed by mask tokens, at the positions the next tokens will take. Every
draft layer's attention reads two kinds of keys and values: the block's own rows, and the context, which is the
target's hidden states at a few of its layers (concatenated, mapped to one width by `fc`, normed by `hidden_norm`)
for every committed token. The same projected context enters every layer; only the layer's own k/v projections
differ. The context's keys and values are kept between steps (a token's features never change once committed), the
block's are thrown away after each pass. The block's outputs go through `norm` and the target's own LM head.

Built from transformers' Qwen3 pieces (RMSNorm, MLP, rotary embedding) in the published checkpoint's names
(`layers.N.self_attn.{q,k,v,o}_proj`, `q_norm`, `k_norm`, `layers.N.mlp.*`, `fc`, `hidden_norm`, `norm`); the
attention that reads the context is written here.
"""

import torch
from torch import nn
from torch.nn import functional as F
from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP, Qwen3RMSNorm, Qwen3RotaryEmbedding


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding: each half-pair of channels turned by its position's angle."""
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin


class ContextCache:
    """Each draft layer's keys and values of the committed context: [kv heads, n, head dim], grown by doubling."""

    def __init__(self, layers: int):
        self.keys: list[torch.Tensor | None] = [None] * layers
        self.values: list[torch.Tensor | None] = [None] * layers
        self.length = 0

    def with_new(self, layer: int, k: torch.Tensor, v: torch.Tensor, n: int):
        """Store the first n rows of k, v after the kept ones; return every kept row followed by all of k, v."""
        end = self.length + n
        if self.keys[layer] is None or end > self.keys[layer].shape[1]:
            size = max(end, 64, 0 if self.keys[layer] is None else 2 * self.keys[layer].shape[1])
            for store in (self.keys, self.values):
                grown = k.new_empty(k.shape[0], size, k.shape[2])
                if store[layer] is not None:
                    grown[:, : self.length] = store[layer][:, : self.length]
                store[layer] = grown
        self.keys[layer][:, self.length : end] = k[:, :n]
        self.values[layer][:, self.length : end] = v[:, :n]
        kept_k = self.keys[layer][:, : self.length]
        kept_v = self.values[layer][:, : self.length]
        return torch.cat((kept_k, k), dim=1), torch.cat((kept_v, v), dim=1)

    def crop(self, length: int) -> None:
        self.length = min(self.length, length)


class ContextAttention(nn.Module):
    """Queries from the block; keys and values from the context (kept and new) and the block; no mask."""

    def __init__(self, config):
        super().__init__()
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        bias = bool(getattr(config, "attention_bias", False))
        width = config.hidden_size
        q_width = self.heads * self.head_dim
        kv_width = self.kv_heads * self.head_dim
        self.q_proj = nn.Linear(width, q_width, bias=bias)
        self.k_proj = nn.Linear(width, kv_width, bias=bias)
        self.v_proj = nn.Linear(width, kv_width, bias=bias)
        self.o_proj = nn.Linear(q_width, width, bias=bias)
        self.q_norm = Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def forward(self, x, context, cos, sin, cache: ContextCache | None, layer: int, sees: torch.Tensor | None = None):
        """x [b, H] block rows, context [c, H] new context rows; cos/sin [c + b, head dim] for context then block.
        Training passes no cache and `sees` [b, c + b] (True where a block row may read a key) instead: several
        blocks at once, each reading its own context and itself."""
        b = len(x)
        c = len(context)
        both = torch.cat((context, x), dim=0)
        q = self.q_norm(self.q_proj(x).view(b, self.heads, self.head_dim)).transpose(0, 1)
        k = self.k_norm(self.k_proj(both).view(c + b, self.kv_heads, self.head_dim)).transpose(0, 1)
        v = self.v_proj(both).view(c + b, self.kv_heads, self.head_dim).transpose(0, 1)
        q = _rotate(q, cos[c:], sin[c:])
        k = _rotate(k, cos, sin)
        if cache is not None:
            k, v = cache.with_new(layer, k, v, c)
        groups = self.heads // self.kv_heads  # each key/value head serves a group of query heads
        q = q.reshape(self.kv_heads, groups * b, self.head_dim)
        mask = None if sees is None else sees.repeat(groups, 1)  # rows in q's order: group, then block row
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.head_dim**-0.5)
        return self.o_proj(out.reshape(self.heads, b, self.head_dim).transpose(0, 1).reshape(b, -1))


class DraftLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.input_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.self_attn = ContextAttention(config)
        self.post_attention_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = Qwen3MLP(config)

    def forward(self, x, context, cos, sin, cache, layer, sees=None):
        x = x + self.self_attn(self.input_layernorm(x), context, cos, sin, cache, layer, sees)
        return x + self.mlp(self.post_attention_layernorm(x))


class DFlashDraft(nn.Module):
    def __init__(self, config, target: nn.Module, *, block_size: int, mask_id: int, target_layers, scales=None):
        """`config`: the draft layers' Qwen3 config; `target`: the target model, whose embedding and LM head are
        shared, not copied; `target_layers`: the target layers whose outputs form the context (0 = the first layer);
        `scales`: (input embedding scale, output multiplier, final logit softcap or 0)."""
        super().__init__()
        self.config = config
        self.block_size = block_size
        self.mask_id = mask_id
        self.target_layers = tuple(target_layers)
        self.embedding_scale, self.output_multiplier, self.softcap = scales or (1.0, 1.0, 0.0)
        hidden = config.hidden_size
        self.layers = nn.ModuleList(DraftLayer(config) for _ in range(config.num_hidden_layers))
        self.fc = nn.Linear(len(self.target_layers) * hidden, hidden, bias=False)
        self.hidden_norm = Qwen3RMSNorm(hidden, eps=config.rms_norm_eps)
        self.norm = Qwen3RMSNorm(hidden, eps=config.rms_norm_eps)
        self.rotary = Qwen3RotaryEmbedding(config)
        self._shared = [target.get_input_embeddings(), target.get_output_embeddings()]  # kept out of state_dict

    def new_cache(self) -> ContextCache:
        return ContextCache(len(self.layers))

    def fill(self, features: torch.Tensor, root: int, cache: ContextCache) -> torch.Tensor:
        """One pass. `features` [c, F]: the target's context rows of the tokens committed since the last pass, whose
        positions follow the cache's; `root`: the last committed token, at the position after them. Returns the
        [block size - 1, V] scores of the tokens after the root, the mask rows' outputs through the LM head."""
        weight = self.fc.weight
        c = len(features)
        start = cache.length + len(features)
        ids = torch.full((self.block_size,), self.mask_id, dtype=torch.long, device=weight.device)
        ids[0] = root
        x = self._shared[0](ids).to(weight.dtype) * self.embedding_scale
        context = self.hidden_norm(self.fc(features.to(weight.dtype)))
        cos, sin = self.rotary(x, self.positions(cache.length, c)[None])
        cos = cos[0]
        sin = sin[0]
        for i, layer in enumerate(self.layers):
            x = layer(x, context, cos, sin, cache, i)
        cache.length = start
        return self.logits(self.norm(x[1:]))

    def fill_blocks(
        self, features: torch.Tensor, tokens: torch.Tensor, anchors: list[int], rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Training: the blocks anchored at each of `anchors` of one text, in one pass, each as `fill` would score it
        with the features of the tokens before its anchor as its context (a block-sparse mask: a block's rows read
        the context rows before their anchor and their own block, nothing of the other blocks). `features` [T, F]
        and `tokens` [T] cover the text; `rows`: score only these rows of the LM head (a training shortlist). Returns
        [len(anchors), block size − 1, V or len(rows)]."""
        weight = self.fc.weight
        n = max(anchors)
        size = self.block_size
        ids = torch.full((len(anchors), size), self.mask_id, dtype=torch.long, device=weight.device)
        ids[:, 0] = tokens[anchors]
        x = self._shared[0](ids.flatten()).to(weight.dtype) * self.embedding_scale
        context = self.hidden_norm(self.fc(features[:n].to(weight.dtype)))
        starts = torch.tensor(anchors, device=weight.device)
        block_positions = (starts[:, None] + torch.arange(size, device=weight.device)).flatten()
        positions = torch.cat((torch.arange(n, device=weight.device), block_positions))
        cos, sin = self.rotary(x, positions[None])
        of_block = torch.arange(len(anchors), device=weight.device).repeat_interleave(size)
        sees = torch.cat(
            (
                torch.arange(n, device=weight.device)[None] < starts[of_block][:, None],  # the context before it
                of_block[:, None] == of_block[None],  # its own block, every row of it
            ),
            dim=1,
        )
        for i, layer in enumerate(self.layers):
            x = layer(x, context, cos[0], sin[0], None, i, sees)
        return self.logits(self.norm(x.view(len(anchors), size, -1)[:, 1:]), rows)

    def positions(self, kept: int, new: int) -> torch.Tensor:
        """The positions of `new` context rows after `kept` ones, then of the block: one run, kept .. kept + new +
        block − 1 (the root sits right after the last committed context row)."""
        return torch.arange(kept, kept + new + self.block_size, device=self.fc.weight.device)

    def logits(self, hidden: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The target's LM head over `hidden` (or only its `rows`), with the target's output scale and softcap."""
        lm_head = self._shared[1]
        weight = getattr(lm_head, "weight", None)  # an int8 head has none to match
        if rows is not None:
            scores = hidden.to(rows.dtype) @ rows.T
        else:
            scores = lm_head(hidden.to(weight.dtype) if isinstance(weight, torch.Tensor) else hidden.float())
        scores = scores.float() * self.output_multiplier
        return torch.tanh(scores / self.softcap) * self.softcap if self.softcap > 0 else scores
