"""Exact mode: the target computes each token's row the same way whether a forward feeds it alone (plain decoding)
or among others (a verify forward, the prefill), so greedy speculative output equals plain decoding's bit for bit in
bfloat16 too, not only where no near tie falls.

Two things in a bfloat16 forward on a CPU give a row that depends on how many rows came with it:
- A matrix product of one row takes a vector kernel that sums in another order than the kernel for two or more rows,
  and past some count of rows a CPU may switch kernels again (on an AMX Xeon, above 32 rows of bfloat16). So a Linear
  here only multiplies between 2 and `rows_at_once` rows, a count the probe found rows not to depend on: it pairs a
  lone row with a zero row, and multiplies more rows in pieces. A verify of many rows then costs a few products
  instead of one; plain decoding's one row, and a verify under that count, cost what they did.
- Attention over several queries with a mask (a verify forward) is not row by row the one-query call that plain
  decoding makes. So each query row runs its own one-query call over exactly the keys it may see: the cached prefix
  and, in a tree, its own ancestors, in the order plain decoding would have written them. Only the very first forward
  (the prompt, from an empty cache) runs as one causal call: both sides make that same call.

The prompt's forward needs neither: plain decoding and every speculative run read the same prompt with the same one
forward, so its cache entries and its last row's logits are the same on both sides whatever kernel computes them,
and only rows that one side computes alone and the other among others must match. So reading a prompt
(`whole_rows`) multiplies every product in one piece, at the full speed of an ordinary forward.

Both are installed on a loaded model in place (its Linear layers' class, a registered attention function) and taken
off again; nothing is copied and no modeling file is touched. Whether they hold on this machine's kernels is probed
when the mode is switched on (`exact_problem`).
"""

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from transformers import AttentionInterface

from ..trace import EXACT_ON
from .quantize import RowInt8Linear, SharedColumns

EXACT_ATTENTION = "specviz_exact"
EVERY_COUNT = 32  # the probe holds each row count from 2 to this against rows computed one by one, then PAST_IT
PAST_IT = (33, 48, 64, 96, 128)
ALONE = 16  # the rows the probe computes one by one: the first rows of every product probed


def rows_product(x: torch.Tensor, weight: torch.Tensor, bias, most: int | None) -> torch.Tensor:
    """F.linear(x, weight, bias) where every product has 2 to `most` rows (None: no most): a lone row is paired with a
    zero row, and more rows than `most` are multiplied in pieces of `most` (a lone last row paired)."""
    flat = x.reshape(-1, x.shape[-1])
    n = len(flat)
    if n > 1 and (most is None or n <= most):
        return F.linear(x, weight, bias)
    pieces = [flat[start : start + most] for start in range(0, n, most)] if n > 1 else [flat]
    outs = [
        F.linear(torch.cat([p, torch.zeros_like(p)]), weight, bias)[:1] if len(p) == 1 else F.linear(p, weight, bias)
        for p in pieces
    ]
    out = torch.cat(outs) if len(outs) > 1 else outs[0]
    return out.reshape(*x.shape[:-1], out.shape[-1])


_reading = threading.local()  # per thread: whether the forward running is a prompt's (whole_rows)


@contextmanager
def whole_rows():
    """While a prompt is read (in this thread): every product in one piece, as an ordinary forward multiplies."""
    before = getattr(_reading, "prompt", False)
    _reading.prompt = True
    try:
        yield
    finally:
        _reading.prompt = before


class PairedLinear(torch.nn.Linear):
    """A Linear whose products all go through the several-row kernel, at most `rows_at_once` rows each (set_exact);
    a prompt's forward (whole_rows) multiplies in one piece."""

    rows_at_once: int | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        most = None if getattr(_reading, "prompt", False) else self.rows_at_once
        return rows_product(x, self.weight, self.bias, most)


@dataclass(frozen=True)
class RowKeys:
    """Which keys each query row of one forward may see, worked out once per forward and batch row (every layer gets
    the same mask). A row sees a run of the cache's entries [lo, hi) and then, a tree node, the entries `extra[i]`
    (its ancestors and itself, in position order); a row of a batch sees only its own entries, which start at lo."""

    first: bool  # the prompt's forward from an empty cache: every row sees the rows up to it, and nothing else
    spans: tuple[tuple[int, int], ...]
    extra: tuple = ()  # per row: None (a run of the cache) or a tensor of entry indices after its run


