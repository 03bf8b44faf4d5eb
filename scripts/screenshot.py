"""The README's and docs' pictures, from a running app; run by a maintainer when the screen changes.

The README's pictures, from a running app (python app.py), through Debian's chromium as the browser test drives it:

    python scripts/screenshot.py [--url http://127.0.0.1:7860/] [--out docs/img]
        [--grand-prix | --concurrency SWEEP | --traffic RUN]

race.png: the first screenful at 1440×900 in the middle of a race (the first code example, bfloat16, the offline
pair). why.png: that race's "Why this speedup" tab. explain.png: the step explanation of a rejected step of the
recorded sampled prose run, replayed at 4×; replay.png and replay-broken.png: that step's rule replayed 10,000 times,
and a broken rule replayed. With --grand-prix, instead: grand-prix-mid.png and grand-prix-done.png, the first
screenful at 1280×720 of a Grand Prix of every drafter (the first code example, every setting at its default) once
two lanes have finished, and at its end. With --production, instead: production-mid.png (1440×900, mid-race, scrolled
to the block under the badge) and production.png and production-720.png (the block once the race has ended, at
1440×900 and at 1280×720). With --concurrency SWEEP (a record of `python -m specviz concurrency --trace`):
concurrency.png, the Concurrency tab at 1280×720 once that sweep has replayed in it (no model runs). With --traffic RUN
(a record of `python -m specviz traffic --trace`): traffic.png and traffic-presenter.png, the tab's traffic part at
1280×720 and in presenter mode at 1920×1080 once that run has replayed in it (no model runs)."""

import argparse
import shutil
from pathlib import Path

from playwright.sync_api import sync_playwright


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="http://127.0.0.1:7860/")
    p.add_argument("--out", default="docs/img")
    p.add_argument(
        "--tokens-before-shot", type=int, default=24, help="mid-race: shoot once the plain side has this many"
    )
    p.add_argument("--timeout-s", type=int, default=600)
    p.add_argument("--grand-prix", action="store_true", help="shoot a Grand Prix of every drafter instead")
    p.add_argument("--concurrency", help="shoot the Concurrency tab replaying this recorded sweep instead")
    p.add_argument("--traffic", help="shoot the Concurrency tab's traffic part replaying this recorded run instead")
    p.add_argument("--production", action="store_true", help="shoot the race's production block instead")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        if args.concurrency:
            concurrency(browser, args.url, out, args.concurrency, args.timeout_s)
            browser.close()
            return
        if args.traffic:
            traffic(browser, args.url, out, args.traffic, args.timeout_s)
            browser.close()
            return
        if args.grand_prix or args.production:
            (grand_prix if args.grand_prix else production)(browser, args.url, out, args.timeout_s)
            browser.close()
            return
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(args.url)
        page.wait_for_selector("#sv-run")
        page.click("#sv-run")
        page.wait_for_function(
            f"document.querySelectorAll('#sv-plain .sv-text span').length >= {args.tokens_before_shot}",
            timeout=args.timeout_s * 1000,
        )
        page.screenshot(path=str(out / "race.png"))
        page.wait_for_selector("#sv-badge .sv-badge-ok, #sv-badge .sv-badge-diff", timeout=args.timeout_s * 1000)
        print(page.inner_text("#sv-status"), "|", page.inner_text("#sv-badge"))
        page.get_by_role("tab", name="Why this speedup").click()
        page.wait_for_selector("#sv-position-chart .js-plotly-plot", timeout=60_000)
        page.locator("#sv-tabs").screenshot(path=str(out / "why.png"))
        print(page.inner_text("#sv-diagnosis"))

        page.get_by_role("tab", name="Recorded runs").click()
        page.locator("#sv-recorded input").click()
        page.get_by_role("option", name="prose-draft-model-sampled", exact=False).click()
        page.get_by_label("4×").check()
        page.click("#sv-replay")
        page.wait_for_selector("#sv-status .sv-status-done:has-text('recorded')", timeout=args.timeout_s * 1000)
        page.get_by_role("tab", name="Figure 1").click()
        page.locator("#sv-fig1 .sv-row", has=page.locator("del.sv-rej")).nth(1).click()
        page.locator("#sv-explain .sv-bar-r").first.wait_for()
        page.locator("#sv-tabs").screenshot(path=str(out / "explain.png"))
        print(page.locator("#sv-explain .sv-explain-head").inner_text())
        for name, rule, verdict in (
            ("replay.png", 0, "ms: the emitted tokens follow"),
            ("replay-broken.png", 2, "do not follow"),
        ):
            page.locator("#sv-replay-rule input").click()
            page.get_by_role("option").nth(rule).click()
            page.click("#sv-replay-step")
            page.locator("#sv-replay-verdict", has_text=verdict).wait_for()
            page.wait_for_selector("#sv-replay-chart .js-plotly-plot .legendtext", timeout=60_000)
            page.locator("#sv-replay-verdict").scroll_into_view_if_needed()
            page.locator("#sv-tabs").screenshot(path=str(out / name))
            print(page.inner_text("#sv-replay-verdict"))
        browser.close()


