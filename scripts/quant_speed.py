"""How fast and how faithful a quantised draft is on this CPU: milliseconds per 1-token forward with a KV cache
(median), and how often its greedy token equals the same model's bf16 greedy token (teacher-forced on a code and a
prose text), for each way of quantising the Linear layers that is installed.

    python scripts/quant_speed.py [--model qwen2.5-coder-0.5b-instruct] [--tokens 48]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from specviz.engine.cached_lm import CachedLM  # noqa: E402
from specviz.models import encode_prompt, load_model  # noqa: E402
from specviz.models.quantize import int8_dynamic  # noqa: E402
from specviz.runtime import quiet_transformers  # noqa: E402

TEXTS = (
    "Write a Python function `merge_intervals(intervals)` that merges overlapping intervals.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
)


def ms_per_token(model, prompt_ids, tokens: int) -> float:
    lm = CachedLM(model)
    lm.extend(torch.tensor(prompt_ids[:-1]), last_only=True)
    feed, times = torch.tensor(prompt_ids[-1:]), []
    for _ in range(tokens):
        began = time.perf_counter()
        logits = lm.extend(feed, last_only=True)
        times.append(time.perf_counter() - began)
        feed = logits.argmax(-1)
    return statistics.median(times[2:]) * 1000


@torch.inference_mode()
def greedy_agreement(model, reference, texts_ids) -> float:
    """Teacher-forced: the share of positions where both models' argmax agree."""
    same = total = 0
    for ids in texts_ids:
        a = model(input_ids=torch.tensor([ids])).logits[0].argmax(-1)
        b = reference(input_ids=torch.tensor([ids])).logits[0].argmax(-1)
        same, total = same + int((a == b).sum()), total + len(ids)
    return same / total


def torchao(config: str):
    def apply(model):
        import torchao.quantization as ao  # an optional library, measured when installed

        made = {"int8-dynamic": ao.Int8DynamicActivationInt8WeightConfig, "int8-weight": ao.Int8WeightOnlyConfig}[
            config
        ]()
        model = model.float()
        ao.quantize_(model, made)
        return model

    return apply


VARIANTS = {  # float32 model -> quantised model
    "float32": lambda m: m,
    "int8 (specviz: per-channel, down_proj in bf16)": int8_dynamic,
    "int8 per-channel, every Linear": lambda m: int8_dynamic(m, keep=()),
    "int8 per-tensor, every Linear": lambda m: int8_dynamic(m, keep=(), per_channel=False),
    "torchao int8 dynamic": torchao("int8-dynamic"),
    "torchao int8 weight-only": torchao("int8-weight"),
}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    p.add_argument("--tokens", type=int, default=48)
    args = p.parse_args()
    quiet_transformers()
    torch.set_num_threads(2)
    reference = load_model(args.model, "bfloat16", "cpu")
    prompt = encode_prompt(reference, TEXTS[0])
    texts = []
    for text in TEXTS:  # the bf16 model's own continuations, to score agreement on
        ids = encode_prompt(reference, text)
        with torch.inference_mode():
            out = reference.model.generate(torch.tensor([ids]), max_new_tokens=64, do_sample=False)
        texts.append(out[0].tolist())
    print(f"{args.model}: bfloat16 {ms_per_token(reference.model, prompt, args.tokens):.1f} ms/token", flush=True)
    for name, make in VARIANTS.items():
        try:
            model = make(load_model(args.model, "float32", "cpu").model).eval()
        except Exception as exc:  # a library that is not installed, or that this CPU cannot run
            print(f"{name}: not available ({type(exc).__name__}: {str(exc)[:100]})", flush=True)
            continue
        ms, agree = ms_per_token(model, prompt, args.tokens), greedy_agreement(model, reference.model, texts)
        print(f"{name}: {ms:.1f} ms/token, greedy agreement with bfloat16 {agree:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
