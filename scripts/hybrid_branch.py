"""Whether the hybrid's copy branch pays: the hybrid (the offline 1.5B target in bfloat16 and exact mode, the 0.5B
draft in int8, adaptive up to γ 8, 96 greedy tokens) with and without the lookup's copy riding beside the draft
model's tree, on one prompt per task family, runs alternating. Prints per family and setting the median tokens/s
(prefill included) with the slowest and fastest run, the median run's τ (tokens per verify forward), and whether
every run wrote the same tokens. Run it alone: the figures are timings.

    python scripts/hybrid_branch.py [--kinds code,summarization,rag,qa] [--repeats 3]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default="code,summarization,rag,qa")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from specviz.bench.measure import measure, typical
    from specviz.bench.plan import load_prompts
    from specviz.drafters.hybrid import KIND as HYBRID
    from specviz.models import encode_prompt
    from specviz.runs import open_pair
    from specviz.runtime import quiet_transformers
    from specviz.settings import Settings

    quiet_transformers()
    pair = open_pair("qwen2.5-coder-1.5b-instruct", "bfloat16", draft="qwen2.5-coder-0.5b-instruct", draft_dtype="int8")
    target, draft = pair.target, pair.draft
    settings = Settings(max_new_tokens=96, gamma=8, adaptive=True)

    def runner(ids: list[int], branch: str, outputs: set):
        def run():
            done = measure(target, ids, settings, HYBRID.name, draft, {"hybrid_branch": branch})
            outputs.add(tuple(done.ids))
            return done

        return run

    for kind, prompt in load_prompts(args.kinds.split(","), 1):
        ids, outputs = encode_prompt(target, prompt), set()
        copy, none = runner(ids, "copy", outputs), runner(ids, "none", outputs)
        both = typical(copy, none, args.repeats)  # runs alternating, each side's median run with its spread
        for branch, kept in (("copy", both.ours), ("none", both.theirs)):
            spread = f"({kept.low:.2f}-{kept.high:.2f})"
            print(f"{kind:13s} branch {branch:4s} {kept.tps:6.2f} tok/s {spread} τ {kept.tau:.2f}", flush=True)
        print(f"{kind:13s} outputs identical: {len(outputs) == 1}", flush=True)


if __name__ == "__main__":
    main()
