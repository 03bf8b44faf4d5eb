"""Measure the app: seconds from `python app.py` to the first finished side-by-side run, and the UI's
overhead (each side's decode time inside the app vs the same run through the CLI).

    python scripts/app_timing.py [--port 7870] [--max-new-tokens 128] [--gamma 4] [--skip-cli]

Set SPECVIZ_CACHE to an empty folder to time a first start that converts the offline models.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wait_for_client(port: int, proc, limit_s: float = 600):
    from gradio_client import Client

    deadline = time.time() + limit_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"app exited with {proc.returncode}")
        try:
            return Client(f"http://127.0.0.1:{port}/", verbose=False)
        except Exception:
            time.sleep(0.5)
    raise SystemExit("app did not come up")


def cli_decode_s(prompt, target, draft, args) -> dict:
    out = {}
    for side, extra in (("plain", []), ("speculative", ["--draft", draft])):
        cmd = [sys.executable, "-m", "specviz", "generate", "--target", target, *extra, "--prompt", prompt, "--json",
               "--max-new-tokens", str(args.max_new_tokens), "--gamma", str(args.gamma)]
        result = json.loads(subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout)
        out[side] = result["metrics"]
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=7870)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--gamma", type=int, default=4)
    p.add_argument("--skip-cli", action="store_true")
    p.add_argument("--repeats", type=int, default=1, help="further app runs, each followed by the CLI pair; medians")
    args = p.parse_args()
    prompt = json.loads((ROOT / "assets" / "prompts.json").read_text())["code"][0]

    began = time.time()
    proc = subprocess.Popen([sys.executable, "app.py", "--port", str(args.port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=sys.stderr)
    try:
        client = wait_for_client(args.port, proc)
        up = time.time() - began
        pair = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/run"]["parameters"][0]["parameter_default"]
        *_, summary = client.predict(pair, "draft", "bfloat16", prompt, args.gamma, args.max_new_tokens, 0, 0, 1, 0,
                                     api_name="/run")
        first = time.time() - began
        print(f"server answering after {up:.1f} s; first finished side-by-side run after {first:.1f} s", flush=True)
        ratios = {"plain": [], "speculative": []}
        for _ in range(args.repeats):  # app run, then the same two runs through the CLI, alternating
            *_, again = client.predict(pair, "draft", "bfloat16", prompt, args.gamma, args.max_new_tokens, 0, 0, 1, 0,
                                       api_name="/run")
            cli = cli_decode_s(prompt, "qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct", args)
            for side in ratios:
                ratios[side].append(again[side]["decode_s"] / cli[side]["decode_s"])
                print(f"repeat {side:12s} app {again[side]['decode_s']:.2f} s cli {cli[side]['decode_s']:.2f} s", flush=True)
        for side, values in ratios.items():
            if values:
                print(f"median app/cli decode time {side}: {sorted(values)[len(values) // 2]:.3f} over {len(values)}")
    finally:
        proc.terminate()
        proc.wait()
    app = {side: summary[side] for side in ("plain", "speculative")}
    for side, m in app.items():
        print(f"app  {side:12s} decode {m['decode_s']:.2f} s  {m['tokens_per_s']:.2f} tok/s  prefill {m['prefill_s']:.2f} s")
    print(f"app wall time of the run {summary['wall_s']:.2f} s vs sum of own clocks "
          f"{sum(m['decode_s'] + m['prefill_s'] for m in app.values()):.2f} s; identical: {summary['identical']}")
    if args.skip_cli or args.repeats:
        return
    cli = cli_decode_s(prompt, "qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct", args)
    for side, m in cli.items():
        ratio = app[side]["decode_s"] / m["decode_s"]
        print(f"cli  {side:12s} decode {m['decode_s']:.2f} s  {m['tokens_per_s']:.2f} tok/s  app/cli decode time {ratio:.3f}")


if __name__ == "__main__":
    main()
