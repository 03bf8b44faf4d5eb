"""The app served on a GPU, every drafter raced through /run; the team runs it when a GPU is lent.

The app on a GPU, end to end: `python app.py --device cuda` serving the tiny pair (with Medusa, EAGLE and DFlash
heads), its warm-up on the GPU (static caches, CUDA graphs) read from its log, then a race with every drafter on the
menu through the /run endpoint, greedy and sampled, in each precision the app offers there.

    python scripts/gpu_app_check.py [--device cuda] [--out app-gpu.json]

It prints one line per race (identical or not, tokens/s of both sides) and every line of the app's log that says
something failed, fell back or warned; it exits 1 when the warm-up failed, a race gave an error, or a greedy race
was not identical to plain decoding. `--device cpu` checks the script itself on a machine without a GPU.
"""

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from tiny import save_served_pair  # noqa: E402

WARMED, FAILED = "warmed up on the GPU", "could not preload"
RUN_SUMMARY = 8  # /run's outputs: status, echo, plain, speculative, Figure 1's rows, metrics, badge, chart, summary
TROUBLE = ("fail", "fall", "eager", "warn", "error", "traceback", "could not")


def start_app(device: str, pair_flags: list[str], port: int, log) -> subprocess.Popen:
    flags = ["--device", device, "--port", str(port), *pair_flags]
    return subprocess.Popen([sys.executable, "app.py", *flags], cwd=ROOT, stdout=log, stderr=log, text=True)


def wait_ready(proc, log_path: Path, url: str, gpu: bool, limit: float = 600) -> str:
    """The log's warm-up line on a GPU (the preload's failure line otherwise), once the server answers."""
    from gradio_client import Client

    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"app.py exited:\n{log_path.read_text()[-3000:]}")
        text = log_path.read_text()
        line = next((x for x in text.splitlines() if WARMED in x or FAILED in x), "")
        if line or not gpu:
            try:
                Client(url, verbose=False)
                return line
            except Exception:
                pass
        time.sleep(1)
    raise SystemExit(f"app.py was not ready in {limit:.0f} s:\n{log_path.read_text()[-3000:]}")


def race(client, pair: str, drafter: str, dtype: str, temperature: float, max_new: int, **options) -> dict:
    outputs = client.predict(
        pair=pair,
        drafter=drafter,
        dtype=dtype,
        prompt="w1 w2 w3 w4",
        gamma=4,
        max_new=max_new,
        temperature=temperature,
        seed=0,
        **options,
        api_name="/run",
    )
    status, summary = outputs[0], outputs[RUN_SUMMARY]
    if not summary or not summary.get("finished"):
        return {"error": status}
    plain, spec = summary["plain"], summary["speculative"]
    return {
        "identical": summary["identical"],
        "tokens": len(summary["speculative_tokens"]),
        "plain_tps": plain["tokens_per_s"],
        "spec_tps": spec["tokens_per_s"],
        "acceptance": spec["acceptance_rate"],
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--max-new", type=int, default=200)
    p.add_argument("--out", default="app-gpu.json")
    args = p.parse_args()
    from gradio_client import Client

    from specviz.drafters.registry import kinds

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    root = Path(tempfile.mkdtemp(prefix="specviz-gpu-check-"))
    log_path = root / "app.log"
    began = time.perf_counter()
    pair, pair_flags = save_served_pair(root)
    with open(log_path, "w") as log:
        proc = start_app(args.device, pair_flags, port, log)
    try:
        warm = wait_ready(proc, log_path, url, args.device == "cuda")
        ready_s = time.perf_counter() - began
        print(f"ready in {ready_s:.0f} s: {warm or '(no warm-up on a CPU)'}", flush=True)
        client = Client(url, verbose=False)
        dtypes = ["bfloat16", "float32"] if args.device == "cuda" else ["float32"]
        races, bad = [], []
        for dtype in dtypes:
            # every drafter at its defaults, then each other choice of the option that changes the shape of a step
            # (the hybrid's copy branch widens the model's tree; its default, auto, means copy here on a GPU and none
            # on a CPU, so both explicit choices run on either)
            variants = [(k, {}) for k in kinds(menu_only=True)]
            variants += [
                (k, {s.name: choice})
                for k in kinds(menu_only=True)
                for s in k.options.specs()
                if s.name == "hybrid_branch"
                for choice in s.choices
                if choice != s.default
            ]
            for kind, options in variants:
                label = kind.name + "".join(f" {v}" for v in options.values())
                for temperature in (0.0, 1.0):
                    r = race(client, pair, kind.name, dtype, temperature, args.max_new, **options)
                    r.update(drafter=label, dtype=dtype, temperature=temperature)
                    races.append(r)
                    if "error" in r:
                        bad.append(r)
                        print(f"{dtype} {label} T={temperature}: ERROR {r['error'][:300]}", flush=True)
                        continue
                    if temperature == 0 and not r["identical"]:
                        bad.append(r)
                    print(
                        f"{dtype:8} {label:8} T={temperature}: identical={r['identical']} "
                        f"{r['tokens']} tokens, plain {r['plain_tps']:.1f} tok/s, speculative {r['spec_tps']:.1f} "
                        f"tok/s, acceptance {r['acceptance']}",
                        flush=True,
                    )
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    trouble = [x for x in log_path.read_text().splitlines() if any(w in x.lower() for w in TROUBLE)]
    print("app log lines that say something failed, fell back or warned:", *(trouble or ["(none)"]), sep="\n  ")
    report = {"device": args.device, "ready_s": ready_s, "warm_up": warm, "races": races, "log_trouble": trouble}
    Path(args.out).write_text(json.dumps(report, indent=1))
    return 1 if bad or (args.device == "cuda" and WARMED not in warm) else 0


if __name__ == "__main__":
    sys.exit(main())
