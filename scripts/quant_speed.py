"""What the int8 target costs in quality and buys in speed on this CPU: for each way of running the model, how often its
greedy token equals the bfloat16 model's greedy token over the example prompts (teacher-forced on the bfloat16
model's own greedy continuations), and milliseconds per forward of 1, 5 and 9 tokens with a KV cache (the minimum of
--repeats).

    python scripts/quant_speed.py [--model qwen2.5-coder-1.5b-instruct] [--tokens 48] [--prompts FILE]

Run it alone.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from specviz.engine.cached_lm import CachedLM  # noqa: E402
from specviz.models import encode_prompt, load_model  # noqa: E402
from specviz.models.quantize import int8_rows  # noqa: E402
from specviz.runtime import quiet_transformers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@torch.inference_mode()
def continuations(loaded, prompts: list[list[int]], tokens: int) -> list[list[int]]:
    """Each prompt followed by the model's own greedy tokens."""
    out = []
    for ids in prompts:
        x = torch.tensor([ids])
        made = loaded.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=tokens, do_sample=False)
        out.append(made[0].tolist())
    return out


@torch.inference_mode()
def agreement(model, prompts: list[list[int]], texts: list[list[int]]) -> float:
    same = total = 0
    for ids, text in zip(prompts, texts):
        guess = model(input_ids=torch.tensor([text])).logits[0, len(ids) - 1 : -1].argmax(-1)
        same, total = same + int((guess == torch.tensor(text[len(ids) :])).sum()), total + len(text) - len(ids)
    return same / total


@torch.inference_mode()
def forward_ms(model, widths=(1, 5, 9), repeats: int = 5) -> list[float]:
    out = []
    for width in widths:
        best = float("inf")
        for _ in range(repeats + 1):
            lm = CachedLM(model)
            lm.extend(torch.arange(100, 160), last_only=True)
            began = time.perf_counter()
            lm.extend(torch.arange(200, 200 + width))
            best = min(best, time.perf_counter() - began)
        out.append(best * 1000)
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--prompts", default=str(ROOT / "docs" / "examples" / "ten-prompts.txt"))
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    quiet_transformers()
    reference = load_model(args.model, "bfloat16", "cpu")
    texts = [t.strip() for t in Path(args.prompts).read_text().split("\n\n") if t.strip()]
    prompts = [encode_prompt(reference, t) for t in texts]
    began = time.perf_counter()
    greedy = continuations(reference, prompts, args.tokens)
    took = time.perf_counter() - began
    print(f"{args.model}: bfloat16 greedy continuations of {len(prompts)} prompts in {took:.0f} s")
    variants = {
        "bfloat16 (the reference)": lambda: reference.model,
        "float32": lambda: load_model(args.model, "float32", "cpu").model,
        "int8 by rows, smoothed (specviz's int8)": lambda: load_model(args.model, "int8", "cpu").model,
        "int8 by rows, not smoothed": lambda: int8_rows(load_model(args.model, "float32", "cpu").model),
    }
    print("\n| model | agreement with bfloat16 greedy | forward ms, 1 / 5 / 9 tokens (× one token) |\n|---|---|---|")
    for name, make in variants.items():
        model = make()
        ms = forward_ms(model, repeats=args.repeats)
        shown = " / ".join(f"{m:.0f}" for m in ms) + f" ({ms[1] / ms[0]:.2f}× / {ms[2] / ms[0]:.2f}×)"
        print(f"| {name} | {agreement(model, prompts, greedy):.1%} | {shown} |", flush=True)
        del model
    return 0


if __name__ == "__main__":
    sys.exit(main())
