"""What one DFlash block costs on this machine against one token of a draft model, and against the target's own
forwards: milliseconds (medians) of a block pass of a drafter shaped for the target (random weights: the cost does not
depend on them), of a one-token forward of the draft model at its precision, and of the target's verify forwards
over 1 and 16 tokens, all with a context of the prompt's length.

    python scripts/dflash_cost.py [--target qwen2.5-coder-1.5b-instruct] [--draft qwen2.5-coder-0.5b-instruct]
        [--layers 1,5] [--block 16] [--draft-dtype int8] [--context 300] [--repeats 15]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from specviz.drafters.dflash.dflash_checkpoint import build_draft, config_for, spaced_layers  # noqa: E402
from specviz.engine.cached_lm import CachedLM  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.runtime import quiet_transformers  # noqa: E402


def median_ms(run, repeats: int) -> float:
    run()  # the first call pays for allocation
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def drafter_for(target, layers: int, block: int, mask_id: int = 0):
    """An untrained drafter of `layers` layers reading five target layers, as published, on the target's device
    and in its precision (random weights: a pass costs the same whatever they are)."""
    layer_ids = spaced_layers(target.config.num_hidden_layers, 5)
    saved = config_for(target.config, layers=layers, block_size=block, mask_id=mask_id, target_layers=layer_ids)
    return build_draft(saved, target).to(device=target.device, dtype=target.dtype).eval()


@torch.inference_mode()
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--draft", default="qwen2.5-coder-0.5b-instruct")
    p.add_argument("--draft-dtype", default="int8")
    p.add_argument("--layers", default="1,5")
    p.add_argument("--block", type=int, default=16)
    p.add_argument("--context", type=int, default=300)
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    quiet_transformers()
    target = load_model(args.target, "bfloat16", "cpu")
    draft = load_model(args.draft, args.draft_dtype, "cpu")
    prompt = torch.randint(100, 20000, (args.context,), generator=torch.Generator().manual_seed(0))

    def forward_ms(model, width: int) -> float:
        lm = CachedLM(model)
        lm.extend(prompt, last_only=True)

        def step():
            lm.extend(prompt[:width])
            lm.truncate(args.context)

        return median_ms(step, args.repeats)

    plain, verify = forward_ms(target.model, 1), forward_ms(target.model, args.block)
    token = forward_ms(draft.model, 1)
    print(f"context {args.context} tokens, {torch.get_num_threads()} threads")
    print(f"target {args.target} bf16: 1-token forward {plain:.1f} ms, {args.block}-token verify {verify:.1f} ms")
    print(f"draft {args.draft} {args.draft_dtype}: one token {token:.1f} ms ({token / plain:.2f} of a target forward)")
    width = len(spaced_layers(target.model.config.num_hidden_layers, 5)) * target.model.config.hidden_size
    features = torch.randn(args.context, width, dtype=target.model.dtype)
    for layers in (int(n) for n in args.layers.split(",")):
        first, again = block_costs(drafter_for(target.model, layers, args.block), features, args.repeats)
        print(
            f"DFlash {layers} layer(s), block {args.block}: a pass {again:.1f} ms ({again / token:.2f} draft-model "
            f"tokens, {again / plain:.2f} target forwards; {args.block - 1} drafts); the first, with the whole "
            f"context, {first:.1f} ms"
        )


def block_costs(drafter, features: torch.Tensor, repeats: int) -> tuple[float, float]:
    """(ms of a pass that brings the whole context into the draft's cache, ms of a pass as each later step makes
    it: one token of new context, then the block)."""
    first = median_ms(lambda: drafter.fill(features, 5, drafter.new_cache()), repeats)
    cache, context = drafter.new_cache(), len(features)
    drafter.fill(features, 5, cache)

    def next_pass():
        cache.crop(context)
        drafter.fill(features[:1], 5, cache)

    return first, median_ms(next_pass, repeats)


if __name__ == "__main__":
    main()
