"""The DFlash drafter against plain decoding and the draft model on the offline pair, as a presenter's laptop runs
them: bfloat16 target in exact mode, int8 draft, each drafter at its menu defaults, the app's first code, prose and
math examples. Rounds interleave every drafter on every example (the CPU's speed drifts over minutes), and each cell
is the median of the rounds: tokens/s, speedup over plain in the same round, τ, and whether the output was plain's.

    python scripts/dflash_bench.py [--dflash FOLDER] [--rounds 3] [--max-new-tokens 64]
        [--drafters "draft model,DFlash chain,DFlash tree"] [--examples code,prose,math]
"""

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.bench.measure import measure  # noqa: E402
from specviz.drafters.dflash import KIND as DFLASH  # noqa: E402
from specviz.drafters.registry import kinds  # noqa: E402
from specviz.models import encode_prompt  # noqa: E402
from specviz.runs import open_pair  # noqa: E402
from specviz.runtime import quiet_transformers  # noqa: E402
from specviz.settings import Settings  # noqa: E402

TARGET, DRAFT = "qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct"


def entrants(dflash: str, nodes: int) -> dict[str, tuple]:
    """label -> (drafter kind, its options beyond the menu's defaults)."""
    model_drafter = next(k for k in kinds() if k.needs_draft and not k.listing.lookup)  # the draft model alone
    where = {DFLASH.name: dflash} if dflash else {}
    return {
        "draft model": (model_drafter, {}),
        "DFlash chain": (DFLASH, {**where, "dflash_tree": "chain"}),
        "DFlash tree": (DFLASH, {**where, "dflash_tree": "tree", "dflash_nodes": nodes}),
    }


def settings_for(kind, options: dict, max_new: int):
    """The kind's menu defaults (its γ, adaptive, shape) with `options` over them: (Settings, parsed options)."""
    plain = Settings(max_new_tokens=max_new)
    gamma, adaptive = kind.listing.prefers("gamma", plain.gamma), kind.listing.prefers("adaptive", plain.adaptive)
    return replace(plain, gamma=gamma, adaptive=adaptive), kind.parse({**dict(kind.listing.preferred), **options})


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dflash", default="", help="drafter folder (default: the one shipped for the target)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--drafters", default="draft model,DFlash chain,DFlash tree")
    p.add_argument("--examples", default="code,prose,math")
    p.add_argument("--nodes", type=int, default=16, help="the DFlash tree's node budget")
    p.add_argument("--out", default="", help="also write every run's figures here as JSON")
    args = p.parse_args()
    quiet_transformers()
    torch.set_num_threads(2)
    pair = open_pair(TARGET, "bfloat16", "cpu", DRAFT, "int8")
    target, draft = pair.target, pair.draft
    print(pair.exact, flush=True)
    table = entrants(args.dflash, args.nodes)
    chosen = {name: table[name] for name in args.drafters.split(",")}
    examples = json.loads((ROOT / "assets" / "prompts.json").read_text())
    prompts = {kind: encode_prompt(target, examples[kind][0]) for kind in args.examples.split(",")}
    runs = {(e, n): [] for e in prompts for n in ("plain", *chosen)}
    measure(target, prompts[next(iter(prompts))], Settings(max_new_tokens=8))  # warm-up
    for r in range(args.rounds):
        for example, prompt in prompts.items():
            plain = measure(target, prompt, Settings(max_new_tokens=args.max_new_tokens))
            runs[example, "plain"].append((plain.tps, 1.0, 1.0, True))
            print(f"round {r + 1} {example}: plain {plain.tps:.2f} tok/s", flush=True)
            for name, (kind, options) in chosen.items():
                settings, parsed = settings_for(kind, options, args.max_new_tokens)
                run = measure(target, prompt, settings, kind.name, draft, parsed)
                same = run.ids == plain.ids
                runs[example, name].append((run.tps, run.tps / plain.tps, run.tau, same))
                print(
                    f"round {r + 1} {example}: {name} {run.tps:.2f} tok/s ({run.tps / plain.tps:.2f}x, "
                    f"τ {run.tau:.2f}, {'identical' if same else 'DIFFERS'})",
                    flush=True,
                )
    print("\n| example | drafter | tok/s | speedup | τ | identical |\n|---|---|---|---|---|---|")
    for (example, name), cells in runs.items():
        tps, speedup, tau = (statistics.median(c[i] for c in cells) for i in range(3))
        same = sum(c[3] for c in cells)
        print(f"| {example} | {name} | {tps:.2f} | {speedup:.2f}× | {tau:.2f} | {same}/{len(cells)} |")
    if args.out:
        Path(args.out).write_text(json.dumps({f"{e}/{n}": c for (e, n), c in runs.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
