"""The README's many-requests figure, batched plain against transformers; run by anyone reproducing it.

Batched plain decoding against transformers' own batched `generate`, the same prompts decoded together.

    python scripts/concurrency_baseline.py [--rows 8] [--tokens 64] [--rounds 3] [--dtype bfloat16] [--no-exact]

The offline pair's target (qwen2.5-coder-1.5b-instruct) on this machine, the code examples of assets/prompts.json
(row r decodes example r, again from the first when they run out). transformers decodes the rows left-padded, greedy,
with its own kernels; specviz's plain lane decodes them with engine/loop.generate_rows, in exact mode where it holds.
The two take turns, `rounds` times; printed: each round's total tokens/s, the medians and their ratio, and whether
every row wrote what transformers wrote for it.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.drafters.registry import NO_DRAFTER, build_row_drafting  # noqa: E402
from specviz.engine.loop import generate_rows, new_generator  # noqa: E402
from specviz.models import encode_prompt  # noqa: E402
from specviz.runtimes.pair import PairAsk, open_pair  # noqa: E402
from specviz.settings import Settings  # noqa: E402


def transformers_batch(target, prompts: list[list[int]], tokens: int) -> tuple[list[list[int]], float]:
    """transformers' generate on the rows left-padded: each row's new tokens (up to EOS) and the seconds taken."""
    pad = target.tokenizer.pad_token_id
    pad = target.tokenizer.eos_token_id if pad is None else pad
    width = max(map(len, prompts))
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    began = time.perf_counter()
    out = target.model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=tokens,
        min_new_tokens=tokens,  # every row writes the budget, as specviz's rows do unless they end
        do_sample=False,
        pad_token_id=pad,
    )
    seconds = time.perf_counter() - began
    return [row[width:].tolist() for row in out], seconds


def specviz_batch(target, prompts: list[list[int]], tokens: int) -> tuple[list[list[int]], float]:
    """specviz's plain lane: every row together, one target forward a step."""
    settings = Settings(max_new_tokens=tokens)
    generators = [new_generator(target.device, r) for r in range(len(prompts))]
    drafting = build_row_drafting(NO_DRAFTER, settings, generators, target, None)
    rows = [[] for _ in prompts]
    began = time.perf_counter()
    for row, event in generate_rows(target, prompts, settings, drafting, generators, None, False):
        rows[row].extend(event.tokens)
    return rows, time.perf_counter() - began


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--no-exact", action="store_true")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    pair = open_pair(PairAsk(args.target, runtime="transformers", dtype=args.dtype))
    target = pair.target
    mode = pair.choose_exact(not args.no_exact)
    texts = json.loads((ROOT / "assets" / "prompts.json").read_text())["code"]
    prompts = [encode_prompt(target, texts[r % len(texts)]) for r in range(args.rows)]
    print(f"{args.target}, {args.dtype}, {args.rows} rows x {args.tokens} new tokens; {mode}", flush=True)
    with torch.inference_mode():
        with pair.without_exact():  # warm up both
            transformers_batch(target, prompts[:1], 4)
        specviz_batch(target, prompts[:1], 4)
        found = {"transformers": [], "specviz": []}
        same = []
        for turn in range(args.rounds):
            with pair.without_exact():  # transformers runs the model's own kernels
                theirs, t_s = transformers_batch(target, prompts, args.tokens)
            ours, s_s = specviz_batch(target, prompts, args.tokens)
            made = sum(map(len, theirs)), sum(map(len, ours))
            found["transformers"].append(made[0] / t_s)
            found["specviz"].append(made[1] / s_s)
            same.append(sum(a == b[: len(a)] for a, b in zip(ours, theirs)))
            print(
                f"round {turn + 1}: transformers {found['transformers'][-1]:6.1f} tok/s, "
                f"specviz plain {found['specviz'][-1]:6.1f} tok/s; rows alike {same[-1]}/{args.rows}",
                flush=True,
            )
    theirs, ours = statistics.median(found["transformers"]), statistics.median(found["specviz"])
    print(f"median: transformers {theirs:.1f} tok/s, specviz plain {ours:.1f} tok/s: {ours / theirs:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({**vars(args), "mode": mode, **found, "rows_alike": same}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
