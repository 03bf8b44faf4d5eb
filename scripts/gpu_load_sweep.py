"""Under load on a GPU: plain decoding against speculative decoding at rising concurrency, with the crossover.

    python scripts/gpu_load_sweep.py [--pair qwen2.5-coder] [--levels 1,4,16,64] [--tokens 64] [--out load.json]

Models are built from their configs (assets/model-configs) with random weights: a forward's time depends on the
shapes, not the values. Random weights agree on nothing, so acceptance comes from the oracle drafter, one per row
(each row's own greedy continuation, proposed at a set α, at no drafting cost), and the draft model contributes its
measured cost per drafted token to the prediction. At each level B, every row decodes together
(engine/loop.generate_rows): plain, the oracle at each fixed γ, and the oracle under adaptive γ for a batch
(engine/batch_gamma.py). Printed per level: total tokens/s, the speedup over plain at the same B, τ, the speedup the
formula predicts from this level's measured forward costs, E(α, γ) / (γ·c_B + V_B(B(γ+1)) / V_B(B)), and the γ
adaptive chose. `--layers N` keeps N layers of each model (to check the script on a CPU).
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

from specviz.analysis.theory import expected_tokens_per_step  # noqa: E402
from specviz.drafters.oracle import OracleDrafter  # noqa: E402
from specviz.drafters.registry import build_row_drafting, kinds  # noqa: E402
from specviz.engine.batch_gamma import ForwardCosts  # noqa: E402
from specviz.engine.batched_lm import BatchedLM, Feed  # noqa: E402
from specviz.engine.loop import generate_rows  # noqa: E402
from specviz.engine.step import EachRow  # noqa: E402
from specviz.settings import Settings  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from gpu_fast_path import random_model  # noqa: E402  the same random-weight models as the single-request figures

PAIRS = {
    "qwen2.5-coder": ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct"),
    "qwen3-4b": ("qwen3-4b", "qwen3-0.6b"),
}


def decode(target, prompts, settings, drafting=None, costs=None) -> dict:
    """Every row together: tokens per row, wall seconds of the decode (prefill apart), and every batch step."""
    rows, steps, step = [[] for _ in prompts], [], []
    began, prefill = time.perf_counter(), 0.0
    for row, event in generate_rows(target, prompts, settings, drafting, None, None, False, costs):
        rows[row].extend(event.tokens)
        prefill = max(prefill, event.prefill_s)
        step.append(event)
        if len(step) == event.batch:
            steps.append(step)
            step = []
    wall = time.perf_counter() - began
    return {"rows": rows, "decode_s": max(1e-9, wall - prefill), "steps": steps}


def oracles(references, alpha: float, vocab: int) -> EachRow:
    return EachRow([OracleDrafter(ref, alpha, vocab, seed=r) for r, ref in enumerate(references)])


def batch_forward_s(target, prompts, k: int, repeats: int = 8) -> float:
    """Median seconds of one step's target forward and realignment for len(prompts) rows of k tokens each, as a
    verify forward of a chain of k − 1 drafts is (each row then keeps one token), measured on the batch's own cache."""
    lm, sync, seconds = BatchedLM(target.model), torch.cuda.synchronize if target.device.type == "cuda" else None, []
    lm.start(prompts)
    for _ in range(repeats + 1):
        if sync:
            sync()
        began = time.perf_counter()
        lm.extend([Feed.chain([7] * k) for _ in prompts])
        lm.keep([[0] for _ in prompts])
        if sync:
            sync()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds[1:])


