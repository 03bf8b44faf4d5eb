"""How fast train-dflash learns from its texts, in labels per second: the same drafter (1 layer, block 8) on the
offline Qwen2.5-Coder 1.5B target (bfloat16, features computed once), 16 blocks a step, three ways taking turns:
one block a pass with the full LM head (how training ran before), every block of a text in one pass (a
block-sparse mask), and that with the loss over a shortlist of 32,768 ids:

    python scripts/dflash_train_speed.py          # about 2 minutes on 2 cores; run it alone

Six steps are timed after the first of each run (the features and the first step are not counted)."""

import inspect
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.drafters.dflash.dflash_checkpoint import build_draft, config_for, spaced_layers, spare_row  # noqa: E402
from specviz.models import load_model  # noqa: E402
from specviz.runtime import quiet_transformers  # noqa: E402
from specviz.training.configs import DFlashTraining  # noqa: E402
from specviz.training.dflash import train_dflash  # noqa: E402

WAYS = {"one block a pass": (1, 0), "a text's blocks in one pass": (16, 0), "and a shortlist of 32,768": (16, 32768)}


def main(repeats: int = 3) -> int:
    quiet_transformers()
    torch.set_num_threads(2)
    base = load_model("qwen2.5-coder-1.5b-instruct", "bfloat16", "cpu")
    config = base.model.config
    mask = spare_row(base.tokenizer, base.model.get_input_embeddings().weight.shape[0])
    layers = spaced_layers(config.num_hidden_layers, 1)
    saved = config_for(config, layers=1, block_size=8, mask_id=mask, target_layers=layers, intermediate=0)
    ids = base.tokenizer.encode(Path(inspect.getsourcefile(random)).read_text())  # local text, as --local-text reads
    texts = [ids[i * 300 : (i + 1) * 300] for i in range(6)]
    speeds = {name: [] for name in WAYS}
    for _ in range(repeats):
        for name, (per_text, shortlist) in WAYS.items():
            torch.manual_seed(0)
            draft = build_draft(saved, base.model).float()
            stamps = []
            training = DFlashTraining(steps=7, train_batch=16, anchors_per_text=per_text, shortlist=shortlist, seed=1)
            stamp = lambda step, loss, at=stamps: at.append(time.perf_counter())  # noqa: E731
            train_dflash(draft, base.model, texts, training, log=stamp)
            speeds[name].append(6 * 16 * 7 / (stamps[-1] - stamps[0]))
            print(f"{name}: {speeds[name][-1]:.1f} labels/s", flush=True)
    first = statistics.median(speeds["one block a pass"])
    for name, runs in speeds.items():
        print(f"{name:<28} median {statistics.median(runs):6.1f} labels/s ({statistics.median(runs) / first:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
