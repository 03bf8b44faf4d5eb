"""What building each step's detail for the screen costs a run nobody watches step by step (a benchmark's).

    python scripts/step_detail_cost.py [--tokens 64] [--rounds 3]      # the offline pair; run it alone

The same greedy race of the default drafter with the step detail built (as the app does) and without (as the
benchmark now runs), rounds interleaved; prints the seconds spent inside the detail's construction per drafting
step, and the median step time either way.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from specviz.drafters.registry import default_kind  # noqa: E402
from specviz.engine import loop  # noqa: E402
from specviz.models import encode_prompt  # noqa: E402
from specviz.runs import generate_named, open_pair  # noqa: E402
from specviz.settings import Settings  # noqa: E402

PROMPT = "Write a Python function that merges two sorted lists into one sorted list."


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    kind = default_kind()
    pair = open_pair("qwen2.5-coder-1.5b-instruct", "bfloat16", "cpu", "qwen2.5-coder-0.5b-instruct", "int8")
    ids = encode_prompt(pair.target, PROMPT)
    gamma, adaptive = kind.listing.prefers("gamma", Settings.gamma), kind.listing.prefers("adaptive", Settings.adaptive)
    settings = Settings(max_new_tokens=args.tokens, gamma=gamma, adaptive=adaptive)
    spent: list[float] = []
    real = loop.step_detail

    def timed(*a, **k):
        began = time.perf_counter()
        out = real(*a, **k)
        spent.append(time.perf_counter() - began)
        return out

    loop.step_detail = timed
    steps = {True: [], False: []}
    per_step = []
    with torch.inference_mode():
        generate_named(pair.target, ids, Settings(max_new_tokens=8), kind.name, pair.draft)  # builds, runs nothing
        list(generate_named(pair.target, ids, Settings(max_new_tokens=8), kind.name, pair.draft))  # warm-up
        for _ in range(args.rounds):
            for explain in (True, False):
                spent.clear()
                events = list(generate_named(pair.target, ids, settings, kind.name, pair.draft, explain=explain))
                drafting = [e for e in events if e.proposed]
                steps[explain].append(statistics.median(e.step_s for e in drafting))
                if explain:
                    per_step.append(sum(spent) / max(1, len(drafting)))
    detail, shown, bare = (1000 * statistics.median(x) for x in (per_step, steps[True], steps[False]))
    print(
        f"{kind.name}, {args.tokens} tokens, {args.rounds} rounds: step detail {detail:.2f} ms per drafting step; "
        f"median drafting step {shown:.1f} ms with it, {bare:.1f} ms without"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