def _row_keys(mask: torch.Tensor | None, rows: int, keys: int) -> RowKeys:
    """The plan for one batch row from its [rows, keys] mask. No mask: causal, the rows being the last `rows` of
    `keys`."""
    if mask is None:
        spans = tuple((0, n) for n in range(keys - rows + 1, keys + 1))
        return RowKeys(keys == rows, spans, (None,) * rows)
    sees = (mask if mask.dtype == torch.bool else mask == 0).cpu()
    spans = []
    extra = []
    for row in range(rows):
        columns = sees[row].nonzero().flatten()
        lo = int(columns[0]) if len(columns) else 0
        run = int((columns - lo == torch.arange(len(columns))).sum())  # the leading run lo, lo + 1, ...
        spans.append((lo, lo + run))
        extra.append(None if run == len(columns) else columns[run:].to(mask.device))
    first = spans == [(0, n) for n in range(1, rows + 1)] and all(e is None for e in extra)
    return RowKeys(first, tuple(spans), tuple(extra))


def _plans(attention_mask: torch.Tensor | None, batch: int, rows: int, keys: int) -> tuple[RowKeys, ...]:
    if attention_mask is None:
        return (_row_keys(None, rows, keys),) * batch
    found = getattr(attention_mask, "_specviz_row_keys", None)
    if found is None:
        found = tuple(
            _row_keys(attention_mask[b if attention_mask.shape[0] > 1 else 0, 0], rows, keys) for b in range(batch)
        )
        attention_mask._specviz_row_keys = found
    return found


