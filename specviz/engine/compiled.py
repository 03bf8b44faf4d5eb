"""torch.compile over the static cache's forward: the model's layers fused into a few kernels, as gpt-fast and
transformers' static-cache recipe do it. One compiled graph serves every width (dynamic in the number of new tokens,
so a chain of 4 and a tree of 12 share it; a one-token forward gets its own), and static_lm.py's CUDA graphs capture
each width's launches on top of it. A CPU gains little and pays the compile, ZeroGPU forbids it in its workers: the
default is on for CUDA outside ZeroGPU only when `SPECVIZ_COMPILE=1`, until a GPU run shows it pays (the warm-up in
fast_path.py tries it and falls back, in one line, where it fails)."""

import os

import torch

from ..models.device import zero_gpu


def compile_allowed(model: torch.nn.Module) -> bool:
    """Whether the static cache's forwards go through torch.compile: asked for (`SPECVIZ_COMPILE=1`), not under
    ZeroGPU, and not turned off for this model (`model.specviz_compile = False`, as a failed warm-up leaves it)."""
    wanted = os.environ.get("SPECVIZ_COMPILE", "0") == "1" and not zero_gpu()
    return wanted and bool(getattr(model, "specviz_compile", True))


def compiled_forward(model: torch.nn.Module):
    """The model's compiled forward, made once and kept with the model (compiling happens at its first calls)."""
    kept = model.__dict__.get("_specviz_compiled")
    if kept is None:
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)  # capacities × widths
        kept = model.__dict__["_specviz_compiled"] = torch.compile(model, dynamic=True)
    return kept
