"""The Qwen3-4B preset's drafters on a GPU, by their step costs: plain decoding, DFlash (5 layers, block 16), an
EAGLE-3 head and the Qwen3-0.6B draft model, each through specviz's own loop at the preset's shapes.

    python scripts/gpu_dflash.py [--tokens 128] [--out dflash-gpu.json] [--device cuda]

The models are built from their configs (assets/model-configs) with random weights, since the timing of a forward
depends on the shapes, not the values. Random weights accept nothing, so every step writes one token and costs what
a step of that drafter costs; a real drafter that writes τ tokens a step at that cost runs at
τ · (plain seconds per token) / (seconds per step) times plain decoding. The script prints that prediction at the
acceptance length the DFlash paper reports for this target, and the τ each drafter needs to reach 3× plain.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import torch  # noqa: E402
from dflash_cost import drafter_for  # noqa: E402
from gpu_fast_path import fast_path, random_model  # noqa: E402

from specviz.bench.measure import measure  # noqa: E402
from specviz.drafters.dflash import KIND as DFLASH  # noqa: E402
from specviz.drafters.eagle import KIND as EAGLE  # noqa: E402
from specviz.drafters.eagle.eagle_checkpoint import eagle3_layers, head_config  # noqa: E402
from specviz.drafters.eagle.head import EagleHead  # noqa: E402
from specviz.drafters.registry import kinds  # noqa: E402
from specviz.engine.fast_path import try_fast_path  # noqa: E402
from specviz.settings import Settings  # noqa: E402

PAPER_TAU = 6.54  # DFlash on Qwen3-4B, temperature 0, block 16: the paper's mean acceptance length
MASK_ID = 151669  # the first id past Qwen3's tokenizer, a row of its embedding
EAGLE3_VOCAB = 32000  # the draft vocabulary of the published EAGLE-3 heads


def eagle3_head(target):
    config = head_config({"model_type": "llama"}, target.model.config, "eagle3")
    head = EagleHead(config, "eagle3", target.model, draft_vocab=EAGLE3_VOCAB, family="llama")
    head = head.to(device=target.device, dtype=torch.bfloat16).eval()
    return head, eagle3_layers(target.model.config.num_hidden_layers)


def runs(target, prompt, settings, kind="none", draft=None, options=None, repeats=3):
    """`repeats` runs; each one's decode seconds per step and per token, and its τ."""
    out = []
    for _ in range(repeats):
        r = measure(target, prompt, settings, kind, draft, options)
        steps = len(r.ids) / (r.tau or 1.0)
        out.append({"s_per_step": r.decode_s / steps, "tau": r.tau or 1.0, "tokens": len(r.ids)})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--target", default="qwen3-4b")
    p.add_argument("--draft", default="qwen3-0.6b")
    p.add_argument("--modes", default="graphs,dynamic", help="fast paths to time (gpu_fast_path.py's names)")
    p.add_argument("--out", default="dflash-gpu.json")
    p.add_argument("--device", default="cuda", help="cpu only to check the script itself")
    args = p.parse_args()
    target, draft = random_model(args.target, args.device), random_model(args.draft, args.device)
    prompt = torch.randint(0, 150000, (200,), generator=torch.Generator().manual_seed(0)).tolist()
    dflash, eagle = drafter_for(target.model, 5, 16, MASK_ID), eagle3_head(target)
    model_drafter = next(k for k in kinds() if k.needs_draft and not k.listing.lookup)  # the draft model alone
    drafters = {  # label: (settings, kind, draft model, the kind's options)
        "DFlash, block 16": (Settings(max_new_tokens=args.tokens, gamma=15), DFLASH, None, DFLASH.options(dflash)),
        "EAGLE-3, chain of 7": (
            Settings(max_new_tokens=args.tokens, gamma=7),
            EAGLE,
            None,
            EAGLE.options(eagle, eagle_tree="chain"),
        ),
        "EAGLE-3, tree of 32": (
            Settings(max_new_tokens=args.tokens, gamma=6),
            EAGLE,
            None,
            EAGLE.options(eagle, eagle_nodes=32),
        ),
        "Qwen3-0.6B draft, γ 4": (Settings(max_new_tokens=args.tokens, gamma=4), model_drafter, draft, None),
    }
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    report = {"device": name, "torch": torch.__version__, "tokens": args.tokens, "paper_tau": PAPER_TAU, "modes": {}}
    print(f"{name}, torch {torch.__version__}: {args.target} target, prompt 200 tokens, {args.tokens} new", flush=True)
    for mode in args.modes.split(","):
        fast_path((target, draft), mode)
        if mode == "graphs":  # the app's warm-up probe: the static cache, then every step width's graph
            for m in (target, draft):
                began = time.perf_counter()
                line = try_fast_path(m.model, m.name)
                report[f"probe {m.name}"] = {"s": time.perf_counter() - began, "fell_back": line}
                print(f"fast-path probe {m.name}: {line or 'held'} in {time.perf_counter() - began:.1f} s", flush=True)
        measure(target, prompt, Settings(max_new_tokens=16))  # warm up: caches and graphs are kept with the model
        plain = statistics.median(r["s_per_step"] for r in runs(target, prompt, Settings(max_new_tokens=args.tokens)))
        row = {"plain_tps": 1 / plain, "drafters": {}}
        print(f"[{mode}] plain {1 / plain:.1f} tok/s ({plain * 1000:.2f} ms a token)", flush=True)
        for label, (settings, kind, model, options) in drafters.items():
            measure(target, prompt, Settings(max_new_tokens=16, gamma=settings.gamma), kind.name, model, options)
            found = runs(target, prompt, settings, kind.name, model, options)
            step = statistics.median(r["s_per_step"] for r in found)
            tau = statistics.median(r["tau"] for r in found)
            row["drafters"][label] = {"s_per_step": step, "step_over_plain": step / plain, "tau_random": tau}
            line = f"  {label}: a step {step * 1000:.2f} ms = {step / plain:.2f} plain tokens"
            line += f" (random weights: τ {tau:.2f})"
            line += f"; 3× plain needs τ {3 * step / plain:.2f}"
            if kind is DFLASH:
                row["drafters"][label]["predicted_at_paper_tau"] = PAPER_TAU * plain / step
                line += f"; at the paper's τ {PAPER_TAU}: {PAPER_TAU * plain / step:.2f}× plain"
            print(line, flush=True)
        report["modes"][mode] = row
    Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
