"""The README's first-race figure, the app's default race through /run; run by anyone reproducing it.

The app's first race as a visitor sees it: `python app.py` on the default pair, the code example with every setting
at its default, through the public /run API; then the same with each override given, e.g.

    python scripts/first_race.py draft_dtype=int8 adaptive=true draft_tree=tree,adaptive=true

(each argument one race; several overrides in one race joined by commas). Prints each race's plain and speculative
tokens/s (each side on its own clock) and their ratio. Run it alone."""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from gradio_client import Client

ROOT = Path(__file__).resolve().parent.parent
SUMMARY = 8  # the /run API's ninth output: the run's summary as JSON


def value(text: str):
    return {"true": True, "false": False}.get(text.lower(), int(text) if text.isdigit() else text)


def main(argv: list[str]) -> None:
    overrides = [dict(pair.split("=", 1) for pair in item.split(",")) for item in argv]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 600
        while True:
            try:
                client = Client(f"http://127.0.0.1:{port}/", verbose=False)
                break
            except Exception:
                if time.time() > deadline or server.poll() is not None:
                    raise SystemExit("error: the app did not start") from None
                time.sleep(1)
        parameters = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/run"]["parameters"]
        defaults = {p["parameter_name"]: p["parameter_default"] for p in parameters}
        defaults["prompt"] = json.loads((ROOT / "assets" / "prompts.json").read_text())["code"][0]
        for over in [{}, *overrides]:
            asked = {**defaults, **{k: value(v) for k, v in over.items()}}
            summary = client.predict(**asked, api_name="/run")[SUMMARY]
            plain, spec = summary["plain"]["tokens_per_s"], summary["speculative"]["tokens_per_s"]
            shown = {
                k: asked[k]
                for k in ("pair", "drafter", "dtype", "draft_dtype", "gamma", "adaptive", "max_new", *over)
                if k in asked
            }
            print(
                f"{json.dumps(shown, ensure_ascii=False)}: plain {plain:.2f} tok/s, speculative {spec:.2f} tok/s, "
                f"{spec / plain:.2f}x, identical {summary['identical']}",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main(sys.argv[1:])
