"""The README's CPU headline, specviz against transformers here; run by anyone reproducing that figure.

specviz against transformers on this machine, same models, same prompt, same run: transformers' plain decoding and
assisted generation in bfloat16 and float32, and specviz's plain and speculative decoding at `--dtype auto` (the
precision measured best here) with the CLI's default drafter settings and at γ 4, and specviz's plain decoding on
transformers' own bfloat16 and float32 models. Greedy; every cell on one clock, the prompt's prefill included; each
cell the median of --rounds runs, the cells interleaved round by round; the speculative tokens are checked against
specviz's plain ones.

    python scripts/cpu_race.py [--max-new-tokens 128] [--rounds 3] [--kind code]

Prints the device line, the precision chosen and why, one line per cell (tokens/s, τ where it applies), and the ratios
the README quotes. Run it alone: single runs on a 2-core CPU move 10-30%.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from specviz.drafters.registry import kinds  # noqa: E402
from specviz.events import generated_ids, summarize  # noqa: E402
from specviz.models import encode_prompt  # noqa: E402
from specviz.models.kernel_costs import device_name  # noqa: E402
from specviz.models.loading import quiet_transformers  # noqa: E402
from specviz.runs import generate_named  # noqa: E402
from specviz.runtimes.pair import Pair, PairAsk, open_pair  # noqa: E402
from specviz.runtimes.transformers_runtime import (
    choose_precision,  # noqa: E402
    load_model,  # noqa: E402
)
from specviz.settings import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET, DRAFT = "qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct"


def transformers_run(target, draft, ids: list[int], tokens: int) -> tuple[float, list[int]]:
    """tokens/s of transformers' generate (assisted when `draft` is given), greedy, and its new tokens."""
    x = torch.tensor([ids])
    extra = {"assistant_model": draft} if draft is not None else {}
    began = time.perf_counter()
    with torch.inference_mode():
        out = target.generate(
            x, attention_mask=torch.ones_like(x), max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, **extra
        )
    new = out[0, len(ids) :].tolist()
    return len(new) / (time.perf_counter() - began), new


def specviz_run(pair, ids, settings, drafter="", options=None) -> tuple[float, list[int], float]:
    """tokens/s on transformers' clock (the prompt's prefill included, as generate() includes it), the new tokens,
    and τ."""
    began = time.perf_counter()
    events = list(generate_named(pair.target, ids, settings, drafter or "none", pair.draft, options, explain=False))
    wall = time.perf_counter() - began
    new = generated_ids(events)
    return len(new) / wall, new, summarize(events).mean_tokens_per_step


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kind", default="code", help="which example prompt (assets/prompts.json)")
    args = p.parse_args()
    quiet_transformers()
    print(f"cpu: {device_name(torch.device('cpu'))}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    choice = choose_precision(TARGET, DRAFT, "cpu", report=print)  # prints the reason too
    ask = PairAsk(TARGET, DRAFT, "transformers", choice.dtype, "int8", exact=choice.exact, device="cpu")
    pair = open_pair(ask)
    print(f"specviz: target {choice.dtype}, draft int8, {pair.exact}")
    prompt = json.loads((ROOT / "assets" / "prompts.json").read_text())[args.kind][0]
    ids = encode_prompt(pair.target, prompt)
    loaded = {d: load_model(TARGET, d, "cpu") for d in ("bfloat16", "float32")}  # exact mode off, as transformers
    hf = {d: m.model for d, m in loaded.items()}
    hf_draft = {d: load_model(DRAFT, d, "cpu").model for d in ("bfloat16", "float32")}
    draft_kind = next(k for k in kinds() if k.needs_draft and not k.listing.lookup)  # the draft model alone
    defaults = dict(draft_kind.listing.preferred)
    cli = Settings(max_new_tokens=args.max_new_tokens, gamma=defaults["gamma"], adaptive=defaults["adaptive"])
    cli_options = draft_kind.parse({"draft_tree": defaults["draft_tree"]})
    fixed = Settings(max_new_tokens=args.max_new_tokens, gamma=4)
    chain = draft_kind.parse({})
    cells: dict[str, list[float]] = {}
    taus: dict[str, list[float]] = {}
    for round_ in range(1, args.rounds + 1):
        plain_speed, plain_ids, _ = specviz_run(pair, ids, fixed)
        cells.setdefault("specviz plain", []).append(plain_speed)
        for name, settings, options in (
            (f"specviz draft, CLI defaults (adaptive ≤ {cli.gamma}, {defaults['draft_tree']})", cli, cli_options),
            ("specviz draft γ 4 (chain)", fixed, chain),
        ):
            speed, spec_ids, tau = specviz_run(pair, ids, settings, draft_kind.name, options)
            same = spec_ids == plain_ids
            cells.setdefault(name, []).append(speed)
            taus.setdefault(name, []).append(tau)
            print(f"round {round_}: {name}: {speed:.2f} tok/s, τ {tau:.2f}, plain's tokens: {same}", flush=True)
        for d in ("bfloat16", "float32"):
            speed, _, _ = specviz_run(Pair(loaded[d]), ids, fixed)
            cells.setdefault(f"specviz plain {d}", []).append(speed)
            for assisted in (False, True):
                name = f"transformers {'assisted' if assisted else 'plain'} {d}"
                speed, _ = transformers_run(hf[d], hf_draft[d] if assisted else None, ids, args.max_new_tokens)
                cells.setdefault(name, []).append(speed)
        print(f"round {round_}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in cells.items()), flush=True)
    median = {k: statistics.median(v) for k, v in cells.items()}
    print(f"\nmedians of {args.rounds} ({prompt[:50]!r}..., {args.max_new_tokens} greedy tokens):")
    for name, speed in median.items():
        tau = f", τ {statistics.median(taus[name]):.2f}" if name in taus else ""
        print(f"  {name}: {speed:.2f} tok/s{tau}")
    hf_plain = max(median["transformers plain bfloat16"], median["transformers plain float32"])
    hf_assisted = max(median["transformers assisted bfloat16"], median["transformers assisted float32"])
    for name in taus:
        print(
            f"{name}: {median[name] / hf_plain:.2f}× transformers' best plain, "
            f"{median[name] / hf_assisted:.2f}× its best assisted, {median[name] / median['specviz plain']:.2f}× "
            "specviz plain"
        )
    for d in ("bfloat16", "float32"):
        ratio = median[f"specviz plain {d}"] / median[f"transformers plain {d}"]
        print(f"specviz plain {d}: {ratio:.2f}× transformers' plain {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
