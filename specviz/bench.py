"""The benchmark suite: plain decoding, every drafter at each γ and adaptive, and transformers' own assisted
generation and prompt lookup, on the same models and prompts, in one process and one run.

    python -m specviz bench [--kinds code,extraction,prose,chat] [--temperatures 0,0.7] [--gammas 1-8]
                            [--methods draft,ngram,history,medusa,oracle] [--repeats 2] [--out bench-results]

Per cell: tokens/s, speedup over its own library's plain decoding (end to end, prefill included), α, τ,
speedup ÷ τ, and efficiency = the measured decode speedup ÷ the speedup predicted from the run's own accepted
tokens, drafting seconds and the bare forward cost V(k) of each verify (measured apart, costs.py). A cell is the
fastest of `repeats` runs, alternating order with its transformers counterpart (this CPU drifts 10–30%);
plain runs before and after a prompt's cells bracket them and their mean is the baseline.
Writes bench.json, bench.md and bench.html (plotly) to --out; bench_report.py draws them.
"""

import json
import sys
import time
from pathlib import Path

from .errors import InvalidRequest
from .settings import MAX_GAMMA, Settings, lookup_options, medusa_options

ASSETS = Path(__file__).resolve().parent.parent / "assets"
METHODS = ("draft", "ngram", "history", "medusa", "oracle")
COUNTERPART = {"draft": "transformers assisted", "ngram": "transformers prompt lookup"}


def add_bench_options(p) -> None:
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--draft", default="qwen2.5-coder-0.5b-instruct")
    p.add_argument("--medusa", help="Medusa heads (default: the heads shipped for the target)")
    p.add_argument("--methods", default=",".join(METHODS), help="drafters to run, from " + ",".join(METHODS))
    p.add_argument("--gammas", default="1-8", help="fixed γ values, e.g. 1-8 or 2,4; adaptive always runs too")
    p.add_argument("--kinds", default="code,extraction,prose,chat", help="prompt kinds from assets/prompts.json")
    p.add_argument("--prompts-per-kind", type=int, default=2)
    p.add_argument("--temperatures", default="0,0.7")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--oracle-alphas", default="0.5,0.8,0.95", help="acceptance rates of the oracle drafter")
    p.add_argument("--repeats", type=int, default=2, help="runs per cell, fastest kept")
    p.add_argument("--no-transformers", action="store_true", help="skip transformers' own methods")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--out", default="bench-results", help="folder for bench.json, bench.md and bench.html")


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


