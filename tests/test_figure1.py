"""Figure-1 rendering: the right colour and cue per token, everything escaped, whitespace visible."""

from html.parser import HTMLParser
from pathlib import Path

from specviz.events import StepEvent
from specviz.render.figure1 import legend, origin_text, step_row, step_rows, visible

ROOT = Path(__file__).resolve().parent.parent
TEXT = {
    1: "def",
    2: " main",
    3: "():",
    4: "\n",
    5: "<script>alert(1)</script>",
    6: '<img src=x onerror="alert(2)">',
    7: "\t&amp;",
}


def event(index, proposed, accepted, nxt, kind, q=True):
    return StepEvent(
        index=index,
        proposed=tuple(proposed),
        accepted=accepted,
        next_token=nxt,
        next_kind=kind,
        p=tuple(0.5 for _ in proposed),
        q=tuple(0.25 for _ in proposed) if q and proposed else None,
        draft_s=0.01,
        verify_s=0.02,
        step_s=0.03,
    )


class Tags(HTMLParser):
    """Collects (tag, class) pairs, and the text, as a browser would parse them."""

    def __init__(self, html):
        super().__init__()
        self.tags, self.text = [], ""
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs).get("class", "")))

    def handle_data(self, data):
        self.text += data


def test_a_rejected_step_is_green_red_blue():
    tags = Tags(step_row(event(0, [1, 2, 3], 1, 4, "correction"), TEXT.get)).tags
    chips = [(t, c.split()[-1]) for t, c in tags if "sv-tok" in c]
    assert chips == [("span", "sv-acc"), ("del", "sv-rej"), ("del", "sv-rej"), ("span", "sv-cor")]


def test_an_all_accepted_step_ends_with_a_starred_bonus():
    html = step_row(event(2, [1, 2], 2, 3, "bonus"), TEXT.get)
    chips = [c.split()[-1] for t, c in Tags(html).tags if "sv-tok" in c]
    assert chips == ["sv-acc", "sv-acc", "sv-bonus"] and "\u2605" in html and "2/2 accepted" in html
    assert ">3<" in html  # steps are numbered from 1


def test_a_plain_step_says_so():
    html = step_row(event(0, [], 0, 1, "plain", q=False), TEXT.get)
    assert "plain step" in html and [c.split()[-1] for _, c in Tags(html).tags if "sv-tok" in c] == ["sv-plain"]


def test_markup_in_tokens_is_shown_as_text_never_as_tags():
    events = [event(0, [5, 6], 1, 7, "correction"), event(1, [6], 1, 5, "bonus")]
    for html in (step_rows(events, TEXT.get), origin_text(events, TEXT.get)):
        assert {tag for tag, _ in Tags(html).tags} <= {"div", "span", "del", "sup"}
        assert "<script" not in html and "<img" not in html
    parsed = Tags(origin_text(events, TEXT.get)).text
    assert parsed == TEXT[5] + TEXT[7] + TEXT[6] + TEXT[5]  # the exact original text comes back out
    assert "&amp;amp;" in origin_text(events, TEXT.get)  # an entity in model text is escaped, not decoded


def test_whitespace_is_visible_in_rows_and_kept_in_the_text():
    assert Tags(visible(" main\n")).text == "\u00b7main\u21b5"
    assert Tags(visible("\t")).text == "\u2192" and Tags(visible("")).text == "\u2205"
    events = [event(0, [1, 2], 2, 4, "bonus")]
    assert Tags(origin_text(events, TEXT.get)).text == "def main\n"


def test_probabilities_ride_along_as_tooltips():
    html = step_row(event(0, [1, 2], 1, 3, "correction"), TEXT.get)
    assert html.count('title="p=0.50, q=0.25"') == 2


def test_legend_names_every_origin():
    html = legend()
    for label in ("accepted draft", "rejected draft", "target&#x27;s correction", "bonus token", "plain decoding"):
        assert label in html


def test_ui_never_imports_torch(new_process):
    """The screen, its drawings (Figure 1, the tree, the production block) and what they read, and the traffic
    simulator with adaptive γ's pricing it runs, in a fresh interpreter: none of it brings torch in."""
    code = (
        "import sys, specviz.render.figure1, specviz.render.panels, specviz.render.charts, specviz.app.ui.controls, "
        "specviz.app.ui.layout, specviz.views.race, specviz.views.sweep, specviz.analysis.theory, "
        "specviz.drafters.options, specviz.drafters.listing, specviz.render.handoff_block, specviz.render.tree_view, "
        "specviz.render.traffic_page, specviz.app.ui.under_load_screen, "
        "specviz.traffic.simulator, specviz.engine.batch_gamma, specviz.engine.admission; "
        "print('torch' in sys.modules)"
    )
    out = new_process("-c", code, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_rendering_real_engine_events(target, drafts, tokenizer):
    from specviz.drafters.registry import build_drafter
    from specviz.engine import generate, new_generator
    from specviz.settings import Settings

    s = Settings(max_new_tokens=24, gamma=3)
    gen = new_generator(target.device, 0)
    events = list(
        generate(target, tokenizer.encode("w1 w2"), s, build_drafter("draft", s, gen, target, drafts["partial"]), gen)
    )
    chips = [c.split()[-1] for _, c in Tags(step_rows(events, lambda t: tokenizer.decode([t]))).tags if "sv-tok" in c]
    assert chips.count("sv-acc") == sum(e.accepted for e in events)
    assert chips.count("sv-rej") == sum(len(e.proposed) - e.accepted for e in events)
    assert len(chips) == sum(len(e.proposed) + 1 for e in events)


def test_a_tree_step_shows_the_losing_candidates_collapsed_and_escaped():
    e = StepEvent(
        index=0,
        proposed=(1, 2),
        accepted=1,
        next_token=3,
        next_kind="correction",
        p=(0.9, 0.1),
        q=None,
        draft_s=0.0,
        verify_s=0.01,
        step_s=0.01,
        candidates=((5, 6), (1, 2), (4,)),
        winner=1,
    )
    html = step_row(e, TEXT.get)
    parsed = Tags(html)
    assert ("details", "sv-alts") in parsed.tags and "+2 other candidates" in parsed.text
    cands = [c for t, c in parsed.tags if "sv-cand" in c]
    assert len(cands) == 3  # 5 6 and 4; the winner is the row itself
    assert "<script>" not in html and "<img" not in html
    chips = [(t, c.split()[-1]) for t, c in parsed.tags if "sv-tok" in c and "sv-cand" not in c]
    assert chips == [("span", "sv-acc"), ("del", "sv-rej"), ("span", "sv-cor")]
