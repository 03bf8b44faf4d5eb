"""Hold specviz's llama.cpp runtime to llama.cpp's own binaries: same GGUF files, prompts, threads; medians of rounds.

For each example prompt (the app's families, first prompt each) and round: specviz on the llama.cpp runtime decodes
plainly and with each drafter at its defaults (the example's own drafter among them); llama.cpp's `llama-bench`
times its plain decoding (tg N), `llama-server` serves the same prompts plainly and with its speculative types (its
draft model at several draft lengths, its n-gram lookups, its recommended default), and `llama-completion` writes
its greedy text once, which specviz's plain text must equal. Every figure is decode tokens/s (prefill apart), α the
accepted share of drafted tokens, τ tokens per target forward (llama.cpp's: its accepted drafts over its drafting
steps, estimated from its counts). Ends with the verify cost curve of each runtime and precision on this CPU. The
binaries: scripts/build_llama_tools.sh. Usage:

    python scripts/llama_race.py --tools ~/.cache/specviz/llama-tools/bin --rounds 3 --out llama-race.json
"""

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.app.ui.examples import FAMILIES, example_kinds  # noqa: E402
from specviz.bench.plan import load_prompts  # noqa: E402
from specviz.drafters.registry import NO_DRAFTER, kind, kinds  # noqa: E402
from specviz.events import generated_ids, summarize  # noqa: E402
from specviz.models import encode_prompt  # noqa: E402
from specviz.runs import generate_named  # noqa: E402
from specviz.runtimes.llama_cpp.binding import threads  # noqa: E402
from specviz.runtimes.llama_cpp.gguf_model import locate_gguf  # noqa: E402
from specviz.runtimes.pair import PairAsk, open_pair  # noqa: E402
from specviz.runtimes.runtime_registry import runtime  # noqa: E402
from specviz.settings import Settings  # noqa: E402

# specviz's drafters that run on llama.cpp with a draft model or none, each at its defaults (heads do not run there)
LANES = tuple(k.name for k in kinds(menu_only=True) if not k.unmet(k.parse({}), runtime("llama.cpp")))


