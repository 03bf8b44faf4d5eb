"""The GPU fast path's roofline and speedups per cache path; the team runs it when a GPU is lent.

GPU fast path figures: plain decoding against the bandwidth roofline, and speculative speedups, for the
dynamic cache, the static cache run eagerly, the static cache with CUDA graphs, and the same with its forward
torch.compile'd first (`compiled`, what SPECVIZ_COMPILE=1 asks for).

    python scripts/gpu_fast_path.py [--tokens 256] [--out gpu.json]

Models are the Qwen2.5-Coder 1.5B target and 0.5B draft built from their configs (assets/model-configs) with
random weights: the timing of a forward depends on the shapes, not the values. Random weights agree on nothing,
so acceptance comes from the oracle drafter (set α, no drafting cost) and the draft model contributes its
measured cost per drafted token; the speedup a real pair at α would get is then the paper's formula with those
measured costs, E(α, γ) / (γ·c + V(γ+1)/V(1)), printed beside the oracle's measured one.
Roofline: tokens/s = memory bandwidth (a device-to-device copy, bytes read + written) ÷ the target's weight bytes.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

from specviz.analysis.theory import expected_tokens_per_step, interpolate  # noqa: E402
from specviz.bench.costs import relative_forward_costs  # noqa: E402
from specviz.bench.measure import Run, measure  # noqa: E402
from specviz.drafters.registry import kinds  # noqa: E402
from specviz.engine.fast_path import try_fast_path  # noqa: E402
from specviz.models.device import steady_attention  # noqa: E402
from specviz.runtimes.transformers_runtime import TransformersModel  # noqa: E402
from specviz.settings import Settings  # noqa: E402

CONFIGS = ROOT / "assets" / "model-configs"


# Timing needs no text: the target and the draft share this stand-in tokenizer, so the draft model drafts in the
# target's own ids (the two Qwen2.5-Coder models have one vocabulary).
NO_TEXT = SimpleNamespace(eos_token_id=None, get_vocab=lambda: {"<id>": 0})


def random_model(name: str, device: str, layers: int | None = None, dtype: str = "bfloat16") -> TransformersModel:
    """A model of `name`'s shapes with random weights; `layers` keeps only that many (to check a script on a CPU)."""
    config = AutoConfig.from_pretrained(CONFIGS / f"{name}.json")
    if layers:
        config.num_hidden_layers = layers
        if getattr(config, "layer_types", None):
            config.layer_types = config.layer_types[:layers]
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype)).eval()
    model.generation_config.eos_token_id = None  # random weights: never stop early
    steady_attention(torch.device(device))  # as load_model does
    return TransformersModel(name=name, model=model, tokenizer=NO_TEXT, device=torch.device(device))


