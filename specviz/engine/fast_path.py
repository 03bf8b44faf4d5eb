"""The GPU fast path, tried once per loaded model before any visitor's race: the static KV cache, then (where asked)
torch.compile of its forward, then a CUDA graph of every forward width a step uses. A piece that fails is named in
one line and the model is set to the path without it from then on: a failed compile to the static cache uncompiled
(`specviz_compile = False`), anything else to the eager, dynamic-cache path (`specviz_static = False`), so the race
still runs, identical to plain decoding, instead of a visitor meeting the failure as an error. (Loading with a
device map falls back the same way, in models/loading.py.)"""

import warnings

import torch

from ..errors import first_line
from .compiled import compile_allowed
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
    compiling = compile_allowed(model)
    model.specviz_compile = False  # the static cache is tried on its own first
    try:
        lm = open_lm(model, PROBE + max(widths))  # a static cache: wants_static said so
        if not bool(torch.isfinite(lm.extend(ids)).all()):
            raise RuntimeError("its logits are not finite")
    except Exception as exc:  # any failure of this piece, whatever its kind, must not reach a visitor
        return f"{name}: " + fall_back(model, "the static KV cache", exc)
    model.specviz_compile = compiling
    if compiling and (why := compile_fails(model, lm)):
        model.specviz_compile = False
        return f"{name}: torch.compile of the forward failed ({first_line(why)[:160]}); running it uncompiled"
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


def compile_fails(model: torch.nn.Module, lm) -> str:
    """'' when the compiled forward gives the eager one's logits (within rounding) at a one-token and a several-token
    width (the two graphs it makes); else why not. Compiling happens here, at warm-up, not in a visitor's first step."""
    for q in (1, 4):
        lm.length = PROBE
        model.specviz_compile = False
        eager = lm.extend(torch.arange(q, dtype=torch.long))
        lm.length = PROBE
        model.specviz_compile = True
        try:
            fused = lm.extend(torch.arange(q, dtype=torch.long))
        except Exception as exc:  # any failure of the compiler (no C++ or Triton toolchain, a graph break it
            return f"{type(exc).__name__}: {exc}"  # cannot take, a guard it cannot build) must not reach a visitor
        # A fused kernel rounds in its own order: in bfloat16 the 1.5B's logits moved by a few units in the last place
        # (2.6% of their norm, measured on a CPU); a wrong graph moves them by about their whole size.
        drift = float(torch.linalg.vector_norm(fused.float() - eager.float()) / torch.linalg.vector_norm(eager.float()))
        if not drift <= 0.1:
            return f"its logits at {q} tokens differ from the eager forward's by {drift:.0%} of their norm"
    return ""
