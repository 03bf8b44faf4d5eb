"""How often a DFlash drafter's block holds, read teacher-forced: for blocks anchored every few tokens of a text, each
position's argmax against the target's own next tokens, and the chance that a chain holds up to each depth (its τ is
1 + their sum). Run on some of the drafter's training texts and on the target's answers to the app's first code,
prose and math examples (none a training prompt), it tells an underfit drafter (both low) from an overfit one
(training texts high, the examples low) before any race.

    python scripts/dflash_accuracy.py --dflash FOLDER [--texts texts.json] [--train-texts 0,50,100]
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.drafters.dflash.dflash_checkpoint import load_dflash  # noqa: E402
from specviz.models import encode_prompt, load_model  # noqa: E402
from specviz.runtime import quiet_transformers  # noqa: E402
from specviz.training.dflash import read_text  # noqa: E402

TARGET = "qwen2.5-coder-1.5b-instruct"


@torch.no_grad()
def held(base, draft, tokens: list[int], start: int, every: int = 3) -> tuple[list[float], list[float]]:
    """(each position's accuracy, the chance a chain holds through each depth) over blocks anchored from `start`."""
    features, _ = read_text(base.model, tokens, draft.target_layers)
    anchors = list(range(start, len(tokens) - draft.block_size, every))
    guess = draft.fill_blocks(features, torch.tensor(tokens), anchors).argmax(-1)
    labels = torch.tensor(tokens)[torch.tensor(anchors)[:, None] + torch.arange(1, draft.block_size)]
    hit = (guess == labels).float()
    return hit.mean(0).tolist(), hit.cumprod(dim=1).mean(0).tolist()


def show(name: str, result) -> None:
    positions, chain = result
    row = " ".join(f"{a:.2f}" for a in positions)
    print(f"{name:<22} by position {row} | chain τ {1 + sum(chain):.2f}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dflash", required=True, help="the drafter folder")
    p.add_argument("--texts", default="", help="the training texts (train-dflash --texts)")
    p.add_argument("--train-texts", default="0,50,100", help="which of them to read")
    p.add_argument("--tokens", type=int, default=64, help="length of the target's answer to each example")
    args = p.parse_args()
    quiet_transformers()
    base = load_model(TARGET, "bfloat16", "cpu")
    draft = load_dflash(Path(args.dflash), base)
    if args.texts:
        texts = json.loads(Path(args.texts).read_text())
        for i in (int(i) for i in args.train_texts.split(",")):
            show(f"training text {i}", held(base, draft, texts[i]["ids"], texts[i]["answer_from"]))
    examples = json.loads((ROOT / "assets" / "prompts.json").read_text())
    for kind in ("code", "prose", "math"):
        ids = encode_prompt(base, examples[kind][0])
        prompt = torch.tensor([ids])
        answer = base.model.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=args.tokens, do_sample=False
        )
        show(f"{kind} example", held(base, draft, answer[0].tolist(), len(ids)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
