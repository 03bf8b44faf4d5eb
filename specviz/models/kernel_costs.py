"""What a model's forward costs on this device, for each precision specviz can run there, measured, not assumed.

On a CPU the Linear layers are nearly all of a small model's forward, and what they cost depends on the kernels far
more than on the weights' values: on an AVX2 CPU without bfloat16 instructions a bfloat16 product of 5 rows costs
about 3 single rows, a float32 one up to 7, while the int8 product of `quantize.RowInt8Linear` costs nearly the same
for 1 to 9 rows; on a CPU with AMX, bfloat16 of 9 rows costs little more than 1. So each path's layers are built from
the model's config with random weights (the model itself is not read), enough distinct layers that their weights
stream from memory as a real forward's do, and timed at the forward widths decoding uses: 1 token (a plain step),
γ + 1 (a verify) and a tree's nodes. A forward of w tokens then costs layers × (one layer at w) + the LM head at w.

Measured once per device, thread count, torch version and model shape, kept in the cache folder, and measured again
only when one of those changes (a few seconds to half a minute on a CPU).
"""

import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .quantize import RowInt8Linear

CPU_PATHS = ("bfloat16", "float32", "int8")
WIDTHS = (1, 2, 3, 5, 9, 13)  # a plain step, γ + 1 for γ 1, 2, 4, 8, and a tree of 12 nodes
WORKING_SET = 128 * 2**20  # bytes of distinct weights per timing pass: past the caches of a laptop or a VM slice
REPEATS = 5
COSTS_FILE = "kernel-costs.json"


@dataclass(frozen=True)
class Shape:
    """What a decoder's cost depends on: its Linear layers' shapes, how many layers, and its LM head."""

    hidden: int
    intermediate: int
    attention_out: int  # query heads × head size
    kv_out: int  # key (and value) heads × head size
    layers: int
    vocab: int
    qkv_bias: bool = False

    @classmethod
    def of(cls, config) -> "Shape":
        config = getattr(config, "text_config", None) or config
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        kv = getattr(config, "num_key_value_heads", None) or heads
        return cls(
            config.hidden_size,
            config.intermediate_size,
            heads * head_dim,
            kv * head_dim,
            config.num_hidden_layers,
            config.vocab_size,
            bool(getattr(config, "attention_bias", False) or config.model_type.startswith("qwen2")),
        )

    def linears(self) -> list[tuple[int, int, bool]]:
        """One decoder layer's Linear layers as (in, out, bias): q, k, v, o, gate, up, down."""
        h = self.hidden
        b = self.qkv_bias
        return [
            (h, self.attention_out, b),
            (h, self.kv_out, b),
            (h, self.kv_out, b),
            (self.attention_out, h, False),
            (h, self.intermediate, False),
            (h, self.intermediate, False),
            (self.intermediate, h, False),
        ]

    def key(self) -> str:
        return (
            f"{self.layers}x(h{self.hidden},i{self.intermediate},a{self.attention_out},kv{self.kv_out}),v{self.vocab}"
        )


def device_name(device: torch.device) -> str:
    """The device as its costs depend on it: a GPU's name, or a CPU's model and the instructions that matter."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = ""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:  # the first processor's lines: its model name, then its flags
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    found = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8") if f in flags]
    model = model or platform.processor() or "cpu"
    return f"{model} ({', '.join(found) or 'no AVX2'})"


def _layer(path: str, shape: tuple[int, int, bool]) -> torch.nn.Module:
    linear = torch.nn.utils.skip_init(torch.nn.Linear, shape[0], shape[1], bias=shape[2])
    with torch.no_grad():  # values do not change the time; uniform ones are quick to draw
        linear.weight.uniform_(-0.05, 0.05)
        if linear.bias is not None:
            linear.bias.zero_()
    if path == "int8":
        return RowInt8Linear(linear)
    return linear.to(torch.bfloat16 if path == "bfloat16" else torch.float32)


def _bytes(path: str, linears: list[tuple[int, int, bool]]) -> int:
    per = {"int8": 1, "bfloat16": 2}.get(path, 4)
    return sum(i * o for i, o, _ in linears) * per


def _time(layers: list[list[torch.nn.Module]], width: int, dtype: torch.dtype) -> float:
    """Seconds for one pass of `width` rows through every layer: the fastest of REPEATS after one warm pass."""
    inputs = {m.in_features: torch.randn(1, width, m.in_features).to(dtype) for layer in layers for m in layer}
    times = []
    with torch.inference_mode():
        for _ in range(REPEATS + 1):
            began = time.perf_counter()
            for layer in layers:
                for linear in layer:
                    linear(inputs[linear.in_features])
            times.append(time.perf_counter() - began)
    return min(times[1:])  # the least disturbed pass: what the kernels cost when nothing else runs


def measure(shape: Shape, path: str, widths=WIDTHS) -> dict[int, float]:
    """Seconds per forward of each width in `widths` for a model of `shape` on this CPU in `path`."""
    dtype = torch.bfloat16 if path == "bfloat16" else torch.float32
    per_layer = _bytes(path, shape.linears())
    count = max(1, min(shape.layers, -(-WORKING_SET // per_layer)))
    layers = [[_layer(path, s) for s in shape.linears()] for _ in range(count)]
    # the head is one layer, far larger than the cache on its own: timed as is
    head = [[_layer(path, (shape.hidden, shape.vocab, False))]]
    costs = {}
    for width in widths:
        body = _time(layers, width, dtype) / count * shape.layers
        costs[width] = body + _time(head, width, dtype)
    return costs


@dataclass(frozen=True)
class CostTable:
    """Seconds per forward, by path and width, for one model shape on one device."""

    device: str
    forward: dict[str, dict[int, float]]  # path → width → seconds

    def at(self, path: str, width: int) -> float:
        """A forward of `width` tokens: measured, or interpolated between the nearest widths measured."""
        table = self.forward[path]
        if width in table:
            return table[width]
        known = sorted(table)
        below = max((w for w in known if w < width), default=known[0])
        above = min((w for w in known if w > width), default=known[-1])
        if above == below:
            return table[below] * width / below
        return table[below] + (table[above] - table[below]) * (width - below) / (above - below)


METHOD = 2  # how the costs are measured: a kept table measured otherwise is measured again


def cache_key(shape: Shape, device: torch.device) -> str:
    threads = torch.get_num_threads()
    return f"method {METHOD}|{device_name(device)}|{threads} threads|torch {torch.__version__}|{shape.key()}"


def keep_json(path, data) -> None:
    """A cache file written whole or not at all (a scratch file renamed over it, so two processes never leave half
    of one); on a read-only cache nothing is kept and the next run measures again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps(data, indent=1))
        scratch.replace(path)
    except OSError:
        pass


def costs_for(shape: Shape, device: torch.device, folder, report=lambda _: None, paths=CPU_PATHS) -> CostTable:
    """The cost table of `shape` on `device`: from the cache folder's file when measured before here, else measured
    now (with a line to `report`) and kept there."""

    path = Path(folder) / COSTS_FILE
    key = cache_key(shape, device)
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    entry = known.get(key, {})
    missing = [p for p in paths if p not in entry]
    if missing:
        report(f"measuring this device's kernels for a {shape.layers}-layer model, once (about half a minute)")
        entry.update({p: {str(w): s for w, s in measure(shape, p).items()} for p in missing})
        known[key] = entry
        keep_json(path, known)
    return CostTable(device_name(device), {p: {int(w): float(entry[p][w]) for w in entry[p]} for p in paths})
