"""How fast specviz reads a long prompt, held to transformers' own generate on the same model and precision.

For each prompt length (tokens of a real text, repeated to length): transformers' `generate` with one new token (its
prefill and one greedy pick), and specviz's plain decoding of one token with exact mode on and off (its prefill, read
off the first event, and the whole call). Greedy, bfloat16 by default; the cells interleaved round by round, each
the median of --rounds. Run it alone: single runs on a 2-core CPU move 10-30%.

    python scripts/prefill_bench.py [--lengths 256,1024,4096] [--rounds 3] [--dtype bfloat16]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from specviz.bench.plan import load_prompts  # noqa: E402
from specviz.models import encode_prompt  # noqa: E402
from specviz.models.kernel_costs import device_name  # noqa: E402
from specviz.runs import generate_named  # noqa: E402
from specviz.runtimes.pair import PairAsk, open_pair  # noqa: E402
from specviz.settings import Settings  # noqa: E402


def prompt_of(target, length: int) -> list[int]:
    """`length` tokens: the retrieval example's prompt, repeated as often as it takes, cut to length."""
    text = encode_prompt(target, load_prompts(["rag"], 1)[0][1])
    return (text * (length // len(text) + 1))[:length]


def transformers_s(model, ids: list[int]) -> float:
    """Seconds of transformers' generate for one new token: its prefill of the prompt and one greedy pick."""
    x = torch.tensor([ids])
    began = time.perf_counter()
    with torch.inference_mode():
        model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=1, min_new_tokens=1, do_sample=False)
    return time.perf_counter() - began


def specviz_s(pair, ids: list[int], exact: bool) -> tuple[float, float]:
    """(prefill seconds, the whole call's seconds) of specviz's plain decoding of one token."""
    pair.choose_exact(exact)
    target = pair.target
    began = time.perf_counter()
    events = list(generate_named(target, ids, Settings(max_new_tokens=1), explain=False))
    return events[0].prefill_s, time.perf_counter() - began


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--lengths", default="256,1024,4096")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    pair = open_pair(PairAsk(args.target, runtime="transformers", dtype=args.dtype, device="cpu"))
    target = pair.target
    print(f"{device_name(target.device)}, {torch.get_num_threads()} threads, {args.target} {args.dtype}")
    print(f"exact mode here: {pair.choose_exact(True)}")
    lengths = [int(n) for n in args.lengths.split(",")]
    cells = {
        n: {"transformers": [], "exact": [], "exact call": [], "no exact": [], "no exact call": []} for n in lengths
    }
    for n in lengths:  # warm: every shape once before anything is timed
        ids = prompt_of(target, n)
        transformers_s(target.model, ids[:64])
        specviz_s(pair, ids[:64], True)
    for _ in range(args.rounds):
        for n in lengths:
            ids = prompt_of(target, n)
            cells[n]["transformers"].append(transformers_s(target.model, ids))
            for exact in (True, False):
                prefill, call = specviz_s(pair, ids, exact)
                name = "exact" if exact else "no exact"
                cells[n][name].append(prefill)
                cells[n][name + " call"].append(call)
    pair.choose_exact(True)
    print(
        "| prompt tokens | transformers generate (1 token) s | specviz exact: prefill s (call s) "
        "| prefill ÷ transformers | specviz exact off: prefill s (call s) | prefill ÷ transformers |"
    )
    print("|---|---|---|---|---|---|")
    for n, runs in cells.items():
        m = {k: statistics.median(v) for k, v in runs.items()}
        t = m["transformers"]
        print(
            f"| {n} | {t:.2f} | {m['exact']:.2f} ({m['exact call']:.2f}) | {m['exact'] / t:.2f} "
            f"| {m['no exact']:.2f} ({m['no exact call']:.2f}) | {m['no exact'] / t:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
