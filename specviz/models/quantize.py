"""int8 Linear layers for a CPU, row-exact: every weight row (output channel) is int8 with its own scale, every input
row is quantised on the fly with its own scale, and the product is taken in integers by fbgemm.

Two things follow, and they are why a verify forward costs little more than a one-token forward here:
- Speed. fbgemm's integer product streams a quarter of float32's bytes and costs nearly the same for 1 to 9 rows on
  an AVX2 CPU, where a bfloat16 or float32 product of 5 rows costs 3-7 single rows (docs/benchmarks.md).
- Row-exactness. Integer sums do not depend on their order, and each row has its own scale, so a row's output is
  the same bits whichever rows share its product: exact mode holds for an int8 target with no pairing.

Inputs are held to 7 bits (-63..63, stored with zero point 64 as 1..127): fbgemm's AVX2 kernel adds products in pairs
in 16 bits, and 127 × 127 × 2 is the most that fits; a full 8-bit input could saturate there.

Outlier channels (a few input channels far larger than the rest, as the MLP's down projection sees) would take most
of a row's 7 bits. Smoothing (SmoothQuant, Xiao et al. 2023) moves them into the weights: each input channel j is
divided by s_j = sqrt(max|x_j| / max|W_j|) and the weight's column j multiplied by it, and the division is folded
into what made the input (an RMSNorm's weight, or `up_proj`'s rows for `down_proj`), so nothing extra runs. The
maxima come from one forward of the model over a short built-in text (`calibrate`).
"""

import warnings

import torch

INPUT_LEVELS = 63  # an input row's largest magnitude maps to ±63 (7 bits)
ZERO_POINT = 64
_INT8_PRODUCT = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32


def _int8_rows(weight: torch.Tensor) -> torch.Tensor:
    """[out, in] float → per-output-channel symmetric int8 (a quantised tensor, scale per row, zero point 0)."""
    weight = weight.detach().float()
    scale = (weight.abs().amax(dim=1) / 127).clamp_min(1e-12)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*quantized tensor creation.*")
        zero = torch.zeros_like(scale, dtype=torch.long)
        return torch.quantize_per_channel(weight, scale.double(), zero, 0, torch.qint8)


class RowInt8Linear(torch.nn.Module):
    """y = x Wᵀ + b with W int8 per output row and each row of x int8 with its own scale; float32 in and out."""

    def __init__(self, linear: torch.nn.Module):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self._packed = torch.ops.quantized.linear_prepack(_int8_rows(linear.weight), None)
        bias = getattr(linear, "bias", None)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach().float(), requires_grad=False)

    def weight(self) -> torch.Tensor:
        """The [out, in] int8 weight (a quantised tensor; `.dequantize()` gives floats)."""
        return torch.ops.quantized.linear_unpack(self._packed)[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float()
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_min(1e-30) / INPUT_LEVELS
        # fbgemm rounds rows / scale to integers (+ the zero point), multiplies in integers, and scales by the weight's
        # row scales; each row's own scale then gives it back its size
        out = _INT8_PRODUCT(rows / scale, 1.0, ZERO_POINT, self._packed) * scale
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"

    def __getstate__(self):  # the packed weight is a C++ object: pickle it as the int8 tensor it holds
        state = self.__dict__.copy()
        state["_packed"] = self.weight()
        return state

    def __setstate__(self, state):
        state["_packed"] = torch.ops.quantized.linear_prepack(state["_packed"], None)
        self.__dict__.update(state)


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
    maxima, hooks = {}, []
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
        attn, mlp, prefix = layer.self_attn, layer.mlp, f"model.layers.{i}"
        _fold(
            maxima[f"{prefix}.self_attn.q_proj"],
            [attn.q_proj, attn.k_proj, attn.v_proj],
            layer.input_layernorm.weight,
        )
        _fold(maxima[f"{prefix}.mlp.gate_proj"], [mlp.gate_proj, mlp.up_proj], layer.post_attention_layernorm.weight)
        _fold(maxima[f"{prefix}.mlp.down_proj"], [mlp.down_proj], mlp.up_proj.weight)
    return True


def int8_rows(model: torch.nn.Module, calibration_ids: list[int] | None = None) -> torch.nn.Module:
    """The model in float32 with every Linear layer a RowInt8Linear (in place); with `calibration_ids` (the
    tokenizer's ids of CALIBRATION), smoothed first."""
    model = model.float()
    if calibration_ids:
        smooth(model, input_maxima(model, calibration_ids))
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear:
                setattr(parent, name, RowInt8Linear(child))
    return model.eval()
