"""Peak memory of many requests decoded together, measured against what the app's refusal estimates.

    python scripts/load_memory.py [--target smollm2-135m-instruct] [--rows 16] [--tokens 256] [--dtype bfloat16]
                                  [--estimate qwen2.5-coder-1.5b-instruct]

Loads the target, then decodes `rows` requests of the code examples together, plain and with n-gram lookup at γ 4
(every row to its full budget), sampling the process's resident memory every 5 ms. Printed: the peak above what the
loaded model held before the run, against models/device.batch_bytes for the same rows, context and draft width (the
figure the app and the CLI refuse a level by). `--estimate` also prints that estimate for another preset's shapes
(read from its config on the meta device, no weights loaded).
"""

import argparse
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.drafters.registry import NO_DRAFTER, build_row_drafting, kinds  # noqa: E402
from specviz.engine.loop import generate_rows, new_generator  # noqa: E402
from specviz.models import encode_prompt  # noqa: E402
from specviz.models.device import batch_bytes  # noqa: E402
from specviz.runs import Pair, open_target  # noqa: E402
from specviz.settings import Settings  # noqa: E402


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """The largest resident size seen while the block runs, sampled every 5 ms by a thread."""

    def __enter__(self):
        self.peak, self.running = rss(), True
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def _watch(self):
        while self.running:
            self.peak = max(self.peak, rss())
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def meta_model(name: str, dtype: str):
    """A preset's model built on the meta device from its config: its shapes, no weights."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from specviz.models.offline import PRESETS, ensure_converted

    config = AutoConfig.from_pretrained(ensure_converted(PRESETS[name]))
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, torch_dtype=getattr(torch, dtype))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--target", default="smollm2-135m-instruct")
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--estimate", default="qwen2.5-coder-1.5b-instruct")
    args = p.parse_args()
    target = open_target(args.target, args.dtype)
    Pair(target, None).choose_exact(True)
    texts = json.loads((ROOT / "assets" / "prompts.json").read_text())["code"]
    prompts = [encode_prompt(target, texts[r % len(texts)]) for r in range(args.rows)]
    context = max(map(len, prompts)) + args.tokens
    out = {}
    lookup = next(k.name for k in kinds() if k.listing.lookup and not k.needs_draft)  # n-gram prompt lookup
    for drafter, gamma in ((NO_DRAFTER, 0), (lookup, 4)):
        settings = Settings(max_new_tokens=args.tokens, gamma=max(gamma, 1))
        generators = [new_generator(target.device, r) for r in range(args.rows)]
        drafting = build_row_drafting(drafter, settings, generators, target, None, under_load=True)
        before = rss()
        with torch.inference_mode(), PeakRss() as peak:
            made = sum(len(e.tokens) for _, e in generate_rows(target, prompts, settings, drafting, generators))
        measured = peak.peak - before
        estimate = batch_bytes(target.model, args.rows, context, 1 + gamma)
        out[drafter] = {"tokens": made, "peak_above_loaded_mb": measured / 1e6, "estimate_mb": estimate / 1e6}
        print(
            f"{args.target} {args.dtype}, {args.rows} rows x {args.tokens} new tokens, {drafter} (γ {gamma}): "
            f"{made} tokens; peak {measured / 1e6:.0f} MB above the loaded model, estimated {estimate / 1e6:.0f} MB",
            flush=True,
        )
    if args.estimate:
        shapes = meta_model(args.estimate, args.dtype)
        for gamma in (0, 4):
            need = batch_bytes(shapes, args.rows, context, 1 + gamma)
            print(f"{args.estimate} {args.dtype}, {args.rows} rows of {context} tokens, γ {gamma}: estimated "
                  f"{need / 1e6:.0f} MB beside the weights")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
