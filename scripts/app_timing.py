"""The app's own timings (start-up, UI overhead, first token in a browser); run by whoever changes the app.

Measure the app: seconds from `python app.py` to the first finished side-by-side run, the UI's overhead (each
side's decode time inside the app vs the same run through the CLI), and on request the time from a click on Run to
the first token on screen in a real browser (--browser), the wall time of "Compare all" (--compare), and a workload
of one's own prompts as a product manager runs it (--workload FILE: pasted into "Your prompts" in chromium, every
drafter at its best, the table and the time-left estimate read every 30 s, the report downloaded and opened offline).

    python scripts/app_timing.py [--port 7870] [--max-new-tokens 128] [--gamma 4] [--skip-cli] [--browser] [--compare]
        [--workload FILE [--out DIR]]

Set SPECVIZ_CACHE to an empty folder to time a first start that converts the offline models.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = 8  # the /run endpoint's "run in numbers" output


def browser_timing(port: int) -> None:
    """Click Run in chromium; seconds to the first token on screen and to the identity badge (median of 3)."""
    from playwright.sync_api import sync_playwright

    firsts, finished = [], []
    with sync_playwright() as pw:
        browser = _chromium(pw)
        for _ in range(3):
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("#sv-run")
            began = time.time()
            page.click("#sv-run")
            page.wait_for_selector("#sv-plain .sv-text span, #sv-spec .sv-text span", timeout=300_000)
            firsts.append(time.time() - began)
            page.wait_for_selector("#sv-badge .sv-badge-ok, #sv-badge .sv-badge-diff", timeout=600_000)
            finished.append(time.time() - began)
            page.close()
        browser.close()
    print(
        f"browser: click to first token on screen {sorted(firsts)[1]:.2f} s (runs: "
        f"{', '.join(f'{x:.2f}' for x in firsts)}), click to the identity badge {sorted(finished)[1]:.1f} s",
        flush=True,
    )


def _chromium(pw):
    import shutil

    return pw.chromium.launch(
        executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
    )


def workload_timing(port: int, prompts_file: Path, out: Path) -> None:
    """The "Your prompts" tab in chromium at 1280×720 with every setting at its default (the app's token budget, every
    drafter at its best): the file's text pasted, one click;
    the progress line every 30 s (screenshots at the first filled row and at the end), the wall time to "done", then
    the report downloaded, weighed and opened in an offline context."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = _chromium(pw)
        page = browser.new_page(viewport={"width": 1280, "height": 720}, accept_downloads=True)
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("#sv-run")
        page.get_by_role("tab", name="Your prompts").click()
        page.locator("#sv-workload-prompts textarea").fill(prompts_file.read_text(encoding="utf-8"))
        began, said, shot_mid = time.time(), 0.0, False
        page.click("#sv-workload-run")
        while "done;" not in (progress := page.inner_text("#sv-workload-progress")):
            if "error" in progress or time.time() - began > 7200:
                raise SystemExit(f"workload: {progress}")
            if not shot_mid and page.locator("#sv-workload-table .sv-grid td:text-matches('×$')").count() >= 3:
                page.screenshot(path=str(out / "workload-running.png"), full_page=True)
                shot_mid = True
            if time.time() - said >= 30:
                said = time.time()
                print(f"  {said - began:6.0f} s  {' '.join(progress.split())}", flush=True)
            time.sleep(1)
        wall = time.time() - began
        print(f"workload: {wall:.0f} s ({wall / 60:.1f} min) from the click to done; {' '.join(progress.split())}")
        page.screenshot(path=str(out / "workload-done.png"), full_page=True)
        for button, name in (("#sv-workload-report", "report.html"), ("#sv-workload-csv", "report.csv")):
            with page.expect_download() as got:
                page.click(button)
            got.value.save_as(out / name)
            print(f"{name}: {(out / name).stat().st_size:,} bytes", flush=True)
        offline = browser.new_context(offline=True, viewport={"width": 1280, "height": 1000})
        opened = offline.new_page()
        opened.goto((out / "report.html").resolve().as_uri())
        print(f"report opened offline: {opened.locator('svg').count()} charts/drawings, {opened.title()!r}")
        opened.screenshot(path=str(out / "report.png"))
        browser.close()


