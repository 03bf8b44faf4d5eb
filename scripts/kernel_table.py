"""What one MLP projection of the offline target (Qwen2.5-Coder 1.5B: 1536 → 8960) costs on this CPU for 1, 5, 9 and
16 rows, by each kernel path the pinned torch offers, with the weights of 28 layers streamed from memory as a real
forward streams them (one copy per layer, cycled). Prints a markdown table: milliseconds per product (the minimum of
--repeats passes) and, in brackets, that cost in one-row products of the same path; then whether each path's rows
are the same bits whatever shares the product.

    python scripts/kernel_table.py [--repeats 5]

Run it alone.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from specviz.models.kernel_costs import device_name  # noqa: E402
from specviz.models.quantize import RowInt8Linear  # noqa: E402

IN, OUT, LAYERS, ROWS = 1536, 8960, 28, (1, 5, 9, 16)
FP32 = torch.float32


def paths(weights: list[torch.Tensor]) -> dict:
    """name → (a function of (layer, x), the input dtype)."""
    warnings.filterwarnings("ignore")
    bf16 = [w.bfloat16() for w in weights]
    dense = [torch.nn.Linear(IN, OUT, bias=False) for _ in weights]
    for linear, w in zip(dense, weights):
        linear.weight = torch.nn.Parameter(w, requires_grad=False)
    rows = [RowInt8Linear(linear) for linear in dense]
    dynamic = [
        torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(linear), {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}
        )[0]
        for linear in dense
    ]
    fp16 = [torch.ops.quantized.linear_prepack_fp16(w, None) for w in weights]
    mkldnn = [w.to_mkldnn() for w in weights]
    int8pack = []
    for w in weights:
        scale = w.abs().amax(dim=1) / 127
        int8pack.append(((w / scale[:, None]).round().to(torch.int8), scale.bfloat16()))
    return {
        "float32 (MKL)": (lambda i, x: F.linear(x, weights[i]), torch.float32),
        "bfloat16 (MKL)": (lambda i, x: F.linear(x, bf16[i]), torch.bfloat16),
        "float32 (oneDNN)": (
            lambda i, x: torch._C._nn.mkldnn_linear(x.to_mkldnn(), mkldnn[i]).to_dense(),
            torch.float32,
        ),
        "float16 weights (fbgemm)": (lambda i, x: torch.ops.quantized.linear_dynamic_fp16(x, fp16[i]), torch.float32),
        "int8 bf16 activations (_weight_int8pack_mm)": (
            lambda i, x: torch._weight_int8pack_mm(x, int8pack[i][0], int8pack[i][1]),
            torch.bfloat16,
        ),
        "int8, one input scale (torch dynamic, fbgemm)": (lambda i, x: dynamic[i](x), torch.float32),
        "int8, a scale per row (specviz RowInt8Linear, fbgemm)": (lambda i, x: rows[i](x), torch.float32),
    }


def cost(run, dtype, rows: int, repeats: int) -> float:
    x = torch.randn(rows, IN).to(dtype)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats + 1):
            began = time.perf_counter()
            for i in range(LAYERS):
                run(i, x)
            best = min(best, (time.perf_counter() - began) / LAYERS)
    return best * 1000


def row_exact(run, dtype) -> bool:
    x = torch.randn(16, IN).to(dtype) * torch.linspace(0.2, 5, 16).unsqueeze(1).to(dtype)
    with torch.inference_mode():
        alone = torch.cat([run(0, x[i : i + 1]) for i in range(16)])
        return all(torch.equal(run(0, x[:n]), alone[:n]) for n in (2, 5, 9, 16))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    torch.manual_seed(0)
    weights = [torch.randn(OUT, IN) * 0.02 for _ in range(LAYERS)]
    print(f"{device_name(torch.device('cpu'))}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(
        f"\n| path ({IN} → {OUT}, {LAYERS} layers' weights) | "
        + " | ".join(f"{r} rows" for r in ROWS)
        + " | row-exact |"
    )
    print("|---|" + "---|" * (len(ROWS) + 1))
    for name, (run, dtype) in paths(weights).items():
        try:
            ms = [cost(run, dtype, r, args.repeats) for r in ROWS]
            exact = "yes" if row_exact(run, dtype) else "no"
        except RuntimeError as exc:  # a kernel this build or CPU does not have
            print(f"| {name} | not available: {str(exc).splitlines()[0][:80]} |")
            continue
        cells = [f"{m:.2f} ({m / ms[0]:.1f}×)" for m in ms]
        print(f"| {name} | " + " | ".join(cells) + f" | {exact} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
