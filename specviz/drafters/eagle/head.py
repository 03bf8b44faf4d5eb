"""The EAGLE head: one decoder layer of the target's own architecture that predicts the target's next feature.

A feature is a hidden state of the target. The head reads pairs (feature f_i, token x_{i+1}) at position i and
writes f̂_{i+1}, its guess of the target's feature one place on; the target's own LM head (or the head's, in
EAGLE-3) turns that into a distribution over x_{i+2}. Feeding the guess back as the next pair's feature drafts
further, autoregressively, at the feature level.

Two published layouts are built here from transformers' own classes (the target's decoder layer, rotary
embedding and RMSNorm, composed; no modeling file is copied):

- EAGLE-1/2 ("eagle1"): x = fc([embed(x_{i+1}), f_i]) with a bias, then the layer without its input norm;
  the output is a final (normed) feature, read by the target's LM head. specviz's own heads use this layout,
  optionally scoring only a vocabulary shortlist.
- EAGLE-3 ("eagle3"): the feature is three of the target's hidden states side by side, fc maps them to one;
  the layer's attention reads [norm(embed), norm(feature)] (2H wide); a final norm and the head's own LM head
  over a draft vocabulary, whose index i means target id i + d2t[i]. Published EAGLE-3 heads are often Llama
  layers whatever the target (`family="llama"`: transformers' Llama layer, norm and rotary classes instead).
"""

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama import modeling_llama as llama

from ..heads_common import register_shortlist

LAYOUTS = ("eagle1", "eagle3")


def llama_config(config):
    """A Llama config of the same sizes and rotary settings as `config` (another family's)."""

    kept = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim")
    kept += ("rms_norm_eps", "max_position_embeddings", "vocab_size", "hidden_act", "rope_parameters")
    made = LlamaConfig(**{k: getattr(config, k) for k in kept if getattr(config, k, None) is not None})
    made.layer_types = ["full_attention"]
    made._attn_implementation = config._attn_implementation
    return made


class EagleHead(nn.Module):
    def __init__(
        self,
        config,
        layout: str,
        target: nn.Module,
        fc_bias: bool = True,
        draft_vocab: int = 0,
        shortlist: torch.Tensor | None = None,
        family: str = "",
    ):
        """`config`: the target-architecture config of the layer (hidden size, heads, ...); `target`: the target
        model, whose decoder layer, rotary and norm classes are used and whose embedding (and, for eagle1, LM head)
        are shared, not copied."""
        super().__init__()
        assert layout in LAYOUTS
        self.layout = layout
        self.config = config
        hidden = config.hidden_size
        backbone = target.get_decoder() if hasattr(target, "get_decoder") else target.model
        layer_class = type(backbone.layers[0])
        norm_class = type(backbone.norm)
        rotary_class = type(backbone.rotary_emb)
        if family == "llama" and config.model_type != "llama":
            layer_class, norm_class, rotary_class = (
                llama.LlamaDecoderLayer,
                llama.LlamaRMSNorm,
                llama.LlamaRotaryEmbedding,
            )
            config = llama_config(config)
        self.config = config
        layer = layer_class(config, layer_idx=0)
        self._shared = [target.get_input_embeddings(), target.get_output_embeddings()]  # kept out of state_dict
        self.rotary = rotary_class(config=config)
        if layout == "eagle1":
            self.fc = nn.Linear(2 * hidden, hidden, bias=fc_bias)
            del layer.input_layernorm  # EAGLE-1's layer reads fc's output as it is
            self.layers = nn.ModuleList([layer])
        else:
            self.fc = nn.Linear(3 * hidden, hidden, bias=False)
            attention = layer.self_attn
            for name in ("q_proj", "k_proj", "v_proj"):  # attention reads [embedding, feature]: twice as wide
                old = getattr(attention, name)
                setattr(attention, name, nn.Linear(2 * hidden, old.out_features, bias=old.bias is not None))
            layer.hidden_norm = norm_class(hidden, eps=config.rms_norm_eps)
            self.midlayer = layer
            self.norm = norm_class(hidden, eps=config.rms_norm_eps)
            self.lm_head = nn.Linear(hidden, draft_vocab, bias=False)
            self.register_buffer("d2t", torch.zeros(draft_vocab, dtype=torch.long))
            self.register_buffer("t2d", torch.zeros(config.vocab_size, dtype=torch.bool))
        register_shortlist(self, self._shared[1], shortlist)

    @property
    def layer(self) -> nn.Module:
        return self.layers[0] if self.layout == "eagle1" else self.midlayer

    def forward(
        self, features: torch.Tensor, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache=None
    ) -> torch.Tensor:
        """features [B, n, F] (the target's, or the head's own earlier outputs [B, n, H]), ids [B, n] (x_{i+1}),
        positions [B, n], mask [B, 1, n, past + n] additive -> [B, n, H] the head's features f̂_{i+1}."""
        embed = self._shared[0](ids).to(self.fc.weight.dtype)
        features = features.to(self.fc.weight.dtype)
        layer = self.layer
        if self.layout == "eagle1":
            x = self.fc(torch.cat([embed, features], dim=-1))
            attention_input = x
        else:
            x = self.fc(features) if features.shape[-1] != self.config.hidden_size else features
            attention_input = torch.cat([layer.input_layernorm(embed), layer.hidden_norm(x)], dim=-1)
        attended, _ = layer.self_attn(
            hidden_states=attention_input,
            attention_mask=mask,
            past_key_values=cache,
            position_embeddings=self.rotary(x, positions),
        )
        x = x + attended
        return x + layer.mlp(layer.post_attention_layernorm(x))

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] head features -> [..., V'] scores; column j means target id `token_ids(j)`."""
        if self.layout == "eagle3":
            return self.lm_head(self.norm(hidden.to(self.lm_head.weight.dtype)))
        if self.shortlist is not None:
            return hidden.to(self.rows.dtype) @ self.rows.T
        lm_head = self._shared[1]
        weight = getattr(lm_head, "weight", None)
        return lm_head(hidden.to(weight.dtype) if isinstance(weight, torch.Tensor) else hidden)

    def token_ids(self, columns: torch.Tensor) -> torch.Tensor:
        """Target token ids of logits columns."""
        if self.layout == "eagle3":
            return columns + self.d2t[columns]
        return columns if self.shortlist is None else self.shortlist[columns]