def servers(draft: Path) -> dict[str, list[str]]:
    """llama-server's speculative settings raced: its draft model at draft lengths 2, 4 and 8 (its defaults
    otherwise), its lookups, and its recommended default (--spec-default: ngram-mod)."""
    model = ["-md", str(draft), "--spec-type", "draft-simple"]
    return {
        "plain": [],
        "draft-simple n-max 2": [*model, "--spec-draft-n-max", "2"],
        "draft-simple n-max 4": [*model, "--spec-draft-n-max", "4"],
        "draft-simple n-max 8": [*model, "--spec-draft-n-max", "8"],
        "ngram-simple": ["--spec-type", "ngram-simple", "--spec-draft-n-max", "16"],
        "ngram-map-k": ["--spec-type", "ngram-map-k", "--spec-draft-n-max", "16"],
        "spec-default (ngram-mod)": ["--spec-default"],
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(tools: Path, target: Path, flags: list[str], texts: list[str], n: int, threads_: int) -> list[dict]:
    """One llama-server with `flags`, each text sent once (greedy, no prompt cache); each reply's timings."""
    port = free_port()
    command = [str(tools / "llama-server"), "-m", str(target), "-t", str(threads_), "-tb", str(threads_)]
    command += ["--port", str(port), "-c", "8192", "-np", "1", *flags]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(240):
            try:
                if json.load(urllib.request.urlopen(url + "/health", timeout=2)).get("status") == "ok":
                    break
            except OSError:
                time.sleep(0.5)
        replies = []
        for text in texts:
            body = json.dumps({"prompt": text, "n_predict": n, "temperature": 0, "cache_prompt": False, "seed": 0})
            request = urllib.request.Request(url + "/completion", body.encode(), {"Content-Type": "application/json"})
            reply = json.load(urllib.request.urlopen(request, timeout=600))
            t = reply["timings"]
            drafted, accepted = t.get("draft_n", 0), t.get("draft_n_accepted", 0)
            replies.append(
                {
                    "tok_s": t["predicted_per_second"],
                    "tokens": t["predicted_n"],
                    "alpha": accepted / drafted if drafted else None,
                    "drafted": drafted,
                    "accepted": accepted,
                    "text": reply["content"],
                }
            )
        return replies
    finally:
        server.terminate()
        server.wait(30)


def bench_plain(tools: Path, target: Path, n: int, threads_: int, depth: int = 0) -> float:
    """llama-bench's tg N: plain decoding of N tokens after `depth` tokens of context (a prompt's length), tokens/s."""
    out = subprocess.run(
        [str(tools / "llama-bench"), "-m", str(target), "-t", str(threads_), "-p", "0", "-n", str(n), "-r", "1"]
        + ["-d", str(depth), "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(json.loads(out)[0]["avg_ts"])


def completion_text(tools: Path, target: Path, text: str, n: int, threads_: int) -> str:
    """llama-completion's greedy continuation of `text` (chat template already applied)."""
    out = subprocess.run(  # -p as it is: a prompt file would lose its last line break, --escape its backslashes
        [str(tools / "llama-completion"), "-m", str(target), "-p", text, "--no-escape", "-n", str(n), "--temp", "0"]
        + ["-no-cnv", "--no-display-prompt", "-t", str(threads_), "--simple-io", "-s", "0"],
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return out.rstrip().removesuffix("[end of text]").rstrip()  # its end-of-text marker and closing line break


def specviz_run(target, draft, ids, drafter: str, n: int) -> dict:
    """specviz on llama.cpp: `drafter` at its defaults (its measured best γ and adaptivity), greedy."""
    options = None
    if drafter == NO_DRAFTER:
        settings = Settings(max_new_tokens=n)
    else:
        listing = kind(drafter).listing
        settings = Settings(
            max_new_tokens=n, gamma=listing.prefers("gamma", 4), adaptive=listing.prefers("adaptive", False)
        )
        options = dict(listing.preferred)
    needs = drafter != NO_DRAFTER and kind(drafter).draft_needed(kind(drafter).parse(options))
    events = list(generate_named(target, ids, settings, drafter, draft if needs else None, options, explain=False))
    m = summarize(events)
    return {
        "tok_s": m.tokens_per_s,
        "tokens": m.new_tokens,
        "alpha": m.acceptance_rate,
        "tau": m.mean_tokens_per_step,
        "ids": generated_ids(events),
    }


def median(values) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def cost_curves(target_name: str, target) -> dict[str, dict[int, float]]:
    """Every runtime's and precision's forward over 1, 2, 4, 8, 16 tokens on this CPU, in one-token forwards."""
    import torch
    from transformers import AutoConfig

    from specviz.models.kernel_costs import Shape
    from specviz.models.kernel_costs import measure as torch_measure
    from specviz.runtimes.llama_cpp.forward_costs import measure as llama_measure

    widths = (1, 2, 4, 8, 16)
    curves = {f"llama.cpp {target.model.describe()}": llama_measure(target.model, widths)}
    path = locate_gguf(target_name)
    shape = Shape.of(AutoConfig.from_pretrained(path.parent, gguf_file=path.name))
    torch.set_num_threads(threads())
    for precision in ("bfloat16", "float32", "int8"):
        curves[f"transformers {precision} (random layers of the model's shape)"] = torch_measure(
            shape, precision, widths
        )
    return {name: {w: s / c[1] for w, s in c.items()} | {"one_s": c[1]} for name, c in curves.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tools", required=True, type=Path, help="the folder of llama-bench, llama-server, ...")
    p.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--draft", default="qwen2.5-coder-0.5b-instruct")
    p.add_argument("--kinds", default=",".join(k for k, _ in FAMILIES))
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path)
    p.add_argument(
        "--no-copy",
        action="store_true",
        help="leave out the copy-heavy prompt (the summarization example's article, asked to be copied word for word)",
    )
    args = p.parse_args()
    n, t = args.max_new_tokens, threads()
    pair = open_pair(PairAsk(args.target, args.draft, "llama.cpp", device="cpu"))
    target, draft = pair.target, pair.draft
    target_file, draft_file = locate_gguf(args.target), locate_gguf(args.draft)
    examples = {e.key: e.drafter for e in example_kinds()}
    prompts = [(k, p) for k, p in load_prompts(args.kinds.split(","), 1)]
    if not args.no_copy:  # where a lookup's copies hold for long: what a verify as dear as llama.cpp's asks for
        article = load_prompts(["summarization"], 1)[0][1].split("\n\n", 1)[1][:1500]
        prompts.append(("copy", "Copy the following text exactly, word for word, with no changes:\n\n" + article))
    ids = {k: encode_prompt(target, p) for k, p in prompts}
    texts = {k: target.tokenizer.decode(ids[k]) for k, _ in prompts}
    for k, _ in prompts:  # every prompt's contexts made and its kernels warm before anything is timed
        specviz_run(target, draft, ids[k], NO_DRAFTER, 8)
    result = {"cpu": target.model.describe(), "threads": t, "n": n, "bench": [], "specviz": {}, "llama": {}}
    result["bench_at_depth"] = {}
    for r in range(args.rounds):
        result["bench"].append(bench_plain(args.tools, target_file, n, t))
        for k, _ in prompts:
            depth_run = bench_plain(args.tools, target_file, n, t, len(ids[k]))
            result["bench_at_depth"].setdefault(k, []).append(depth_run)
            for lane in (NO_DRAFTER, *LANES):
                run = specviz_run(target, draft, ids[k], lane, n)
                result["specviz"].setdefault(k, {}).setdefault(lane, []).append(run)
        for name, flags in servers(draft_file).items():
            replies = serve(args.tools, target_file, flags, [texts[k] for k, _ in prompts], n, t)
            for (k, _), reply in zip(prompts, replies):
                result["llama"].setdefault(k, {}).setdefault(name, []).append(reply)
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    result["completion_equal"] = {
        k: completion_text(args.tools, target_file, texts[k], n, t)
        == target.tokenizer.decode(result["specviz"][k][NO_DRAFTER][0]["ids"], skip_special_tokens=True).rstrip()
        for k, _ in prompts
    }
    result["curves"] = cost_curves(args.target, target)
    print(report(result, examples))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


def report(result: dict, examples: dict[str, str]) -> str:
    bench = median(result["bench"])
    lines = [
        f"llama-bench tg{result['n']}: {bench:.2f} tok/s (rounds {', '.join(f'{b:.2f}' for b in result['bench'])})",
        "",
        "| prompt | specviz plain | ÷ llama-bench (at the prompt's depth) | = llama-completion | example's drafter "
        "| ×plain (α, τ) | best "
        "of specviz's | ×plain | llama.cpp plain (server) | llama.cpp's best | ×its plain (α) | specviz ÷ llama.cpp's "
        "best |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, lanes in result["specviz"].items():
        speed = {lane: median(r["tok_s"] for r in runs) for lane, runs in lanes.items()}
        plain, ex = speed[NO_DRAFTER], examples.get(k, max(LANES, key=lambda lane: speed[lane]))
        ex_runs = lanes[ex]
        alpha, tau = median(r["alpha"] for r in ex_runs), median(r["tau"] for r in ex_runs)
        best = max(LANES, key=lambda lane: speed[lane])
        theirs = {name: median(r["tok_s"] for r in runs) for name, runs in result["llama"][k].items()}
        their_best = max((name for name in theirs if name != "plain"), key=lambda name: theirs[name])
        their_alpha = median(r["alpha"] for r in result["llama"][k][their_best])
        lines.append(
            f"| {k} | {plain:.2f} | {plain / bench:.2f} ({plain / median(result['bench_at_depth'][k]):.2f}) | "
            f"{'yes' if result['completion_equal'][k] else 'NO'} | {ex if k in examples else ex + ' (no example)'} | "
            f"{speed[ex] / plain:.2f}× ({_num(alpha)}, {_num(tau)}) | {best} | {speed[best] / plain:.2f}× | "
            f"{theirs['plain']:.2f} | {their_best} | {theirs[their_best] / theirs['plain']:.2f}× ({_num(their_alpha)}) "
            f"| {speed[ex] / theirs[their_best]:.2f} |"
        )
    lines += ["", "| runtime, precision | one token (ms) | 2 | 4 | 8 | 16 tokens (in one-token forwards) |"]
    lines += ["|---|---|---|---|---|---|"]
    for name, c in result["curves"].items():
        lines.append(f"| {name} | {1000 * c['one_s']:.1f} | " + " | ".join(f"{c[w]:.2f}" for w in (2, 4, 8, 16)) + " |")
    return "\n".join(lines)


def _num(value) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    raise SystemExit(main())
