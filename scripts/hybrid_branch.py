"""Whether the hybrid's copy branch pays: the hybrid (the offline 1.5B target in bfloat16 and exact mode, the 0.5B
draft in int8, adaptive up to γ 8, 96 greedy tokens) with and without the lookup's copy riding beside the draft
model's tree, on one prompt per task family, runs alternating. Prints per family and setting the median tokens/s
(prefill included) with the slowest and fastest run, τ (tokens per verify forward), and whether both outputs agree.
Run it alone: the figures are timings.

    python scripts/hybrid_branch.py [--kinds code,summarization,rag,qa] [--repeats 3]
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default="code,summarization,rag,qa")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from specviz.bench.plan import load_prompts
    from specviz.drafters.hybrid import KIND as HYBRID
    from specviz.drafters.registry import decode
    from specviz.events import generated_ids, summarize
    from specviz.models import encode_prompt, load_model
    from specviz.models.exact import set_exact
    from specviz.runtime import quiet_transformers
    from specviz.settings import Settings

    quiet_transformers()
    target = load_model("qwen2.5-coder-1.5b-instruct", "bfloat16")
    draft = load_model("qwen2.5-coder-0.5b-instruct", "int8")
    set_exact(target.model, True)
    settings = Settings(max_new_tokens=96, gamma=8, adaptive=True)
    branches = ("copy", "none")
    for kind, prompt in load_prompts(args.kinds.split(","), 1):
        ids = encode_prompt(target, prompt)
        runs, outputs = {b: [] for b in branches}, set()
        for r in range(args.repeats):
            for branch in branches if r % 2 == 0 else branches[::-1]:
                events = list(decode(target, ids, settings, HYBRID.name, draft, {"hybrid_branch": branch}))
                figures = summarize(events)
                runs[branch].append((figures.new_tokens / figures.total_s, figures.mean_tokens_per_step))
                outputs.add(tuple(generated_ids(events)))
        for branch, got in runs.items():
            tps = sorted(t for t, _ in got)
            tau = statistics.median(t for _, t in got)
            print(
                f"{kind:13s} branch {branch:4s} {statistics.median(tps):6.2f} tok/s ({tps[0]:.2f}-{tps[-1]:.2f}) "
                f"τ {tau:.2f}",
                flush=True,
            )
        print(f"{kind:13s} outputs identical: {len(outputs) == 1}", flush=True)


if __name__ == "__main__":
    main()