def _one_query(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling) -> torch.Tensor:
    """[1, heads, 1, dim] attention of one query row over [1, kv heads, n, dim] keys: the query heads that share a
    key head as rows of one call (ten times faster on a CPU than repeating the keys), the same for every row."""
    heads = query.shape[1]
    groups = key.shape[1]
    grouped = query.reshape(1, groups, heads // groups, query.shape[-1])
    return F.scaled_dot_product_attention(grouped, key, value, scale=scaling).reshape(1, heads, 1, -1)


def _rows_of(plan: RowKeys, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling) -> torch.Tensor:
    """[1, heads, rows, dim]: one batch row's queries, each over exactly the keys it may see."""
    rows = query.shape[2]
    if plan.first and rows > 1:  # the prompt from an empty cache: one causal call, the same on both sides
        return F.scaled_dot_product_attention(
            query, key[:, :, :rows], value[:, :, :rows], is_causal=True, scale=scaling, enable_gqa=True
        )
    spare = {}  # tree rows read their run of the cache, then their own entries after it: one buffer per run
    outs = []
    for row, ((lo, hi), extra) in enumerate(zip(plan.spans, plan.extra)):
        if extra is None:  # a run of the cache: a view, as plain decoding reads its own cache
            k, v = key[:, :, lo:hi], value[:, :, lo:hi]
        else:
            if (lo, hi) not in spare:
                most = max(len(e) for span, e in zip(plan.spans, plan.extra) if e is not None and span == (lo, hi))
                spare_k = key.new_empty(*key.shape[:2], hi - lo + most, key.shape[-1])
                spare_v = value.new_empty(*spare_k.shape)
                spare_k[:, :, : hi - lo], spare_v[:, :, : hi - lo] = key[:, :, lo:hi], value[:, :, lo:hi]
                spare[lo, hi] = spare_k, spare_v
            spare_k, spare_v = spare[lo, hi]
            n = hi - lo + len(extra)
            spare_k[:, :, hi - lo : n] = key.index_select(2, extra)
            spare_v[:, :, hi - lo : n] = value.index_select(2, extra)
            k, v = spare_k[:, :, :n], spare_v[:, :, :n]
        outs.append(_one_query(query[:, :, row : row + 1], k, v, scaling))
    return outs[0] if rows == 1 else torch.cat(outs, dim=2)


def row_by_row_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """Attention in which every query row of every batch row gets what a one-query call over its visible keys gives."""
    batch = query.shape[0]
    rows = query.shape[2]
    plans = _plans(attention_mask, batch, rows, key.shape[2])
    outs = [_rows_of(plan, query[b : b + 1], key[b : b + 1], value[b : b + 1], scaling) for b, plan in enumerate(plans)]
    out = outs[0] if batch == 1 else torch.cat(outs, dim=0)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(EXACT_ATTENTION, row_by_row_attention)  # the registry is transformers' own


def exact_problem(model: torch.nn.Module) -> str:
    """Why exact mode cannot hold for `model` here ('' when it can): the device, the precision, a layer the mode does
    not cover, or this machine's kernels failing the probe. Worked out once per device, precision and thread count,
    and kept with the model."""
    return _probed(model)[0]


def _probed(model: torch.nn.Module) -> tuple[str, int | None]:
    """(exact_problem, the most rows a bfloat16 product may take whose rows do not depend on how many), kept."""
    key = (str(model.device), model.dtype, torch.get_num_threads())
    known = model.__dict__.setdefault("_specviz_exact_problem", {})
    if key not in known:
        known[key] = _problem(model)
    return known[key]


def _problem(model: torch.nn.Module) -> tuple[str, int | None]:
    if model.device.type != "cpu":
        return f"it is checked on CPUs only, and this model is on {model.device.type}", None
    row_int8 = [m.shared.product if isinstance(m, SharedColumns) else m for m in model.modules()]
    row_int8 = [m for m in row_int8 if isinstance(m, RowInt8Linear)]
    if model.dtype != torch.bfloat16 and not row_int8:
        return f"it covers bfloat16 and int8 targets, and this one is {str(model.dtype).removeprefix('torch.')}", None
    config = model.config
    for field in ("sliding_window", "attn_logit_softcapping", "final_logit_softcapping"):
        if getattr(config, field, None) and (field != "sliding_window" or getattr(config, "use_sliding_window", True)):
            return f"it does not cover attention with {field.replace('_', ' ')} ({type(model).__name__})", None
    if not model._can_set_attn_implementation():
        return f"{type(model).__name__} does not take a registered attention function", None
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if any(not isinstance(m.weight, torch.nn.Parameter) or m.weight.dtype != torch.bfloat16 for m in linears):
        return "it covers bfloat16 and int8 (row) Linear layers, and this model has others", None
    shapes = {(m.in_features, m.out_features, m.bias is not None): m for m in linears + row_int8}
    limits = []
    for (inputs, outputs, _), layer in shapes.items():
        held = _rows_held(layer)
        if held is not None and (held < 2 or isinstance(layer, RowInt8Linear)):  # int8 is never cut in pieces
            kind = "int8" if isinstance(layer, RowInt8Linear) else "bfloat16"
            return f"this CPU's {kind} matrix product ({inputs} → {outputs}) gives rows that depend on how many", None
        limits += [] if held is None else [held]
    return "", min(limits, default=None)


def _rows_held(layer: torch.nn.Module) -> int | None:
    """The most rows a product may take whose rows equal the same rows multiplied one by one (paired, for a bfloat16
    Linear): None where every count probed held, else one under the first count that did not. Every count from 2 to
    EVERY_COUNT is probed, then PAST_IT (a kernel switch past them shows in the first rows)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(max(PAST_IT), layer.in_features, generator=gen)
    with torch.inference_mode():
        if isinstance(layer, RowInt8Linear):  # row-exact by construction; the probe holds this CPU to it
            one = layer.forward
            several = layer.forward
        else:
            x = x.to(layer.weight.dtype)
            one = partial(rows_product, weight=layer.weight, bias=layer.bias, most=None)
            several = partial(F.linear, weight=layer.weight, bias=layer.bias)
        alone = torch.cat([one(x[i : i + 1]) for i in range(ALONE)])
        for n in (*range(2, EVERY_COUNT + 1), *PAST_IT):
            kept = min(n, ALONE)
            if not torch.equal(several(x[:n])[:kept], alone[:kept]):
                return min(n - 1, EVERY_COUNT)
    return None


def set_exact(model: torch.nn.Module, on: bool) -> str:
    """Switch exact mode on or off for `model`, in place; '' when it is as asked, else why it stays off."""
    problem, most = _probed(model) if on else ("", None)
    on = on and not problem
    for layer in model.modules():
        if type(layer) in (torch.nn.Linear, PairedLinear):
            layer.__class__ = PairedLinear if on else torch.nn.Linear
            if on:
                layer.rows_at_once = most
    previous = model.__dict__.setdefault("_specviz_attention", model.config._attn_implementation)
    model.set_attn_implementation(EXACT_ATTENTION if on else previous)
    return problem


def exact_for(model: torch.nn.Module, wanted: bool) -> str:
    """Exact mode as wanted, where it holds; in one line what holds: EXACT_ON, "exact mode off" (as asked), or
    "exact mode off: " and why it cannot hold here."""
    problem = set_exact(model, wanted)
    return EXACT_ON if wanted and not problem else f"exact mode off: {problem}" if problem else "exact mode off"


def is_exact(model: torch.nn.Module) -> bool:
    return model.config._attn_implementation == EXACT_ATTENTION
