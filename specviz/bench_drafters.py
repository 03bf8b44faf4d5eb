"""Every drafter on the same prompts in one run: plain, draft model, n-gram lookup, history lookup and Medusa
(the heads specviz ships, or --medusa), greedy and sampled.

    python -m specviz bench-drafters [--kinds code,extraction,prose] [--temperatures 0,0.7] [--gamma 4] ...

Per cell: tokens/s, speedup over plain at the same temperature, α, τ and α by draft position (for Medusa,
position k + 1 is head k's guess). Sampled runs use typical acceptance for Medusa too (lossy, marked so).
Cells are the fastest of `repeats` runs, alternating the order of the methods.
"""

import json
import statistics
import sys
import time
from pathlib import Path

from .bench import _tps, load_prompts, measure
from .errors import InvalidRequest
from .settings import Settings, lookup_options, medusa_options


def add_bench_drafters_options(p) -> None:
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--draft", default="qwen2.5-coder-0.5b-instruct", help="draft model; 'none' leaves it out")
    p.add_argument("--medusa", help="Medusa heads (default: the heads shipped for the target)")
    p.add_argument("--medusa-tree", default="sparse")
    p.add_argument("--kinds", default="code,extraction,prose", help="prompt kinds from assets/prompts.json")
    p.add_argument("--prompts-per-kind", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--gamma", type=int, default=4)
    p.add_argument("--temperatures", default="0,0.7")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--out", default="bench-results", help="folder for drafters.json and drafters.md")


def cmd_bench_drafters(args) -> int:
    from .cli import quiet_transformers
    from .medusa.heads import load_medusa, shipped_or_given
    from .models import check_same_vocabulary, encode_prompt, load_model

    try:
        temperatures = [float(t) for t in args.temperatures.split(",")]
    except ValueError:
        raise InvalidRequest(f"--temperatures must look like 0,0.7, got {args.temperatures!r}") from None
    for t in temperatures:
        Settings(temperature=t, gamma=args.gamma, max_new_tokens=args.max_new_tokens)
    if args.repeats < 1:
        raise InvalidRequest(f"--repeats must be at least 1, got {args.repeats}")
    prompts = load_prompts([k.strip() for k in args.kinds.split(",")], args.prompts_per_kind)
    heads_at = shipped_or_given(args.medusa, args.target)
    options = lookup_options(3, 4, "recent") | medusa_options(None, args.medusa_tree, "lossless")
    quiet_transformers()
    target = load_model(args.target, args.dtype, args.device)
    draft = None if args.draft == "none" else load_model(args.draft, args.dtype, args.device)
    if draft is not None:
        check_same_vocabulary(target, draft)
    options["medusa"] = load_medusa(heads_at, target)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731

    def methods(temperature):
        kinds = ["none", *(["draft"] if draft else []), "ngram", "history", "medusa"]
        out = {("plain" if k == "none" else k): (k, options) for k in kinds}
        if temperature > 0:
            out["medusa typical (lossy)"] = ("medusa", options | {"acceptance": "typical"})
        return out

    warm = encode_prompt(target, "Say hi.")
    for name, (kind, opts) in methods(0.7).items():
        measure(target, warm, Settings(max_new_tokens=8, gamma=args.gamma, temperature=0.7), kind, draft, opts)
    rows = []
    for temperature in temperatures:
        settings = Settings(max_new_tokens=args.max_new_tokens, gamma=args.gamma, temperature=temperature)
        table = methods(temperature)
        for kind_name, text in prompts:
            ids = encode_prompt(target, text)
            runs = {name: [] for name in table}
            for r in range(args.repeats):
                for name in (list(table) if r % 2 == 0 else list(table)[::-1]):
                    kind, opts = table[name]
                    runs[name].append(measure(target, ids, settings, kind, draft, opts))
            best = {name: min(rs, key=lambda run: run["seconds"]) for name, rs in runs.items()}
            for name, run in best.items():
                rows.append({"kind": kind_name, "prompt": text[:60], "temperature": temperature, "method": name,
                             "tps": _tps(run), "speedup": _tps(run) / _tps(best["plain"]), "alpha": run["alpha"],
                             "tau": run["tau"], "by_depth": run["by_depth"],
                             "same_as_plain": run["ids"] == best["plain"]["ids"] if temperature == 0 else None})
            log(f"[{kind_name}, T={temperature}] " + ", ".join(f"{r['method']} {r['speedup']:.2f}x τ {r['tau']:.2f}"
                                                              for r in rows[-len(table):]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"target": args.target, "draft": args.draft, "medusa": str(heads_at), "tree": args.medusa_tree,
            "dtype": args.dtype, "device": str(target.device), "gamma": args.gamma,
            "max_new_tokens": args.max_new_tokens, "repeats": args.repeats, "when": time.strftime("%Y-%m-%d %H:%M")}
    (out / "drafters.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    table_md = drafters_table(rows)
    (out / "drafters.md").write_text(table_md + "\n")
    print(table_md)
    return 0


def drafters_table(rows) -> str:
    """Means over the prompts of each kind; α by position pools nothing, it averages the prompts' rates."""
    lines = ["| kind | T | method | α | α by position 1…γ | τ | tok/s | speedup | same as plain |",
             "|---|---|---|---|---|---|---|---|---|"]
    keys = list(dict.fromkeys((r["kind"], r["temperature"], r["method"]) for r in rows))
    for kind, temperature, method in keys:
        rs = [r for r in rows if (r["kind"], r["temperature"], r["method"]) == (kind, temperature, method)]
        mean = lambda values: statistics.fmean(values) if values else None  # noqa: E731
        alpha = mean([r["alpha"] for r in rs if r["alpha"] is not None])
        depth = [mean([r["by_depth"][k] for r in rs if r["by_depth"][k] is not None]) for k in range(len(rs[0]["by_depth"]))]
        depth_text = " / ".join("–" if d is None else f"{d:.2f}" for d in depth) if method != "plain" else ""
        same = "" if temperature else f"{sum(bool(r['same_as_plain']) for r in rs)}/{len(rs)}"
        lines.append(f"| {kind} | {temperature:g} | {method} | {'' if alpha is None else f'{alpha:.2f}'} | {depth_text} | "
                     f"{mean([r['tau'] for r in rs]):.2f} | {mean([r['tps'] for r in rs]):.2f} | "
                     f"{mean([r['speedup'] for r in rs]):.2f}x | {same} |")
    return "\n".join(lines)
