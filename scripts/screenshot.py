"""Screenshot a finished side-by-side run of a running app: python scripts/screenshot.py [--url ...] [--out app.png]
[--region] (the README's picture: python scripts/screenshot.py --region --out docs/img/app.png)
Uses Debian's chromium through Playwright, the same way the browser test does."""

import argparse
import shutil

from playwright.sync_api import sync_playwright


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="http://127.0.0.1:7860/")
    p.add_argument("--out", default="test-artifacts/app-real.png")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--timeout-s", type=int, default=600)
    p.add_argument("--sweep", action="store_true", help="then run the γ sweep and screenshot its chart too")
    p.add_argument("--region", action="store_true", help="only the race: from the lanes to Figure 1")
    args = p.parse_args()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                     args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(args.url)
        page.get_by_label(args.dtype).check()
        page.click("#sv-run")
        page.wait_for_selector("#sv-badge .sv-badge-ok, #sv-badge .sv-badge-diff", timeout=args.timeout_s * 1000)
        if args.region:
            top, bottom = page.locator(".sv-how").bounding_box(), page.locator("#sv-fig1").bounding_box()
            page.screenshot(path=args.out, full_page=True, clip={
                "x": 0, "y": top["y"] - 8, "width": 1500, "height": bottom["y"] + bottom["height"] - top["y"] + 16})
        else:
            page.screenshot(path=args.out, full_page=True)
        print(page.inner_text("#sv-status"))
        print(page.inner_text("#sv-badge"))
        if args.sweep:
            page.click("#sv-sweep")
            page.wait_for_selector("#sv-status:has-text('γ sweep: done')", timeout=args.timeout_s * 1000)
            page.locator("#sv-sweep-chart").screenshot(path=args.out.replace(".png", "-sweep.png"))
            print(page.inner_text("#sv-status"))
        browser.close()


if __name__ == "__main__":
    main()
