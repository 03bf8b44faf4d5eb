"""What a llama.cpp forward over k tokens costs this CPU, for the model itself: the plain step (k = 1) and the verify
cost curve (k = 2, 4, 8, 16), measured on the loaded GGUF rather than assumed.

A quantised model's cost is its kernels': in Q4 one token streams a quarter of bfloat16's bytes, which makes plain
decoding fast, while a forward of several tokens turns compute-bound sooner and its kernels switch (a repacked
product of four rows or more), so k tokens cost far more than one. The curve is measured once per file, CPU, thread
count and llama.cpp version after a short text has been read (as a verify runs after a prompt), each width the
median of REPEATS timings taken in rounds (every width once a round, so a machine that slows for a while slows them
all alike), and kept in the cache folder. A curve the physics forbids (a forward over k tokens dearer than k forwards
of one, or a wider forward much cheaper than a narrower one) says the machine's speed moved while it was measured:
it is measured again, and one that never comes out plausible is used for this run only, never kept.
"""

import json
import statistics
import time
from importlib import metadata
from pathlib import Path

import torch

from ...models.kernel_costs import device_name, keep_json
from ...models.offline import cache_root
from .binding import kernels, threads

WIDTHS = (1, 2, 4, 8, 16)  # a plain step, and verifies of γ 1, 3, 7, 15
REPEATS = 5
CONTEXT = 64  # tokens read before the timed forwards
COSTS_FILE = "llama-costs.json"
METHOD = 2  # how the curve is measured: a kept curve measured otherwise is measured again
ATTEMPTS = 3  # measurements of a curve before an implausible one is used (for this run only)
SLACK = 1.25  # how far a timing may stray before a curve is implausible: V(k) ≤ SLACK·k·V(1), V(wider) ≥ V / SLACK


def _key(path: Path) -> str:
    stat = path.stat()
    return (
        f"method {METHOD}|{device_name(torch.device('cpu'))}|{threads()} threads|llama-cpp-python {version()}|"
        f"{kernels()}|"
        f"{path.name}:{stat.st_size}"
    )


def version() -> str:
    """llama-cpp-python's version, which a kept curve is measured under ("?" where it is not installed)."""
    try:
        return metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return "?"


def measure(model, widths=WIDTHS, repeats: int = REPEATS) -> dict[int, float]:
    """Seconds of one forward over each width, on a context holding CONTEXT tokens: the median of `repeats` rounds,
    each timing every width once, after a round that warms the kernels."""
    context = model.take_context(CONTEXT + max(widths) + 1)
    try:
        filler = [min(1000 + i, model.vocab - 1) for i in range(CONTEXT)]
        context.forward(filler, range(CONTEXT), [(0,)] * CONTEXT, [False] * (CONTEXT - 1) + [True])
        timings = {width: [] for width in widths}
        for _ in range(repeats + 1):
            for width in widths:
                context.remove(0, CONTEXT, -1)
                began = time.perf_counter()
                context.forward(filler[:width], range(CONTEXT, CONTEXT + width), [(0,)] * width, [True] * width)
                timings[width].append(time.perf_counter() - began)
        return {width: statistics.median(seconds[1:]) for width, seconds in timings.items()}
    finally:
        model.give_context(context)


def implausible(curve: dict[int, float]) -> str:
    """Why `curve` cannot be this machine's steady cost ('' when it can): a width dearer than that many one-token
    forwards, or cheaper than a narrower width, beyond SLACK."""
    one = curve[min(curve)]
    for width, seconds in sorted(curve.items()):
        if seconds > SLACK * width * one:
            return f"{width} tokens took {seconds / one:.1f} one-token forwards"
    widths = sorted(curve)
    for narrow, wide in zip(widths, widths[1:]):
        if curve[wide] * SLACK < curve[narrow]:
            return f"{wide} tokens took less than {narrow}"
    return ""


def plausible_measure(model, report=lambda _: None, attempts: int = ATTEMPTS) -> tuple[dict[int, float], str]:
    """A curve measured until it is plausible, at most `attempts` times; the last one's problem ('' if none)."""
    for _ in range(attempts):
        curve = measure(model)
        problem = implausible(curve)
        if not problem:
            return curve, ""
        report(f"the machine's speed moved while llama.cpp's forward was measured ({problem}); measuring again")
    return curve, problem


def _known(folder: Path | None) -> tuple[Path, dict]:
    path = Path(folder or cache_root()) / COSTS_FILE
    try:
        return path, json.loads(path.read_text())
    except (OSError, ValueError):
        return path, {}


def kept_curve(gguf: Path, folder: Path | None = None) -> tuple[dict[int, float], str] | None:
    """The curve measured before for this file on this CPU, and llama.cpp's words for the model; None if never."""
    entry = _known(folder)[1].get(_key(gguf))
    if not isinstance(entry, dict) or "curve" not in entry:
        return None
    return {int(w): float(s) for w, s in entry["curve"].items()}, str(entry.get("describe", ""))


def forward_curve(model, report=lambda _: None, folder: Path | None = None) -> dict[int, float]:
    """The model's cost curve on this CPU: kept from an earlier measurement, else measured now (a few seconds, said
    through `report`) and kept if plausible."""
    kept = kept_curve(model.path, folder)
    if kept is not None:
        return kept[0]
    report(f"measuring llama.cpp's forward of {', '.join(map(str, WIDTHS))} tokens for {model.path.name}, once")
    curve, problem = plausible_measure(model, report)
    if problem:  # used for this run; the next load measures again
        return curve
    path, known = _known(folder)
    known[_key(model.path)] = {"curve": {str(w): s for w, s in curve.items()}, "describe": model.describe()}
    keep_json(path, known)
    return curve
