"""What the browser tests share besides their fixtures (tests/conftest.py has `browser` and `app_server`): where
chromium is, opening the app at a window size, and saving a screenshot to test-artifacts/."""

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("SPECVIZ_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(os.environ.get("SPECVIZ_SCREENSHOTS", ROOT / "test-artifacts"))
# How long a page waits for the app to answer, in ms: the server shares two cores with the other test worker, which
# may be drawing a sampling law at full speed, so an answer that takes a second alone can take ten.
WAIT = 30_000


def open_page(browser, url, width=1440, height=900, query=""):
    page = browser.new_page(viewport={"width": width, "height": height}, accept_downloads=True)
    page.set_default_timeout(WAIT)
    page.goto(url + query)
    page.wait_for_selector("#sv-run")
    return page


def fill_kept(page, selector: str, text: str, seconds: float = 10) -> None:
    """Type `text` into the box at `selector` and see it stay there: a tab opened just before may still be drawing
    its boxes, and a box drawn again takes back its empty value, so a run started then reads the default instead."""
    box = page.locator(selector).first
    for _ in range(int(seconds / 0.25)):
        if box.input_value() != text:
            box.fill(text)
        page.wait_for_timeout(250)
        if box.input_value() == text:
            return
    raise AssertionError(f"{selector} did not keep {text!r}")


def shot(page, name, full=False):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=full)
    assert (SHOTS / name).stat().st_size > 10_000
