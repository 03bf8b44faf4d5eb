"""int8 Linear layers, for a cheaper model on a CPU. The target alone decides the output, so an int8 draft changes only
how often its guesses are accepted, never what is generated; an int8 target is another model, named as such.

The recipe (chosen with scripts/quant_speed.py, figures in docs/benchmarks.md): torch's dynamic quantisation with one
weight scale per output row, on every Linear layer but the MLP's output projection (`down_proj`), which stays in
bfloat16. That layer's input carries the outlier activations that one activation scale per batch cannot hold:
quantising it too halves the model's agreement with itself.
"""

import warnings

import torch

KEEP_BF16 = ("down_proj",)  # Linear layers left in bfloat16 (by name)


class Bfloat16Linear(torch.nn.Module):
    """A Linear layer kept in bfloat16 inside a float32 (quantised) model: its input and output cast at the edges."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.linear = linear.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.to(torch.bfloat16)).to(x.dtype)


def int8_dynamic(model: torch.nn.Module, keep=KEEP_BF16, per_channel: bool = True) -> torch.nn.Module:
    """The model in float32 with int8 dynamic Linear layers, except those named in `keep` (bfloat16)."""
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

    model = model.float()
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear and name in keep:
                setattr(parent, name, Bfloat16Linear(child))
    qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
    chosen = {
        name: qconfig
        for name, m in model.named_modules()
        if type(m) is torch.nn.Linear
        and not isinstance(model.get_submodule(name.rpartition(".")[0] or ""), Bfloat16Linear)
    }
    with torch.no_grad(), warnings.catch_warnings():
        # torch marks its eager int8 API deprecated in favour of torchao, whose int8 kernels measured 9-20x slower
        # on this CPU (docs/benchmarks.md); torch is pinned, so the API is there.
        warnings.filterwarnings("ignore", message=".*(torch.ao.quantization is deprecated|quantized tensor creation).*")
        return quantize_dynamic(model, chosen, dtype=torch.qint8).eval()
