"""int8 Linear layers for a CPU, row-exact: every weight row (output channel) is int8 with its own scale, every input
row is quantised on the fly with its own scale, and the product is taken in integers by fbgemm.

Two things follow, and they are why a verify forward costs little more than a one-token forward here:
- Speed. fbgemm's integer product streams a quarter of float32's bytes and costs nearly the same for 1 to 9 rows on
  an AVX2 CPU, where a bfloat16 or float32 product of 5 rows costs 3-7 single rows (docs/benchmark-log.md).
- Row-exactness. Integer sums do not depend on their order, and each row has its own scale, so a row's output is
  the same bits whichever rows share its product: exact mode holds for an int8 target with no pairing.

Inputs are held to 7 bits (-63..63, stored with zero point 64 as 1..127): fbgemm's AVX2 kernel adds products in pairs
in 16 bits, and 127 × 127 × 2 is the most that fits; a full 8-bit input could saturate there.

Outlier input channels are moved into the weights first (smoothing.py), and sibling layers that read the same input
(queries, keys and values; gate and up) share one product (`SharedProduct`): one input quantisation and one call
instead of three or two, which is most of a small draft model's time outside the products.
"""

import warnings

import torch

from .smoothing import input_maxima, smooth

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
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self._packed = torch.ops.quantized.linear_prepack(_int8_rows(linear.weight), None)
        bias = getattr(linear, "bias", None)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach().float(), requires_grad=False)

    def weight(self) -> torch.Tensor:
        """The [out, in] int8 weight (a quantised tensor; `.dequantize()` gives floats)."""
        return torch.ops.quantized.linear_unpack(self._packed)[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float()
        scale = torch.linalg.vector_norm(rows, float("inf"), dim=1, keepdim=True).clamp_min_(1e-30).div_(INPUT_LEVELS)
        # fbgemm rounds rows / scale to integers (+ the zero point), multiplies in integers, and scales by the weight's
        # row scales; each row's own scale then gives it back its size
        out = _INT8_PRODUCT(rows / scale, 1.0, ZERO_POINT, self._packed)
        out = out.mul_(scale) if self.bias is None else torch.addcmul(self.bias, out, scale)
        return out.view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"

    def __getstate__(self):  # the packed weight is a C++ object: pickle it as the int8 tensor it holds
        state = self.__dict__.copy()
        state["_packed"] = self.weight()
        return state

    def __setstate__(self, state):
        state["_packed"] = torch.ops.quantized.linear_prepack(state["_packed"], None)
        self.__dict__.update(state)


class SharedProduct:
    """Sibling Linear layers that read the same input, multiplied as one: the first sibling called with an input
    multiplies it by all their weights at once, and each sibling returns its columns of that product, as long as it
    is called with that same tensor (any other input is multiplied anew)."""

    def __init__(self, linears: list[torch.nn.Linear]):
        whole = torch.nn.Linear(linears[0].in_features, sum(m.out_features for m in linears), bias=False)
        whole.weight = torch.nn.Parameter(torch.cat([m.weight.detach().float() for m in linears]), False)
        if any(m.bias is not None for m in linears):
            biases = [m.bias if m.bias is not None else torch.zeros(m.out_features) for m in linears]
            whole.bias = torch.nn.Parameter(torch.cat([b.detach().float() for b in biases]), False)
        self.product = RowInt8Linear(whole)
        self._input = self._output = None

    def __call__(self, x: torch.Tensor, columns: slice) -> torch.Tensor:
        if x is not self._input:
            self._input, self._output = x, self.product(x)  # the input and its product, cached together
        return self._output[..., columns]

    def __getstate__(self):  # what the last input gave is not worth keeping
        return {"product": self.product, "_input": None, "_output": None}


class SharedColumns(torch.nn.Module):
    """One sibling of a SharedProduct: its columns of the product."""

    def __init__(self, shared: SharedProduct, start: int, linear: torch.nn.Linear):
        super().__init__()
        self.shared = shared
        self.columns = slice(start, start + linear.out_features)
        self.in_features = linear.in_features
        self.out_features = linear.out_features

    def weight(self) -> torch.Tensor:
        return self.shared.product.weight().dequantize()[self.columns]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared(x, self.columns)


SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))  # read the same input in Llama-like layers


def int8_rows(model: torch.nn.Module, calibration_ids: list[int] | None = None) -> torch.nn.Module:
    """The model in float32 with every Linear layer int8 by rows (in place): siblings sharing one product; with
    `calibration_ids` (the tokenizer's ids of smoothing.CALIBRATION), smoothed first."""

    model = model.float()
    if calibration_ids:
        smooth(model, input_maxima(model, calibration_ids))
    for parent in list(model.modules()):
        for names in SIBLINGS:
            linears = [getattr(parent, n, None) for n in names]
            if all(type(m) is torch.nn.Linear for m in linears):
                shared = SharedProduct(linears)
                start = 0
                for name, linear in zip(names, linears):
                    setattr(parent, name, SharedColumns(shared, start, linear))
                    start += linear.out_features
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear:
                setattr(parent, name, RowInt8Linear(child))
    return model.eval()
