"""Plain decoding against a few drafter settings on one prompt of each task family, one line per run: a quick look
before a full benchmark (python -m specviz bench), with the offline pair (1.5B target in bfloat16, int8 0.5B draft),
greedy, in one process. Each setting is NAME=DRAFTER,γ[,adaptive][,option=value...], e.g.

    python scripts/family_race.py --kinds code,qa "chain=draft,4" "tree=draft,8,adaptive,draft_tree=tree" \\
        "hybrid=hybrid,8,adaptive"

Prints tokens/s, the speedup over the plain run just before, τ, the draft tokens verified per drafting step and the
share of drafting steps whose draft was copied. Single runs on this CPU vary by 10-30%. Run it alone."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specviz.bench.plan import load_prompts  # noqa: E402
from specviz.drafters.registry import default_kind  # noqa: E402
from specviz.events import (
    MODEL,  # noqa: E402
    summarize,  # noqa: E402
)
from specviz.models import encode_prompt, load_model  # noqa: E402
from specviz.runs import generate_named  # noqa: E402
from specviz.runtime import quiet_transformers  # noqa: E402
from specviz.settings import Settings  # noqa: E402


def setting(text: str):
    name, _, spec = text.partition("=")
    drafter, gamma, *rest = spec.split(",")
    options = dict(item.split("=", 1) for item in rest if "=" in item)
    return name, drafter, int(gamma), "adaptive" in rest, options


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--kinds", default="code,prose,translation,summarization,qa,math,rag")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("settings", nargs="+", help="NAME=DRAFTER,γ[,adaptive][,option=value...]")
    args = p.parse_args()
    runs = [setting(s) for s in args.settings]
    quiet_transformers()
    target = load_model("qwen2.5-coder-1.5b-instruct", "bfloat16")
    draft = load_model("qwen2.5-coder-0.5b-instruct", "int8")
    warm = encode_prompt(target, "Say hi.")
    list(
        generate_named(target, warm, Settings(max_new_tokens=8, gamma=4), default_kind().name, draft)
    )  # both models' first
    for kind, prompt in load_prompts(args.kinds.split(","), 1):
        ids = encode_prompt(target, prompt)
        plain = None
        for name, drafter, gamma, adaptive, options in [("plain", "none", 1, False, {}), *runs]:
            events = list(
                generate_named(
                    target,
                    ids,
                    Settings(max_new_tokens=args.max_new_tokens, gamma=gamma, adaptive=adaptive),
                    drafter,
                    draft,
                    options,
                )
            )
            m = summarize(events)
            plain = plain or m.tokens_per_s
            drafting = [e for e in events if e.proposed]
            nodes = sum(e.forward_tokens - 1 for e in drafting) / max(1, len(drafting))
            copied = sum(e.origin not in (None, MODEL) for e in drafting) / max(1, len(drafting))
            print(
                f"{kind:13s} {len(ids):4d} {name:10s} {m.tokens_per_s:6.2f} tok/s {m.tokens_per_s / plain:5.2f}x "
                f"τ {m.mean_tokens_per_step:.2f} nodes {nodes:4.1f} copied {copied:.0%}",
                flush=True,
            )


if __name__ == "__main__":
    main()