def median_verify(run: dict, tokens: int) -> float | None:
    seconds = [s[0].verify_s for s in run["steps"] if s[0].batch_tokens == tokens]
    return statistics.median(seconds) if seconds else None


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--pair", choices=list(PAIRS), default="qwen2.5-coder")
    p.add_argument("--levels", default="1,2,4,8,16,32,64")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--gammas", default="2,4")
    p.add_argument("--alpha", type=float, default=0.8)
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16", help="float32: near-ties far rarer, so rows stay on their references")
    p.add_argument("--out", default="load.json")
    args = p.parse_args()
    levels, gammas = [int(x) for x in args.levels.split(",")], [int(g) for g in args.gammas.split(",")]
    model_drafter = next(k for k in kinds() if k.needs_draft and not k.listing.lookup)  # the draft model alone
    set_alpha = next(k for k in kinds() if k.listing.sets_alpha).name  # accepted at a set rate, for free
    target, draft = (random_model(n, args.device, args.layers, args.dtype) for n in PAIRS[args.pair])
    vocab = target.model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, vocab, (args.prompt_tokens,), generator=gen).tolist() for _ in range(max(levels))]
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    report = {"device": device, "torch": torch.__version__, "pair": args.pair, "alpha": args.alpha, "levels": {}}
    print(f"{device}, {args.pair}, α {args.alpha}, {args.tokens} new tokens per row", flush=True)
    plain_settings = Settings(max_new_tokens=args.tokens)
    decode(target, prompts[:1], Settings(max_new_tokens=8))  # warm up
    costs = ForwardCosts()  # what every batch forward measured, kept across levels as a server keeps it
    for b in levels:
        rows = prompts[:b]
        plain = decode(target, rows, plain_settings)
        v_b = median_verify(plain, b)
        line = {"plain_tps": b * args.tokens / plain["decode_s"], set_alpha: {}}
        # the draft model's cost per drafted position for the whole batch, against a plain step's
        generators = [torch.Generator(args.device).manual_seed(r) for r in range(b)]
        drafting = build_row_drafting(
            model_drafter.name, Settings(max_new_tokens=16, gamma=4), generators, target, draft
        )
        drafted = decode(target, rows, Settings(max_new_tokens=16, gamma=4), drafting)
        draft_s = [s[0].draft_s / max(1, s[0].gamma) for s in drafted["steps"] if s[0].gamma]
        c = statistics.median(draft_s) / v_b if draft_s and v_b else 0.0
        line["draft_cost_c"] = c
        out = [f"B {b:3d}: plain {line['plain_tps']:8.1f} tok/s; draft model c_B {c:.2f}"]
        for gamma in [*gammas, "adaptive"]:
            adaptive = gamma == "adaptive"
            top = max(gammas)
            settings = Settings(max_new_tokens=args.tokens, gamma=top if adaptive else gamma, adaptive=adaptive)
            run = decode(target, rows, settings, oracles(plain["rows"], args.alpha, vocab), costs if adaptive else None)
            for s in run["steps"] + plain["steps"]:
                costs.note(s[0].batch_tokens, s[0].verify_s)
            tps = sum(map(len, run["rows"])) / run["decode_s"]
            tau = sum(map(len, run["rows"])) / sum(len(s) for s in run["steps"])
            same = sum(a == r for a, r in zip(run["rows"], plain["rows"]))
            figures = {"tps": tps, "speedup": tps / line["plain_tps"], "tau": tau, "rows_as_plain": same}
            if adaptive:
                figures["gammas"] = [s[0].gamma for s in run["steps"]]
                figures["mean_gamma"] = statistics.mean(figures["gammas"])
                said = f"adaptive (mean γ {figures['mean_gamma']:.1f})"
            else:
                v_wide = median_verify(run, b * (gamma + 1))
                if b > 1:  # measured apart: a batch's rows may leave their references (bf16 near-ties), so few
                    # of the run's steps are full width
                    v_b, v_wide = batch_forward_s(target, rows, 1), batch_forward_s(target, rows, gamma + 1)
                e = expected_tokens_per_step(args.alpha, gamma)
                if v_wide and v_b:
                    figures["V_ratio"] = v_wide / v_b
                    figures["predicted_free"] = e / (v_wide / v_b)
                    figures["predicted_with_draft"] = e / (gamma * c + v_wide / v_b)
                said = (
                    f"γ {gamma}: V ratio {figures.get('V_ratio', 0):.2f}, "
                    f"predicted {figures.get('predicted_free', 0):.2f}x "
                    f"(with the draft model's cost {figures.get('predicted_with_draft', 0):.2f}x)"
                )
            line[set_alpha][str(gamma)] = figures
            out.append(
                f"  {set_alpha} {said}: {tps:8.1f} tok/s, {figures['speedup']:.2f}x, τ {tau:.2f}, "
                f"rows as plain {same}/{b}"
            )
        report["levels"][b] = line
        print("\n".join(out), flush=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