def copy_bandwidth(device: str, gib: float = 2.0, repeats: int = 10) -> float:
    """Bytes per second of a device-to-device copy, counting bytes read and written."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    x = torch.empty(int(gib * 2**30), dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    y.copy_(x)
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        y.copy_(x)
    sync()
    return 2 * x.numel() * repeats / (time.perf_counter() - start)


def fast_path(models, mode: str) -> None:
    """dynamic: DynamicCache, eager; static: StaticCache, eager; graphs: StaticCache, CUDA graphs; compiled: the
    same, the forward compiled first (at the warm-up, which says in one line where it fails)."""
    os.environ["SPECVIZ_CUDA_GRAPHS"] = "1" if mode in ("graphs", "compiled") else "0"
    os.environ["SPECVIZ_COMPILE"] = "1" if mode == "compiled" else "0"
    for m in models:
        m.model.specviz_static = mode != "dynamic"
        if mode == "compiled":
            began = time.perf_counter()
            said = try_fast_path(m.model, m.name)
            print(f"[compiled] {m.name}: warm-up {time.perf_counter() - began:.0f} s {said}", flush=True)


def best(run, repeats: int = 3) -> Run:
    return min((run() for _ in range(repeats)), key=lambda r: r.seconds)


def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--gammas", default="2,4,6")
    p.add_argument("--alphas", default="0.8,0.9")
    p.add_argument("--modes", default="dynamic,static,graphs,compiled")
    p.add_argument(
        "--widths",
        default="",
        help="more verify widths to time V(k)/V(1) at, beyond γ + 1 (the hybrid's tree of 12 with its copy branch "
        "of γ 8 verifies 21)",
    )
    p.add_argument("--out", default="gpu.json")
    p.add_argument("--device", default="cuda", help="cpu only to check the script itself (no graphs there)")
    return p.parse_args()


def main() -> int:
    args = arguments()
    gammas = [int(g) for g in args.gammas.split(",")]
    widths = sorted({*range(1, max(gammas) + 2), *(int(k) for k in args.widths.split(",") if k)})
    alphas = [float(a) for a in args.alphas.split(",")]
    model_drafter = next(
        k for k in kinds() if k.needs_draft and not k.listing.lookup
    )  # drafts with the draft model alone
    set_alpha = next(k for k in kinds() if k.listing.sets_alpha)  # accepted at a set rate, at no drafting cost
    target, draft = (random_model(f"qwen2.5-coder-{size}-instruct", args.device) for size in ("1.5b", "0.5b"))
    prompt = torch.randint(0, 150000, (64,), generator=torch.Generator().manual_seed(0)).tolist()
    weight_bytes = sum(t.numel() * t.element_size() for t in target.model.parameters())
    bandwidth = copy_bandwidth(args.device)
    roofline = bandwidth / weight_bytes
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    report = {
        "device": name,
        "torch": torch.__version__,
        "tokens": args.tokens,
        "weight_GB": weight_bytes / 1e9,
        "bandwidth_TBps": bandwidth / 1e12,
        "roofline_tps": roofline,
        "modes": {},
    }
    print(
        f"{report['device']}: copy bandwidth {bandwidth / 1e12:.2f} TB/s, target weights {weight_bytes / 1e9:.2f} GB, "
        f"roofline {roofline:.0f} tok/s",
        flush=True,
    )
    plain_settings = Settings(max_new_tokens=args.tokens)
    for mode in args.modes.split(","):
        fast_path((target, draft), mode)
        measure(target, prompt, Settings(max_new_tokens=16))  # warm up: caches and graphs are kept with the model
        plain = best(lambda: measure(target, prompt, plain_settings))
        reference = plain.ids
        v1 = plain.decode_s / len(plain.ids)
        costs = relative_forward_costs(target, prompt + reference[: args.tokens // 2], widths)
        drafting = Settings(max_new_tokens=64, gamma=max(gammas))
        drafted = best(lambda s=drafting: measure(target, prompt, s, model_drafter.name, draft))
        proposed = sum(len(e.proposed) for e in drafted.events)
        c = sum(e.draft_s for e in drafted.events) / proposed / v1
        row = {
            "plain_tps": len(reference) / plain.decode_s,
            "of_roofline": 1 / v1 / roofline,
            "draft_cost_c": c,
            "verify_costs": costs,
            set_alpha.name: {},
            "formula": {},
        }
        print(
            f"[{mode}] plain {row['plain_tps']:.1f} tok/s decode ({row['of_roofline']:.0%} of roofline); "
            f"draft cost c = {c:.3f}; V(k)/V(1): " + ", ".join(f"k={k} {costs[k]:.2f}" for k in widths[1:]),
            flush=True,
        )
        for alpha in alphas:
            for gamma in gammas:
                opts = {"reference": reference, "alpha": alpha}
                settings = Settings(max_new_tokens=args.tokens, gamma=gamma)
                run = best(lambda s=settings, o=opts: measure(target, prompt, s, set_alpha.name, None, o))
                oracle = plain.decode_s / run.decode_s * len(run.ids) / len(reference)
                formula = expected_tokens_per_step(alpha, gamma) / (gamma * c + interpolate(costs, gamma + 1))
                # the oracle's own τ (short of E(α, γ) where the run left the reference: a bf16 near-tie between
                # a verify forward and plain decoding's, frequent with random weights) and what it predicts
                at_tau = run.tau / interpolate(costs, gamma + 1)
                row[set_alpha.name][f"{alpha}/{gamma}"], row["formula"][f"{alpha}/{gamma}"] = oracle, formula
                row.setdefault("oracle_tau", {})[f"{alpha}/{gamma}"] = run.tau
                print(
                    f"  α {alpha} γ {gamma}: oracle (no draft cost) {oracle:.2f}x measured at τ {run.tau:.2f} "
                    f"(E(α, γ) {expected_tokens_per_step(alpha, gamma):.2f}; its τ predicts {at_tau:.2f}x); with "
                    f"the draft model's cost, predicted {formula:.2f}x",
                    flush=True,
                )
        report["modes"][mode] = row
    Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