def concurrency(browser, url: str, out: Path, record: str, timeout_s: int) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(url)
    page.wait_for_selector("#sv-run")
    page.get_by_role("tab", name="Concurrency").click()
    page.locator("#sv-concurrency-upload input[type=file]").set_input_files(record)
    page.locator("#sv-concurrency-speed").get_by_label("at once").check()
    page.click("#sv-concurrency-replay")
    page.wait_for_selector("#sv-status .sv-status-done:has-text('concurrency')", timeout=timeout_s * 1000)
    page.locator("#sv-concurrency-throughput").scroll_into_view_if_needed()
    page.screenshot(path=str(out / "concurrency.png"))
    print(page.inner_text("#sv-concurrency-table"))


def traffic(browser, url: str, out: Path, record: str, timeout_s: int) -> None:
    sizes = (("traffic.png", 1280, 720, ""), ("traffic-presenter.png", 1920, 1080, "?presenter=1"))
    for name, width, height, query in sizes:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(url + query)
        page.wait_for_selector("#sv-run")
        page.get_by_role("tab", name="Concurrency").click()
        page.locator("#sv-traffic-upload input[type=file]").set_input_files(record)
        page.locator("#sv-traffic-speed").get_by_label("at once").check()
        page.click("#sv-traffic-replay")
        page.wait_for_selector("#sv-status .sv-status-done:has-text('traffic')", timeout=timeout_s * 1000)
        page.evaluate("document.querySelector('#sv-traffic-verdict').scrollIntoView({block: 'start'})")
        page.screenshot(path=str(out / name))
        if not query:
            print(page.inner_text("#sv-traffic-verdict"))
        page.close()


def production(browser, url: str, out: Path, timeout_s: int) -> None:
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(url)
    page.wait_for_selector("#sv-run")
    page.click("#sv-run")
    page.wait_for_function("document.querySelectorAll('#sv-plain .sv-text span').length >= 8", timeout=timeout_s * 1000)
    page.locator("#sv-badge").scroll_into_view_if_needed()
    page.screenshot(path=str(out / "production-mid.png"))
    page.wait_for_selector("#sv-badge .sv-badge-ok, #sv-badge .sv-badge-diff", timeout=timeout_s * 1000)
    page.wait_for_selector("#sv-production pre", timeout=60_000)
    for name, width, height in (("production.png", 1440, 900), ("production-720.png", 1280, 720)):
        page.set_viewport_size({"width": width, "height": height})
        page.locator("#sv-production").scroll_into_view_if_needed()
        page.screenshot(path=str(out / name))
    print(page.inner_text("#sv-production"))


def grand_prix(browser, url: str, out: Path, timeout_s: int) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(url)
    page.wait_for_selector("#sv-run")
    page.wait_for_selector("#sv-status:has-text('ready')", timeout=timeout_s * 1000)  # the pair has loaded
    page.click("#sv-compare")
    page.wait_for_function("document.querySelectorAll('#sv-gp .sv-gp-done').length >= 2", timeout=timeout_s * 1000)
    page.screenshot(path=str(out / "grand-prix-mid.png"))
    page.wait_for_selector("#sv-status .sv-status-done:has-text('Grand Prix')", timeout=timeout_s * 1000)
    page.screenshot(path=str(out / "grand-prix-done.png"))
    print(page.inner_text("#sv-status"))
    for lane in page.locator("#sv-gp .sv-gp-lane").all():
        print(
            "  ",
            " | ".join(t.strip() for t in lane.locator(".sv-gp-title, .sv-gp-bar, .sv-gp-stats").all_inner_texts()),
        )


if __name__ == "__main__":
    main()
