"""Benchmark the drafters that need no draft model: plain vs n-gram lookup vs history lookup (m = 1 and m),
with transformers' prompt lookup (`prompt_lookup_num_tokens`) on the same prompts in the same run.

    python -m specviz bench-lookup [--kinds extraction,edit,prose] [--gamma 4] [--candidates 4] ...

Input-grounded prompts (extract from or edit a given text) are where lookup pays; free prose is the check
that it costs nothing when it does not. Cells are the fastest of `repeats` runs, alternating order.
"""

import json
import statistics
import sys
import time
from pathlib import Path

from .bench import _tps, load_prompts, measure
from .errors import InvalidRequest
from .settings import Settings, lookup_options


def add_bench_lookup_options(p) -> None:
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--kinds", default="extraction,edit,prose", help="prompt kinds from assets/prompts.json")
    p.add_argument("--prompts-per-kind", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--gamma", type=int, default=4, help="tokens per lookup (history: n - 1)")
    p.add_argument("--ngram-max", type=int, default=3)
    p.add_argument("--candidates", type=int, default=4, help="history lookup's m (m = 1 always runs too)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--out", default="bench-results", help="folder for lookup.json and lookup.md")


def _theirs(target, prompt_ids, max_new, gamma, ngram_max, clock):
    import torch

    ids = torch.tensor([prompt_ids], device=target.device)
    kwargs = dict(max_new_tokens=max_new, do_sample=False, attention_mask=torch.ones_like(ids))
    if gamma:
        kwargs.update(prompt_lookup_num_tokens=gamma, max_matching_ngram_size=ngram_max)
    start = clock()
    with torch.inference_mode():
        out = target.model.generate(ids, **kwargs)
    return {"ids": out[0, len(prompt_ids):].tolist(), "seconds": clock() - start}


def cmd_bench_lookup(args) -> int:
    from .cli import quiet_transformers
    from .engine import make_clock
    from .models import encode_prompt, load_model

    settings = Settings(max_new_tokens=args.max_new_tokens, gamma=args.gamma)
    history_m = lookup_options(args.ngram_max, args.candidates, "recent")
    if args.repeats < 1:
        raise InvalidRequest(f"--repeats must be at least 1, got {args.repeats}")
    prompts = load_prompts([k.strip() for k in args.kinds.split(",")], args.prompts_per_kind)
    quiet_transformers()
    target = load_model(args.target, args.dtype, args.device)
    clock = make_clock(target.device)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    methods = {
        "plain": lambda ids: measure(target, ids, settings),
        "ngram": lambda ids: measure(target, ids, settings, "ngram", None, history_m),
        "history m=1": lambda ids: measure(target, ids, settings, "history", None, {**history_m, "candidates": 1}),
        f"history m={args.candidates}": lambda ids: measure(target, ids, settings, "history", None, history_m),
        "transformers plain": lambda ids: _theirs(target, ids, args.max_new_tokens, 0, args.ngram_max, clock),
        "transformers prompt lookup": lambda ids: _theirs(target, ids, args.max_new_tokens, args.gamma, args.ngram_max, clock),
    }
    warm = encode_prompt(target, "Say hi.")
    for fn in methods.values():
        fn(warm)

    rows = []
    for kind, text in prompts:
        ids = encode_prompt(target, text)
        runs = {name: [] for name in methods}
        for r in range(args.repeats):
            for name in (list(methods) if r % 2 == 0 else list(methods)[::-1]):
                runs[name].append(methods[name](ids))
        best = {name: min(rs, key=lambda run: run["seconds"]) for name, rs in runs.items()}
        for name, run in best.items():
            base = best["transformers plain" if name.startswith("transformers") else "plain"]
            rows.append({"kind": kind, "prompt": text[:60], "method": name, "tps": _tps(run),
                         "speedup": _tps(run) / _tps(base), "alpha": run.get("alpha"), "tau": run.get("tau"),
                         "same_as_plain": run["ids"] == best["plain"]["ids"]})
        log(f"[{kind}] " + ", ".join(f"{r['method']} {r['speedup']:.2f}x" for r in rows[-len(methods):]))

    table = lookup_table(rows, list(methods), sorted({k for k, _ in prompts}, key=[k for k, _ in prompts].index))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"target": args.target, "dtype": args.dtype, "device": str(target.device), "gamma": args.gamma,
            "max_new_tokens": args.max_new_tokens, "repeats": args.repeats, "when": time.strftime("%Y-%m-%d %H:%M")}
    (out / "lookup.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / "lookup.md").write_text(table + "\n")
    print(table)
    return 0


def lookup_table(rows, methods, kinds) -> str:
    lines = ["| kind | method | α | τ | tok/s | speedup over own plain | same as plain |", "|---|---|---|---|---|---|---|"]
    for kind in kinds:
        for method in methods:
            rs = [r for r in rows if r["kind"] == kind and r["method"] == method]
            mean = lambda key: statistics.fmean(r[key] for r in rs)  # noqa: E731
            alpha = "" if rs[0]["alpha"] is None else f"{mean('alpha'):.2f}"
            tau = "" if rs[0]["tau"] is None else f"{mean('tau'):.2f}"
            same = f"{sum(r['same_as_plain'] for r in rs)}/{len(rs)}"
            lines.append(f"| {kind} | {method} | {alpha} | {tau} | {mean('tps'):.2f} | {mean('speedup'):.2f}x | {same} |")
    return "\n".join(lines)
