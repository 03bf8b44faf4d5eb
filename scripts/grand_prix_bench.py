"""Does racing many lanes at once change what each lane measures? Each lane's own-clock tokens/s in a Grand Prix of
every drafter, against the same drafter decoding alone, on the offline Qwen2.5-Coder 1.5B ← 0.5B pair (bfloat16,
int8 draft, exact mode), the app's first code example, greedy; medians of `--repeats` runs, the Grand Prix and the
lone runs alternating which goes first:

    python scripts/grand_prix_bench.py                  # about 10 minutes on 2 cores; run it alone

Prints one line per lane (Grand Prix median, alone median, their ratio, the spread) and, in the Grand Prix, whether
every lane's tokens were plain decoding's and whether the turn order kept the race's rule."""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.events import PLAIN, StepEvent, generated_ids, summarize  # noqa: E402
from specviz.models import encode_prompt  # noqa: E402
from specviz.models.loading import best_draft_dtype  # noqa: E402
from specviz.runs import Pair, generate_named, open_pair  # noqa: E402
from specviz.runtime import ASSETS, quiet_transformers  # noqa: E402
from specviz.settings import Settings  # noqa: E402
from specviz.views.grand_prix import turns_keep_the_rule  # noqa: E402
from specviz.workload.entrants import lane_entrants  # noqa: E402
from specviz.workload.lanes import lane_runs, run_lanes  # noqa: E402


def grand_prix(target, draft, ids, base, runs) -> tuple[dict[str, float], bool, list[str]]:
    """One Grand Prix: each lane's own-clock tokens/s, whether every lane wrote plain's tokens, and rule breaches."""
    events: dict[str, list[StepEvent]] = {PLAIN: [], **{r.name: [] for r in runs}}
    order, turns = list(events), []
    for news in run_lanes(Pair(target, draft), ids, base, runs):
        if news.kind == "step":
            events[news.lane].append(news.event)
            turns.append(order.index(news.lane))
        elif news.kind == "failed":
            raise RuntimeError(f"{news.lane}: {news.message}")
    plain = generated_ids(events[PLAIN])
    same = all(generated_ids(e) == plain for e in events.values())
    breaches = turns_keep_the_rule([events[name] for name in order], turns)
    return {name: summarize(e).tokens_per_s for name, e in events.items()}, same, breaches


def alone(target, draft, ids, base, runs) -> dict[str, float]:
    """Plain decoding and each lane decoding by itself, one after the other: own-clock tokens/s."""
    speeds = {PLAIN: summarize(generate_named(target, ids, base)).tokens_per_s}
    for r in runs:
        speeds[r.name] = summarize(generate_named(target, ids, r.settings, r.drafter, draft, r.options)).tokens_per_s
    return speeds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--draft", default="qwen2.5-coder-0.5b-instruct")
    p.add_argument("--drafters", help="lanes by name (default: every drafter that can run with the pair)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", help="also write the runs to this file")
    args = p.parse_args()
    quiet_transformers()
    torch.set_num_threads(2)
    pair = open_pair(args.target, "bfloat16", "cpu", args.draft, best_draft_dtype(torch.device("cpu")) or "bfloat16")
    target, draft, exact = pair.target, pair.draft, pair.exact
    prompt = json.loads((ASSETS / "prompts.json").read_text())["code"][0]
    ids = encode_prompt(target, prompt)
    base = Settings(max_new_tokens=args.max_new_tokens)
    entrants = lane_entrants(
        args.drafters, base, False, lambda k: k.parse(dict(k.listing.preferred)), args.target, True
    )
    runs = lane_runs(entrants)
    print(f"{args.target} ← {args.draft}, {exact}; lanes: {', '.join(r.name for r in runs)}", flush=True)
    together, apart, verdicts = [], [], []
    with torch.inference_mode():
        for repeat in range(args.repeats):
            began = time.perf_counter()
            first_the_race = repeat % 2 == 0
            if not first_the_race:
                apart.append(alone(target, draft, ids, base, runs))
            speeds, same, breaches = grand_prix(target, draft, ids, base, runs)
            together.append(speeds)
            verdicts.append((same, breaches))
            if first_the_race:
                apart.append(alone(target, draft, ids, base, runs))
            print(f"repeat {repeat + 1}: {time.perf_counter() - began:.0f} s; every lane = plain: {same}; "
                  f"rule breaches: {len(breaches)}", flush=True)  # fmt: skip
    print(f"\n{'lane':<10} {'Grand Prix tok/s':>17} {'alone tok/s':>12} {'ratio':>7}   Grand Prix runs / alone runs")
    rows = []
    for name in [PLAIN, *(r.name for r in runs)]:
        gp, solo = [s[name] for s in together], [s[name] for s in apart]
        ratio = statistics.median(gp) / statistics.median(solo)
        rows.append({"lane": name, "grand_prix": gp, "alone": solo, "ratio": ratio})
        print(
            f"{name:<10} {statistics.median(gp):>17.2f} {statistics.median(solo):>12.2f} {ratio:>7.3f}   "
            + " ".join(f"{x:.2f}" for x in gp)
            + " / "
            + " ".join(f"{x:.2f}" for x in solo)
        )
    within = sum(abs(r["ratio"] - 1) <= 0.05 for r in rows)
    print(f"\n{within} of {len(rows)} lanes within 5% of alone; every Grand Prix identical to plain: "
          f"{all(v[0] for v in verdicts)}; rule kept in every race: {all(not v[1] for v in verdicts)}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "verdicts": verdicts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
