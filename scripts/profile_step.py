"""Where a decode step's time goes (forwards, the rest, host copies); run by a developer chasing overhead.

Where a decode step's time goes: model forwards vs everything else, and host copies per step.

    python scripts/profile_step.py [--target M] [--drafter draft|ngram|history|suffix|medusa|none] [--gamma 4]
                                   [--tokens 32] [--context N]

Runs one generation under torch.profiler and prints, per step: the share of wall time spent inside the
models' forwards (target and draft), the rest (sampling, verdict, rollback, bookkeeping), and how many
host copies (aten::_local_scalar_dense / aten::item: what a GPU would synchronise on) and cache copies
(aten::cat outside the models, aten::index_select) the engine made.
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from specviz.bench.plan import context_prompt  # noqa: E402
from specviz.drafters.registry import NO_DRAFTER, default_kind, kind  # noqa: E402
from specviz.events import summarize  # noqa: E402
from specviz.models import encode_prompt  # noqa: E402
from specviz.models.loading import quiet_transformers  # noqa: E402
from specviz.paths import ASSETS  # noqa: E402
from specviz.runs import generate_named  # noqa: E402
from specviz.runtimes.transformers_runtime import load_model  # noqa: E402
from specviz.settings import Settings  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--draft", default="qwen2.5-coder-0.5b-instruct")
    p.add_argument("--drafter", default=default_kind().name)
    p.add_argument("--gamma", type=int, default=4)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--prompt", default="Write a Python function `merge_intervals(intervals)` that merges overlapping intervals."
    )
    p.add_argument("--context", type=int, default=0, help="instead of --prompt: a prompt of about N tokens")
    args = p.parse_args()
    quiet_transformers()
    target = load_model(args.target, args.dtype, args.device)
    options = {}  # every drafter with its defaults (Medusa: the heads shipped for the target)
    drafter = None if args.drafter == NO_DRAFTER else kind(args.drafter)
    needs_draft = drafter is not None and drafter.draft_needed(drafter.parse(options))
    draft = load_model(args.draft, args.dtype, args.device) if needs_draft else None
    ids = encode_prompt(
        target,
        context_prompt(json.loads((ASSETS / "prompts.json").read_text()), args.context)
        if args.context
        else args.prompt,
    )
    settings = Settings(max_new_tokens=args.tokens, gamma=args.gamma)
    list(generate_named(target, ids, Settings(max_new_tokens=4, gamma=2), args.drafter, draft, options))  # warm up

    models = [m.model for m in (target, draft) if m is not None]
    timer = ForwardTimer()
    hooks = [m.register_forward_pre_hook(timer.enter) for m in models]
    hooks += [m.register_forward_hook(timer.leave) for m in models]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if target.device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        events = list(generate_named(target, ids, settings, args.drafter, draft, options))
        wall = time.perf_counter() - start
    for h in hooks:
        h.remove()
    steps, forward_s = len(events), timer.total
    engine, model = {}, {}
    for e in prof.events():
        where = model if _inside_model(e) else engine
        where[e.name] = where.get(e.name, 0) + 1
    m = summarize(events)
    print(
        f"{args.drafter} γ {args.gamma}, {len(ids)} prompt tokens: {m.new_tokens} tokens in {steps} steps, "
        f"{wall:.2f} s "
        f"({m.tokens_per_s:.2f} tok/s decode, τ {m.mean_tokens_per_step:.2f})"
    )
    print(
        f"  inside model forwards: {forward_s:.2f} s ({forward_s / wall:.1%}); everything else: "
        f"{wall - forward_s:.2f} s ({(wall - forward_s) / wall:.1%}), "
        f"{(wall - forward_s) / steps * 1000:.1f} ms per step"
    )
    print("  per step, outside the models (engine) / inside them (transformers):")
    for name in ("aten::_local_scalar_dense", "aten::index_select", "aten::cat", "aten::copy_", "aten::softmax"):
        print(f"    {name}: {engine.get(name, 0) / steps:.1f} / {model.get(name, 0) / steps:.1f}")
    return 0


class ForwardTimer:
    """Times the outermost model forward (a draft forward inside a target one is not counted twice)."""

    def __init__(self):
        self.depth, self.since, self.total, self.marks = 0, 0.0, 0.0, []

    def enter(self, *_):
        if self.depth == 0:
            self.since = time.perf_counter()
            self.marks.append(record_function("model forward"))
            self.marks[-1].__enter__()
        self.depth += 1

    def leave(self, *_):
        self.depth -= 1
        if self.depth == 0:
            self.total += time.perf_counter() - self.since
            self.marks.pop().__exit__(None, None, None)


def _inside_model(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name == "model forward":
            return True
        parent = parent.cpu_parent
    return False


if __name__ == "__main__":
    sys.exit(main())
