"""Benchmark: plain vs specviz speculative vs transformers' assisted generation, one process, one run.

Every column is timed the same way, end to end (prefill + decode), on the same prompts, and each
method's speedup is over its own plain decoding, so neither side is flattered by the other's plain.
This CPU's speed drifts by 10-30% over minutes, so each cell runs `repeats` times, alternating which
method goes first, and keeps the fastest run; "vs transformers" compares runs made back to back.
"""

import json
import statistics
import sys
import time
from pathlib import Path

from .errors import InvalidRequest
from .settings import Settings

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def add_bench_options(p) -> None:
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--draft", default="qwen2.5-coder-0.5b-instruct")
    p.add_argument("--gammas", default="1-8", help="e.g. 1-8 or 2,4,6")
    p.add_argument("--kinds", default="code,prose", help="prompt kinds from assets/prompts.json")
    p.add_argument("--prompts-per-kind", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=2, help="runs per cell, fastest kept")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--no-transformers", action="store_true", help="skip transformers' assisted generation")
    p.add_argument("--out", default="bench-results", help="folder for results.json and table.md")


def parse_gammas(text: str) -> list[int]:
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-"))
            gammas = list(range(lo, hi + 1))
        else:
            gammas = [int(x) for x in text.split(",")]
    except ValueError:
        raise InvalidRequest(f"--gammas must look like 1-8 or 2,4,6, got {text!r}") from None
    for g in gammas:
        Settings(gamma=g)  # same range check as everywhere else
    if not gammas:
        raise InvalidRequest("--gammas selects nothing")
    return gammas


def load_prompts(kinds: list[str], per_kind: int) -> list[tuple[str, str]]:
    table = json.loads((ASSETS / "prompts.json").read_text())
    unknown = [k for k in kinds if k not in table]
    if unknown:
        raise InvalidRequest(f"unknown prompt kind {unknown[0]!r}; kinds: {', '.join(table)}")
    return [(k, text) for k in kinds for text in table[k][:per_kind]]


def _specviz_run(target, draft, prompt_ids, settings):
    """Plain when `draft` is None, else the draft-model drafter."""
    return measure(target, prompt_ids, settings, "draft" if draft else "none", draft)


def measure(target, prompt_ids, settings, kind="none", draft=None, options=None) -> dict:
    """One specviz run as the benchmarks record it: ids, seconds (prefill + decode), α, τ, α by draft position."""
    from .engine import decode
    from .events import depth_acceptance, generated_ids, summarize

    events = list(decode(target, prompt_ids, settings, kind, draft, options))
    m = summarize(events)
    return {"ids": generated_ids(events), "seconds": m.total_s, "alpha": m.acceptance_rate,
            "tau": m.mean_tokens_per_step, "by_depth": depth_acceptance(events, settings.gamma)}


def _transformers_run(target, draft, prompt_ids, max_new, gamma, clock):
    import torch

    ids = torch.tensor([prompt_ids], device=target.device)
    kwargs = dict(max_new_tokens=max_new, do_sample=False, attention_mask=torch.ones_like(ids))
    if draft is not None:
        cfg = draft.model.generation_config
        cfg.num_assistant_tokens, cfg.num_assistant_tokens_schedule, cfg.assistant_confidence_threshold = gamma, "constant", 0.0
        kwargs["assistant_model"] = draft.model
    start = clock()
    with torch.inference_mode():
        out = target.model.generate(ids, **kwargs)
    seconds = clock() - start
    return {"ids": out[0, len(prompt_ids):].tolist(), "seconds": seconds}


