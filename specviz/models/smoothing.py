"""Smoothing (SmoothQuant, Xiao et al. 2023) before an int8 model is made: a few input channels of a Linear layer can
be far larger than the rest (the MLP's down projection sees them most), and with one scale per input row they would
take most of the row's 7 bits. Each input channel j is divided by s_j = sqrt(max|x_j| / max|W_j|) and the weight's
column j multiplied by it, and the division is folded into what made the input: an RMSNorm's weight (queries, keys
and values; gate and up) or up_proj's rows (down_proj). So the float model computes the same function, and nothing
extra runs. The maxima come from one forward over a short built-in text (`CALIBRATION`).
"""

import torch

# What the maxima of each input channel are measured on: a little code and a little prose, as the races decode.
CALIBRATION = (
    "def merge_intervals(intervals):\n    intervals.sort(key=lambda pair: pair[0])\n    merged = []\n"
    "    for start, end in intervals:\n        if merged and start <= merged[-1][1]:\n"
    "            merged[-1][1] = max(merged[-1][1], end)\n        else:\n            merged.append([start, end])\n"
    "    return merged\n\nSELECT c.name, SUM(o.total) AS spent FROM customers c JOIN orders o ON o.customer_id = c.id "
    "GROUP BY c.name ORDER BY spent DESC LIMIT 10;\n\nThank you for writing to us. We are sorry that your March "
    "invoice was charged twice: the second payment will be refunded within five business days, and you will get an "
    "email when it is done. An API rate limit caps how many requests a client may send in a minute."
)
STRENGTH = 0.5  # how much of an outlier moves into the weights: s_j = max|x_j|^0.5 / max|W_j|^0.5


@torch.inference_mode()
def input_maxima(model: torch.nn.Module, ids: list[int]) -> dict[str, torch.Tensor]:
    """The largest magnitude each input channel of each Linear layer takes over one forward of `ids`."""
    maxima = {}
    hooks = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):

            def keep(_, args, name=name):
                seen = args[0].detach().float().abs().reshape(-1, args[0].shape[-1]).amax(dim=0)
                maxima[name] = torch.maximum(maxima[name], seen) if name in maxima else seen

            hooks.append(module.register_forward_pre_hook(keep))
    try:
        model(input_ids=torch.tensor([ids], device=model.device))
    finally:
        for hook in hooks:
            hook.remove()
    return maxima


def _fold(maxima: torch.Tensor, consumers: list[torch.nn.Linear], before: torch.Tensor) -> None:
    """Divide input channel j by s_j in `before` (what makes the input: a norm's weight, or the rows of the layer
    that writes it) and multiply column j of every consumer's weight by it: the product is unchanged."""
    weights = torch.stack([c.weight.detach().float().abs().amax(dim=0) for c in consumers]).amax(dim=0)
    scale = (maxima.clamp_min(1e-5) ** STRENGTH / weights.clamp_min(1e-5) ** (1 - STRENGTH)).clamp(1e-2, 1e2)
    with torch.no_grad():
        before.div_(scale.to(before.dtype).view(-1, *([1] * (before.dim() - 1))))  # a norm's entry j, or row j
        for consumer in consumers:
            consumer.weight.mul_(scale.to(consumer.weight.dtype))


def smooth(model: torch.nn.Module, maxima: dict[str, torch.Tensor]) -> bool:
    """Move the input outliers of every decoder layer's Linear layers into their weights, folding the division into
    the norm before (queries, keys, values; gate and up) or into up_proj's rows (down_proj). Only for the layouts
    whose norm multiplies by its weight and whose MLP multiplies gate by up (Llama, Qwen, Mistral); False where the
    model is laid out otherwise (left as it is)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if model.config.model_type not in ("llama", "qwen2", "qwen3", "mistral") or layers is None:
        return False
    for i, layer in enumerate(layers):
        attn = layer.self_attn
        mlp = layer.mlp
        prefix = f"model.layers.{i}"
        _fold(
            maxima[f"{prefix}.self_attn.q_proj"],
            [attn.q_proj, attn.k_proj, attn.v_proj],
            layer.input_layernorm.weight,
        )
        _fold(maxima[f"{prefix}.mlp.gate_proj"], [mlp.gate_proj, mlp.up_proj], layer.post_attention_layernorm.weight)
        _fold(maxima[f"{prefix}.mlp.down_proj"], [mlp.down_proj], mlp.up_proj.weight)
    return True
