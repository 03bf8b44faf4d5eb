"""The GPU fast path, tried once per loaded model before any visitor's race: the static KV cache, then a CUDA graph
of every forward width a step uses. A piece that fails is named in one line and the model is set to the eager,
dynamic-cache path from then on (`specviz_static = False`), so the race still runs, identical to plain decoding,
instead of a visitor meeting the failure as an error. (Loading with a device map falls back the same way, in
models/loading.py.)"""

import warnings

import torch

from ..errors import first_line
from .static_lm import STEP_WIDTHS, graphs_allowed, open_lm, wants_static

PROBE = 8  # tokens fed first, so that every layer of the cache holds something before a capture


def fall_back(model: torch.nn.Module, what: str, why) -> str:
    """Set the model to the eager, dynamic-cache path; the line that says so."""
    model.specviz_static = False
    return f"{what} failed ({first_line(str(why))[:160]}); running the eager, dynamic-cache path"


@torch.inference_mode()
def try_fast_path(model: torch.nn.Module, name: str, widths=STEP_WIDTHS) -> str:
    """'' when the fast path held (or is not this model's: a CPU with a short context); else the line naming the
    piece that failed, the model already set to the fallback."""
    if not wants_static(model, PROBE + max(widths)):
        return ""
    ids = torch.zeros(PROBE, dtype=torch.long)
    try:
        lm = open_lm(model, PROBE + max(widths))  # a static cache: wants_static said so
        if not bool(torch.isfinite(lm.extend(ids)).all()):
            raise RuntimeError("its logits are not finite")
    except Exception as exc:  # any failure of this piece, whatever its kind, must not reach a visitor
        return f"{name}: " + fall_back(model, "the static KV cache", exc)
    if not (graphs_allowed(model.device) and lm.graphs_on):
        return ""
    for q in widths:
        for last_only in (True, False):
            lm.length = PROBE
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    lm.extend(torch.zeros(q, dtype=torch.long), last_only)
                except Exception as exc:
                    return f"{name}: " + fall_back(model, f"a {q}-token forward on the static cache", exc)
            if not lm.graphs_on:  # the capture, or its first replay, failed and said why in a warning
                why = caught[-1].message if caught else "it was turned off"
                return f"{name}: " + fall_back(model, f"the CUDA graph of a {q}-token forward", why)
    return ""