def parse_numbers(text: str, flag: str, example: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise InvalidRequest(f"{flag} must look like {example}, got {text!r}") from None


def load_prompts(kinds: list[str], per_kind: int) -> list[tuple[str, object]]:
    """(kind, prompt) pairs; a prompt is a text or, for chat, a list of messages ending with the user's turn."""
    table = json.loads((ASSETS / "prompts.json").read_text())
    unknown = [k for k in kinds if k not in table]
    if unknown:
        raise InvalidRequest(f"unknown prompt kind {unknown[0]!r}; kinds: {', '.join(table)}")
    return [(k, prompt) for k in kinds for prompt in table[k][:per_kind]]


def prompt_label(prompt) -> str:
    return (prompt if isinstance(prompt, str) else f"[{len(prompt)} turns] " + prompt[-1]["content"])[:60]


def measure(target, prompt_ids, settings, kind="none", draft=None, options=None) -> dict:
    """One specviz run as the benchmark records it: ids, seconds (prefill + decode), its events and metrics."""
    from .engine import decode
    from .events import generated_ids, summarize

    events = list(decode(target, prompt_ids, settings, kind, draft, options))
    m = summarize(events)
    return {"ids": generated_ids(events), "seconds": m.total_s, "decode_s": m.decode_s, "events": events,
            "alpha": m.acceptance_rate, "tau": m.mean_tokens_per_step}


def transformers_run(target, prompt_ids, settings, method=None, gamma=None, draft=None, ngram_max=3, clock=None):
    """transformers' generate: plain (method None), "transformers assisted" (γ, or None for its own default
    schedule) or "transformers prompt lookup" (γ), with the same sampling settings as ours."""
    import torch
    from transformers import GenerationConfig

    ids = torch.tensor([prompt_ids], device=target.device)
    kwargs = dict(max_new_tokens=settings.max_new_tokens, attention_mask=torch.ones_like(ids),
                  do_sample=not settings.greedy, repetition_penalty=1.0)
    if not settings.greedy:
        kwargs.update(temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p)
    if method == "transformers assisted":
        cfg, default = draft.model.generation_config, GenerationConfig()
        cfg.num_assistant_tokens = gamma or default.num_assistant_tokens
        cfg.num_assistant_tokens_schedule = "constant" if gamma else default.num_assistant_tokens_schedule
        cfg.assistant_confidence_threshold = 0.0 if gamma else default.assistant_confidence_threshold
        kwargs["assistant_model"] = draft.model
    elif method == "transformers prompt lookup":
        kwargs.update(prompt_lookup_num_tokens=gamma, max_matching_ngram_size=ngram_max)
    torch.manual_seed(settings.seed)
    start = clock()
    with torch.inference_mode():
        out = target.model.generate(ids, **kwargs)
    return {"ids": out[0, len(prompt_ids):].tolist(), "seconds": clock() - start}


def fastest(fns: dict, repeats: int) -> dict:
    """Run every fn `repeats` times, alternating the order, and keep each one's fastest run."""
    runs = {name: [] for name in fns}
    for r in range(repeats):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            runs[name].append(fns[name]())
    return {name: min(rs, key=lambda run: run["seconds"]) for name, rs in runs.items()}


def cmd_bench(args) -> int:
    from .bench_report import html_report, markdown_report
    from .cli import quiet_transformers
    from .costs import relative_forward_costs
    from .engine import make_clock
    from .events import depth_acceptance
    from .models import check_same_vocabulary, encode_prompt, load_model
    from .theory import iid_speedup, predicted_speedup

    gammas = parse_gammas(args.gammas)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or any(m not in METHODS for m in methods):
        raise InvalidRequest(f"--methods must be some of {','.join(METHODS)}, got {args.methods!r}")
    temperatures = parse_numbers(args.temperatures, "--temperatures", "0,0.7")
    alphas = parse_numbers(args.oracle_alphas, "--oracle-alphas", "0.5,0.8")
    if any(not 0 <= a <= 1 for a in alphas):
        raise InvalidRequest(f"--oracle-alphas must be rates in [0, 1], got {args.oracle_alphas!r}")
    if args.repeats < 1:
        raise InvalidRequest(f"--repeats must be at least 1, got {args.repeats}")
    for t in temperatures:
        Settings(temperature=t, max_new_tokens=args.max_new_tokens)
    prompts = load_prompts([k.strip() for k in args.kinds.split(",")], args.prompts_per_kind)
    heads_at = None
    if "medusa" in methods:
        from .medusa.heads import shipped_or_given

        heads_at = shipped_or_given(args.medusa, args.target)
    quiet_transformers()
    target = load_model(args.target, args.dtype, args.device)
    draft = load_model(args.draft, args.dtype, args.device) if "draft" in methods else None
    if draft is not None:
        check_same_vocabulary(target, draft)
    options = lookup_options(3, 4, "recent")
    if heads_at is not None:
        from .medusa.heads import load_medusa

        options |= medusa_options(load_medusa(heads_at, target), "sparse", "lossless")
    depth = {"medusa": len(options["medusa"].heads) if heads_at else 0}
    clock = make_clock(target.device)
    hf = not args.no_transformers
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731

    def cells(settings, plain_ids):
        """(method, γ label, specviz run fn, transformers counterpart fn or None) for one prompt."""
        for method in methods:
            if method == "oracle" and not settings.greedy:
                continue
            variants = [(f"oracle α={a:g}", {"reference": plain_ids, "alpha": a}) for a in alphas] \
                if method == "oracle" else [(method, options)]
            for name, opts in variants:
                deepest = depth.get(method, MAX_GAMMA)  # Medusa guesses no further than it has heads
                for gamma in [*gammas, "adaptive"]:
                    g = min(max(gammas), deepest) if gamma == "adaptive" else gamma
                    if g > deepest:
                        continue
                    at = Settings(**{**settings.__dict__, "gamma": g, "adaptive": gamma == "adaptive"})
                    yield name, gamma, at, opts

    def ours(prompt_ids, settings, kind="none", opts=None):
        return lambda: measure(target, prompt_ids, settings, kind, draft, opts)

    def theirs(prompt_ids, settings, method=None, gamma=None):
        return lambda: transformers_run(target, prompt_ids, settings, method, gamma, draft, 3, clock)

    warm = encode_prompt(target, "Say hi.")
    for kind in ["none", *[m for m in methods if m != "oracle"]]:
        measure(target, warm, Settings(max_new_tokens=8, gamma=2), kind, draft, options)
    if hf:
        transformers_run(target, warm, Settings(max_new_tokens=8), clock=clock)

    rows, began = [], time.perf_counter()
    for kind_name, prompt in prompts:
        ids = encode_prompt(target, prompt)
        for temperature in temperatures:
            settings = Settings(max_new_tokens=args.max_new_tokens, temperature=temperature)
            opening = fastest({"specviz": ours(ids, settings), **({"hf": theirs(ids, settings)} if hf else {})},
                              args.repeats)
            log(f"[{kind_name}, T={temperature:g}] plain {_tps(opening['specviz']):.2f} tok/s"
                + (f", transformers plain {_tps(opening['hf']):.2f} tok/s" if hf else ""))
            measured = []
            for name, gamma, at, opts in cells(settings, opening["specviz"]["ids"]):
                kind = "oracle" if name.startswith("oracle") else name
                other = COUNTERPART.get(kind) if hf else None
                fns = {"specviz": ours(ids, at, kind, opts)}
                if other and (gamma != "adaptive" or kind == "draft"):  # their adaptive: assisted generation's defaults
                    fns["hf"] = theirs(ids, at, other, None if gamma == "adaptive" else gamma)
                best = fastest(fns, args.repeats)
                measured.append((name, gamma, other, best))
                log(f"  {name} γ={gamma}: {_tps(best['specviz']):.2f} tok/s (α {_f(best['specviz']['alpha'])}, "
                    f"τ {best['specviz']['tau']:.2f})" + (f", {other} {_tps(best['hf']):.2f} tok/s" if "hf" in best else ""))
            # Plain runs bracket the cells (this CPU drifts over minutes): their mean is the baseline. Each side is
            # the fastest of `repeats` runs, like every cell; the faster of the two would be a best of 2·repeats.
            closing = fastest({"specviz": ours(ids, settings), **({"hf": theirs(ids, settings)} if hf else {})},
                              args.repeats)
            plain = _bracketed(opening["specviz"], closing["specviz"])
            hf_plain = _bracketed(opening["hf"], closing["hf"]) if hf else None
            ks = sorted({*range(1, max(gammas) + 2), 12, 17, 25, 33})
            costs = relative_forward_costs(target, ids + plain["ids"][: len(plain["ids"]) // 2], ks)
            forward_1 = plain["decode_s"] / len(plain["ids"])  # V(1): the plain run's own time per token
            common = {"kind": kind_name, "prompt": prompt_label(prompt), "temperature": temperature}
            rows.append({**common, "method": "plain", "gamma": None, "library": "specviz", "tps": _tps(plain),
                         "speedup": 1.0, "tau": 1.0, "verify_costs": costs})
            if hf_plain is not None:
                rows.append({**common, "method": "transformers plain", "gamma": None, "library": "transformers",
                             "tps": _tps(hf_plain), "speedup": 1.0, "vs_transformers": _tps(plain) / _tps(hf_plain)})
            log(f"[{kind_name}, T={temperature:g}] plain: closing {_tps(closing['specviz']):.2f}, baseline (mean time of "
                f"opening and closing) {_tps(plain):.2f} tok/s"
                + (f", transformers plain {_tps(hf_plain):.2f} tok/s" if hf_plain else "")
                + "; V(k)/V(1) at k=2,5,9,17: " + ", ".join(f"{costs[k]:.2f}" for k in (2, 5, 9, 17) if k in costs))
            for name, gamma, other, best in measured:
                run, events = best["specviz"], best["specviz"]["events"]
                speedup = _tps(run) / _tps(plain)
                predicted = predicted_speedup(events, costs, forward_1)
                decode_speedup = plain["decode_s"] / run["decode_s"] * len(run["ids"]) / len(plain["ids"])
                row = {**common, "method": name, "gamma": gamma, "library": "specviz", "tps": _tps(run),
                       "speedup": speedup, "alpha": run["alpha"], "tau": run["tau"], "per_tau": speedup / run["tau"],
                       "predicted": predicted, "efficiency": decode_speedup / predicted if predicted else None,
                       "iid": None if gamma == "adaptive" else iid_speedup(events, costs, forward_1, gamma),
                       "mean_gamma": sum(e.gamma for e in events) / len(events),
                       "by_depth": depth_acceptance(events, max(gammas)),
                       "same_as_plain": run["ids"] == plain["ids"] if settings.greedy else None}
                if "hf" in best:
                    row["vs_transformers"] = _tps(run) / _tps(best["hf"])
                    rows.append({**common, "method": other, "gamma": gamma, "library": "transformers",
                                 "tps": _tps(best["hf"]), "speedup": _tps(best["hf"]) / _tps(hf_plain),
                                 "same_as_plain": best["hf"]["ids"] == hf_plain["ids"] if settings.greedy else None})
                rows.append(row)
                log(f"  {name} γ={gamma}: {speedup:.2f}x, efficiency {_f(row['efficiency'])}"
                    + (f", {other} {rows[-2]['speedup']:.2f}x, specviz/transformers {row['vs_transformers']:.2f}"
                       if "hf" in best else ""))
    meta = {"target": args.target, "draft": args.draft if draft else None, "medusa": str(heads_at) if heads_at else None,
            "dtype": args.dtype, "device": str(target.device), "max_new_tokens": args.max_new_tokens,
            "repeats": args.repeats, "gammas": gammas, "methods": methods, "prompts": len(prompts),
            "minutes": round((time.perf_counter() - began) / 60, 1), "when": time.strftime("%Y-%m-%d %H:%M")}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    report = markdown_report(rows, meta)
    (out / "bench.md").write_text(report + "\n")
    (out / "bench.html").write_text(html_report(rows, meta))
    print(report)
    return 0


def _bracketed(opening: dict, closing: dict) -> dict:
    """The opening plain run with the mean of both runs' times: the CPU's speed across the cells between them."""
    mean = lambda key: (opening[key] + closing[key]) / 2  # noqa: E731
    return {**opening, "seconds": mean("seconds"), **({"decode_s": mean("decode_s")} if "decode_s" in opening else {})}


def _tps(run) -> float:
    return len(run["ids"]) / run["seconds"]


def _f(x) -> str:
    return "–" if x is None else f"{x:.2f}"
