"""Exact mode: the target computes each token's row the same way whether a forward feeds it alone (plain decoding)
or among others (a verify forward, the prefill), so greedy speculative output equals plain decoding's bit for bit in
bfloat16 too, not only where no near tie falls.

Two things in a bfloat16 forward on a CPU give a row that depends on how many rows came with it:
- A matrix product of one row takes a vector kernel that sums in another order than the kernel for two or more rows;
  rows of a product of two or more rows do not depend on how many there are. So a Linear here never multiplies one
  row alone: it pairs it with a zero row (which is also faster than the one-row kernel on this project's CPU).
- Attention over several queries with a mask (a verify forward) is not row by row the one-query call that plain
  decoding makes. So each query row runs its own one-query call over exactly the keys it may see: the cached prefix
  and, in a tree, its own ancestors, in the order plain decoding would have written them. Only the very first forward
  (the prompt, from an empty cache) runs as one causal call: both sides make that same call.

Both are installed on a loaded model in place (its Linear layers' class, a registered attention function) and taken
off again; nothing is copied and no modeling file is touched. Whether they hold on this machine's kernels is probed
when the mode is switched on (`exact_problem`).
"""

import torch
import torch.nn.functional as F
from transformers import AttentionInterface

from ..trace import EXACT_ON

EXACT_ATTENTION = "specviz_exact"
PROBE_ROWS = (2, 3, 7, 16)  # row counts whose rows a probe holds against the same rows computed one by one


class PairedLinear(torch.nn.Linear):
    """A Linear whose one-row products go through the several-row kernel: the row is paired with a zero row."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() != x.shape[-1]:  # two or more rows
            return F.linear(x, self.weight, self.bias)
        row = x.reshape(1, -1)
        out = F.linear(torch.cat([row, torch.zeros_like(row)]), self.weight, self.bias)[:1]
        return out.reshape(*x.shape[:-1], out.shape[-1])


def _row_keys(attention_mask: torch.Tensor | None, rows: int, keys: int) -> tuple[bool, list]:
    """(whether this is the first forward, from an empty cache; per query row, how many keys it sees and, unless they
    are a prefix of the cache, which). No mask: causal, the rows being the last `rows` of `keys`. Worked out once
    per forward: every layer gets the same mask."""
    if attention_mask is None:
        return keys == rows, [(keys - rows + 1 + row, None) for row in range(rows)]
    plan = getattr(attention_mask, "_specviz_row_keys", None)
    if plan is None:
        mask = attention_mask[0, 0]
        sees = (mask if mask.dtype == torch.bool else mask == 0).cpu()
        counts = sees.sum(-1).tolist()
        rows_of = []
        for row, n in enumerate(counts):
            prefix = bool(sees[row, :n].all())
            rows_of.append((n, None if prefix else sees[row].nonzero().flatten().to(attention_mask.device)))
        first = counts == list(range(1, rows + 1)) and all(columns is None for _, columns in rows_of)
        plan = attention_mask._specviz_row_keys = (first, rows_of)
    return plan


def row_by_row_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """Attention in which every query row gets what a one-query call over its visible keys gives (batch 1)."""
    rows = query.shape[2]
    first, rows_of = _row_keys(attention_mask, rows, key.shape[2])
    if first and rows > 1:  # the prompt from an empty cache: one causal call, the same on both sides
        out = F.scaled_dot_product_attention(
            query, key[:, :, :rows], value[:, :, :rows], is_causal=True, scale=scaling, enable_gqa=True
        )
    else:
        outs = []
        for row, (n, columns) in enumerate(rows_of):
            if columns is None:  # a prefix of the cache: a view, as plain decoding reads it
                k, v = key[:, :, :n], value[:, :, :n]
            else:  # a tree node: the prefix and its ancestors, in position order
                k, v = key.index_select(2, columns), value.index_select(2, columns)
            q = query[:, :, row : row + 1]
            outs.append(F.scaled_dot_product_attention(q, k, v, scale=scaling, enable_gqa=True))
        out = outs[0] if rows == 1 else torch.cat(outs, dim=2)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(EXACT_ATTENTION, row_by_row_attention)  # the registry is transformers' own


def exact_problem(model: torch.nn.Module) -> str:
    """Why exact mode cannot hold for `model` here ('' when it can): the device, the precision, a layer the mode does
    not cover, or this machine's kernels failing the probe. Worked out once per device, precision and thread count,
    and kept with the model."""
    key = (str(model.device), model.dtype, torch.get_num_threads())
    known = model.__dict__.setdefault("_specviz_exact_problem", {})
    if key not in known:
        known[key] = _problem(model)
    return known[key]


def _problem(model: torch.nn.Module) -> str:
    if model.device.type != "cpu":
        return f"it is checked on CPUs only, and this model is on {model.device.type}"
    if model.dtype != torch.bfloat16:
        return f"it covers bfloat16 targets, and this one is {str(model.dtype).removeprefix('torch.')}"
    config = model.config
    for field in ("sliding_window", "attn_logit_softcapping", "final_logit_softcapping"):
        if getattr(config, field, None) and (field != "sliding_window" or getattr(config, "use_sliding_window", True)):
            return f"it does not cover attention with {field.replace('_', ' ')} ({type(model).__name__})"
    if not model._can_set_attn_implementation():
        return f"{type(model).__name__} does not take a registered attention function"
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if any(not isinstance(m.weight, torch.nn.Parameter) or m.weight.dtype != torch.bfloat16 for m in linears):
        return "it covers bfloat16 Linear layers, and this model has others"
    shapes = {(m.in_features, m.out_features, m.bias is not None): m for m in linears}
    for (inputs, outputs, _), layer in shapes.items():
        if not _linear_rows_hold(layer):
            return f"this CPU's bfloat16 matrix product ({inputs} → {outputs}) gives rows that depend on how many"
    return ""


def _linear_rows_hold(layer: torch.nn.Linear) -> bool:
    """Rows of the paired product equal the same rows multiplied in products of other row counts."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(max(PROBE_ROWS), layer.in_features, generator=gen).to(layer.weight.dtype)
    with torch.inference_mode():
        alone = torch.cat([PairedLinear.forward(layer, x[i : i + 1]) for i in range(len(x))])
        return all(torch.equal(F.linear(x[:n], layer.weight, layer.bias), alone[:n]) for n in PROBE_ROWS)


def set_exact(model: torch.nn.Module, on: bool) -> str:
    """Switch exact mode on or off for `model`, in place; '' when it is as asked, else why it stays off."""
    problem = exact_problem(model) if on else ""
    on = on and not problem
    for layer in model.modules():
        if type(layer) in (torch.nn.Linear, PairedLinear):
            layer.__class__ = PairedLinear if on else torch.nn.Linear
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
