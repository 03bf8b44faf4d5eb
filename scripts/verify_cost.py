"""What a verify of k drafted tokens costs the target, exact mode on and off, held to transformers' own forward.

After a prompt of the chosen kind (read once), each cell times one target forward over 1 + k tokens (the root and k
drafts) and rolls the cache back: specviz's cache as a chain and as a tree of two branches, with exact mode on and
off, and transformers' own forward on its DynamicCache (what its prompt lookup and assisted generation verify with).
Every k is timed in a shuffled order within a round, the rounds interleave the cells, and each figure is a median.
A speculative step pays off when its tokens outnumber what this costs in one-token forwards. Run it alone.

    python scripts/verify_cost.py [--kind summarization] [--gammas 1-16] [--rounds 5] [--dtype bfloat16]
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from transformers import DynamicCache  # noqa: E402

from specviz.bench.plan import load_prompts, parse_gammas  # noqa: E402
from specviz.engine.static_lm import open_lm  # noqa: E402
from specviz.engine.tree import build_tree  # noqa: E402
from specviz.errors import InvalidRequest  # noqa: E402
from specviz.models import encode_prompt  # noqa: E402
from specviz.models.kernel_costs import device_name  # noqa: E402
from specviz.runtimes.pair import PairAsk, open_pair  # noqa: E402

CELLS = ("exact chain", "exact tree", "no exact chain", "no exact tree", "transformers")


def two_branches(drafts: list[int]):
    """A tree of len(drafts) nodes: two branches that part at the first node (a lookup's two continuations)."""
    half = (len(drafts) + 1) // 2
    rest = drafts[half:]
    return build_tree([drafts[:half], [drafts[0] + 1, *rest[:-1]] if rest else []])


class SpecvizSide:
    """specviz's cache after the prompt; a forward over the root and k drafts, then rolled back."""

    def __init__(self, pair, prompt: list[int], most: int):
        self.pair, self.lm = pair, open_lm(pair.target.model, len(prompt) + most + 2)
        self.lm.read_prompt(prompt[:-1])
        self.base, self.root = self.lm.length, prompt[-1]

    def seconds(self, drafts: list[int], exact: bool, tree: bool) -> float:
        self.pair.choose_exact(exact)
        began = time.perf_counter()
        if tree and len(drafts) > 1:
            self.lm.extend_tree(self.root, two_branches(drafts))
        else:
            self.lm.extend(torch.tensor([self.root, *drafts]))
        took = time.perf_counter() - began
        self.lm.truncate(self.base)
        return took


class TransformersSide:
    """transformers' DynamicCache after the prompt; its model's own forward over the root and k drafts, cropped."""

    def __init__(self, pair, prompt: list[int]):
        self.pair, self.model = pair, pair.target.model
        self.cache = DynamicCache(config=self.model.config)
        with pair.without_exact(), torch.inference_mode():
            self.model(input_ids=torch.tensor([prompt[:-1]]), past_key_values=self.cache, use_cache=True)
        self.base, self.root = len(prompt) - 1, prompt[-1]

    def seconds(self, drafts: list[int]) -> float:
        ids = torch.tensor([[self.root, *drafts]])
        with self.pair.without_exact(), torch.inference_mode():
            began = time.perf_counter()
            self.model(input_ids=ids, past_key_values=self.cache, use_cache=True)
            took = time.perf_counter() - began
        self.cache.crop(-(1 + len(drafts)))  # this transformers takes the count of entries to drop
        return took


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--kind", default="summarization")
    p.add_argument("--gammas", default="1-16", help="the draft lengths k, e.g. 1-16 or 2,4,8")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    try:  # before a model loads: a bad list is a one-line error
        ks = sorted({0, *parse_gammas(args.gammas)})
    except InvalidRequest as exc:
        p.error(str(exc))
    pair = open_pair(PairAsk(args.target, runtime="transformers", dtype=args.dtype, device="cpu"))
    print(f"{device_name(pair.target.device)}, {torch.get_num_threads()} threads, {args.target} {args.dtype}")
    print(f"exact mode here: {pair.choose_exact(True)}")
    prompt = encode_prompt(pair.target, load_prompts([args.kind], 1)[0][1])
    drafts = (prompt * 2)[100 : 100 + max(ks)]  # real tokens of the prompt, as a lookup would copy them
    spec, hf = SpecvizSide(pair, prompt, max(ks)), TransformersSide(pair, prompt)
    timed = {cell: {k: [] for k in ks} for cell in CELLS}
    shuffle = random.Random(0)
    for warm in (True, *(False,) * args.rounds):
        for k in shuffle.sample(ks, len(ks)):
            row = drafts[:k]
            for cell in shuffle.sample(CELLS, len(CELLS)):
                if cell == "transformers":
                    took = hf.seconds(row)
                else:
                    took = spec.seconds(row, exact=cell.startswith("exact"), tree=cell.endswith("tree"))
                if not warm:
                    timed[cell][k].append(took)
    pair.choose_exact(True)
    ms = {cell: {k: 1000 * statistics.median(v) for k, v in by_k.items()} for cell, by_k in timed.items()}
    print(f"{args.kind} prompt, {len(prompt)} tokens; a forward over the root and k drafts, medians of {args.rounds}")
    print("| k | " + " | ".join(f"{c} ms (÷ its k=0)" for c in CELLS) + " |")
    print("|---|" + "---|" * len(CELLS))
    for k in ks:
        cells = " | ".join(f"{ms[c][k]:.0f} ({ms[c][k] / ms[c][0]:.2f})" for c in CELLS)
        print(f"| {k} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