def compare_timing(client, pair: str, drafter: str, prompt: str, args) -> None:
    began = time.time()
    out = client.predict(
        pair, drafter, "bfloat16", prompt, args.gamma, args.max_new_tokens, 0, 0, 1, 0, api_name="/compare"
    )
    import re

    rows = [re.sub(r"<[^>]+>", " ", row).split() for row in re.findall(r"<tr>(.*?)</tr>", out[1])]
    print(
        f"Grand Prix: {time.time() - began:.1f} s wall for plain + every drafter, {args.max_new_tokens} tokens",
        flush=True,
    )
    for row in rows:
        print("   ", " ".join(row), flush=True)


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
        cmd = [
            sys.executable,
            "-m",
            "specviz",
            "generate",
            "--target",
            target,
            *extra,
            "--prompt",
            prompt,
            "--json",
            "--max-new-tokens",
            str(args.max_new_tokens),
            "--gamma",
            str(args.gamma),
        ]
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
    p.add_argument("--browser", action="store_true", help="also time click → first token in chromium")
    p.add_argument("--compare", action="store_true", help="also time a Grand Prix of every drafter (/compare)")
    p.add_argument("--workload", type=Path, help="also run this prompt file through Your prompts in chromium")
    p.add_argument("--out", type=Path, default=ROOT / "test-artifacts" / "workload", help="--workload's downloads")
    args = p.parse_args()
    prompt = json.loads((ROOT / "assets" / "prompts.json").read_text())["code"][0]

    began = time.time()
    proc = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(args.port)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sys.stderr
    )
    try:
        client = wait_for_client(args.port, proc)
        up = time.time() - began
        # the pair and the drafter a visitor starts with: the defaults of /run's first two parameters
        run_api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/run"]
        pair, drafter = (p["parameter_default"] for p in run_api["parameters"][:2])
        summary = client.predict(
            pair, drafter, "bfloat16", prompt, args.gamma, args.max_new_tokens, 0, 0, 1, 0, api_name="/run"
        )[SUMMARY]
        first = time.time() - began
        print(f"server answering after {up:.1f} s; first finished side-by-side run after {first:.1f} s", flush=True)
        if args.browser:
            browser_timing(args.port)
        if args.compare:
            compare_timing(client, pair, drafter, prompt, args)
        if args.workload:
            workload_timing(args.port, args.workload, args.out)
        ratios = {"plain": [], "speculative": []}
        for _ in range(args.repeats):  # app run, then the same two runs through the CLI, alternating
            again = client.predict(
                pair, drafter, "bfloat16", prompt, args.gamma, args.max_new_tokens, 0, 0, 1, 0, api_name="/run"
            )[SUMMARY]
            cli = cli_decode_s(prompt, "qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct", args)
            for side in ratios:
                ratios[side].append(again[side]["decode_s"] / cli[side]["decode_s"])
                print(
                    f"repeat {side:12s} app {again[side]['decode_s']:.2f} s cli {cli[side]['decode_s']:.2f} s",
                    flush=True,
                )
        for side, values in ratios.items():
            if values:
                print(f"median app/cli decode time {side}: {sorted(values)[len(values) // 2]:.3f} over {len(values)}")
    finally:
        proc.terminate()
        proc.wait()
    app = {side: summary[side] for side in ("plain", "speculative")}
    for side, m in app.items():
        print(
            f"app  {side:12s} decode {m['decode_s']:.2f} s  {m['tokens_per_s']:.2f} tok/s  "
            f"prefill {m['prefill_s']:.2f} s"
        )
    print(
        f"app wall time of the run {summary['wall_s']:.2f} s vs sum of own clocks "
        f"{sum(m['decode_s'] + m['prefill_s'] for m in app.values()):.2f} s; identical: {summary['identical']}"
    )
    if args.skip_cli or args.repeats:
        return
    cli = cli_decode_s(prompt, "qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct", args)
    for side, m in cli.items():
        ratio = app[side]["decode_s"] / m["decode_s"]
        print(
            f"cli  {side:12s} decode {m['decode_s']:.2f} s  {m['tokens_per_s']:.2f} tok/s  "
            f"app/cli decode time {ratio:.3f}"
        )


if __name__ == "__main__":
    main()