def cmd_bench(args) -> int:
    from .cli import quiet_transformers
    from .engine import make_clock
    from .models import check_same_vocabulary, encode_prompt, load_model

    gammas = parse_gammas(args.gammas)
    if args.repeats < 1:
        raise InvalidRequest(f"--repeats must be at least 1, got {args.repeats}")
    prompts = load_prompts([k.strip() for k in args.kinds.split(",")], args.prompts_per_kind)
    Settings(max_new_tokens=args.max_new_tokens)
    quiet_transformers()
    target = load_model(args.target, args.dtype, args.device)
    draft = load_model(args.draft, args.dtype, args.device)
    check_same_vocabulary(target, draft)
    clock = make_clock(target.device)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731

    warm = encode_prompt(target, "Say hi.")
    _specviz_run(target, draft, warm, Settings(max_new_tokens=8, gamma=4))
    if not args.no_transformers:
        _transformers_run(target, draft, warm, 8, 4, clock)

    def cell(prompt_ids, gamma=None):
        """Fastest of `repeats` runs for specviz and transformers, alternating who goes first; gamma None = plain."""
        settings = Settings(max_new_tokens=args.max_new_tokens, gamma=gamma or 1)
        helper = draft if gamma else None
        ours = lambda: _specviz_run(target, helper, prompt_ids, settings)  # noqa: E731
        theirs = None if args.no_transformers else (
            lambda: _transformers_run(target, helper, prompt_ids, args.max_new_tokens, gamma, clock))
        runs = {"specviz": [], "hf": []}
        for r in range(args.repeats):
            order = [("specviz", ours), ("hf", theirs)][:: 1 if r % 2 == 0 else -1]
            for name, fn in order:
                if fn is not None:
                    runs[name].append(fn())
        best = {name: min(rs, key=lambda run: run["seconds"]) for name, rs in runs.items() if rs}
        return best["specviz"], best.get("hf")

    rows = []
    for kind, text in prompts:
        prompt_ids = encode_prompt(target, text)
        plain, hf_plain = cell(prompt_ids)
        log(f"[{kind}] plain {_tps(plain):.2f} tok/s" + ("" if hf_plain is None else f", transformers plain {_tps(hf_plain):.2f} tok/s"))
        for gamma in gammas:
            spec, hf = cell(prompt_ids, gamma)
            row = {
                "kind": kind, "prompt": text[:60], "gamma": gamma,
                "plain_tps": _tps(plain), "specviz_tps": _tps(spec), "specviz_speedup": _tps(spec) / _tps(plain),
                "alpha": spec["alpha"], "tau": spec["tau"], "same_as_plain": spec["ids"] == plain["ids"],
            }
            if hf is not None:
                row.update(hf_plain_tps=_tps(hf_plain), hf_tps=_tps(hf), hf_speedup=_tps(hf) / _tps(hf_plain),
                           vs_hf=_tps(spec) / _tps(hf))
            rows.append(row)
            log(f"  gamma {gamma}: specviz {row['specviz_speedup']:.2f}x (alpha {spec['alpha']:.2f}, tau {spec['tau']:.2f})"
                + ("" if hf is None else f", transformers {row['hf_speedup']:.2f}x, specviz/transformers {row['vs_hf']:.2f}"))

    table = markdown_table(rows, gammas, sorted({k for k, _ in prompts}, key=[k for k, _ in prompts].index))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"target": args.target, "draft": args.draft, "dtype": args.dtype, "device": str(target.device),
            "max_new_tokens": args.max_new_tokens, "repeats": args.repeats, "prompts": len(prompts), "when": time.strftime("%Y-%m-%d %H:%M")}
    (out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / "table.md").write_text(table + "\n")
    print(table)
    return 0


def _tps(run) -> float:
    return len(run["ids"]) / run["seconds"]


def markdown_table(rows, gammas, kinds) -> str:
    has_hf = any("hf_speedup" in r for r in rows)
    head = ["gamma"]
    for kind in kinds:
        head += [f"{kind} alpha", f"{kind} tau", f"{kind} specviz tok/s", f"{kind} specviz speedup"]
        head += [f"{kind} transformers speedup", f"{kind} specviz / transformers tok/s"] if has_hf else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    mean = lambda rs, key: statistics.fmean(r[key] for r in rs)  # noqa: E731
    plain_line = ["plain"]
    for kind in kinds:
        rs = [r for r in rows if r["kind"] == kind]
        plain_line += ["", "", f"{mean(rs, 'plain_tps'):.2f}", "1.00x"] + (["1.00x", f"{mean(rs, 'plain_tps') / mean(rs, 'hf_plain_tps'):.2f}"] if has_hf else [])
    lines.append("| " + " | ".join(plain_line) + " |")
    for g in gammas:
        cells = [str(g)]
        for kind in kinds:
            rs = [r for r in rows if r["kind"] == kind and r["gamma"] == g]
            cells += [f"{mean(rs, 'alpha'):.2f}", f"{mean(rs, 'tau'):.2f}", f"{mean(rs, 'specviz_tps'):.2f}", f"{mean(rs, 'specviz_speedup'):.2f}x"]
            cells += [f"{mean(rs, 'hf_speedup'):.2f}x", f"{mean(rs, 'vs_hf'):.2f}"] if has_hf else []
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
