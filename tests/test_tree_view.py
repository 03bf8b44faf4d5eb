"""A tree step drawn as a tree: the trie (one node per distinct prefix), each node's verdict (accepted, rejected where
a branch broke off, untested below that, the target's correction or bonus), every token text escaped, and a layout
whose boxes never overlap, stay inside the drawing and fit the screen's content column up to the depth promised,
whatever the token texts; then a real tree step from a tiny model, and the drawing measured in a real browser."""

import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser
from itertools import combinations
from pathlib import Path

import pytest

from specviz.events import StepDetail, StepEvent, Trial
from specviz.render.explain import explain_step
from specviz.render.tree_view import (
    BOX_H,
    CELL,
    FIT_WIDTH,
    LABEL_CAPS,
    PAD,
    ROOT,
    clip,
    display_cells,
    layout,
    token_trie,
    tree_view,
)

ROOT_DIR = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = ("<script>alert(1)</script>", '"', "&", "&amp;", "'><img src=x onerror=alert(2)>", "&" * 40, " \n\t", "")
MOST_NODES, DEEPEST = 64, 32  # the drafters' node budget (draft model, EAGLE, suffix: at most 64) and γ's top
MARKUP = {"div", "p", "b", "span", "del", "sup", "svg", "path", "g", "title", "rect", "text", "tspan", "circle", "line"}
FITS_UP_TO = 11  # draft positions drawn within FIT_WIDTH whatever the token texts (plus the target's own token)


def tree_event(candidates, winner, accepted, next_token, next_kind, rule="greedy", trials=()):
    proposed = tuple(candidates[winner])[: accepted if next_kind == "end" else None]
    return StepEvent(
        index=0,
        proposed=proposed,
        accepted=accepted,
        next_token=next_token,
        next_kind=next_kind,
        p=tuple(0.5 for _ in proposed),
        q=None,
        draft_s=0.0,
        verify_s=0.0,
        step_s=0.0,
        candidates=tuple(tuple(c) for c in candidates),
        winner=winner,
        gamma=max(map(len, candidates)),
        detail=StepDetail(rule, tuple(trials), ()),
    )


def prefix(nodes, i):
    out = []
    while i != ROOT:
        out.append(nodes[i].token)
        i = nodes[i].parent
    return tuple(out[::-1])


def states(nodes):
    """{token path from the root: state} for the trie's token nodes (the target's own token keyed as it extends)."""
    return {prefix(nodes, i): n.state for i, n in enumerate(nodes) if i != ROOT}


def test_the_trie_has_one_node_per_distinct_prefix():
    cands = [(1, 2, 3), (1, 2, 4), (1, 5), (6,), (1, 2)]
    nodes = token_trie(tree_event(cands, 0, 3, 9, "bonus"))
    drafted = [i for i, n in enumerate(nodes) if i != ROOT and n.state != "bonus"]
    distinct = {c[:k] for c in cands for k in range(1, len(c) + 1)}
    assert sorted(prefix(nodes, i) for i in drafted) == sorted(distinct)
    assert [nodes[c].token for c in nodes[ROOT].children] == [1, 6]  # siblings in the order candidates brought them
    assert all(nodes[i].depth == len(prefix(nodes, i)) for i in range(1, len(nodes)))


def test_greedy_marks_the_kept_path_the_branches_that_broke_off_and_what_lies_below():
    cands = [(1, 2, 3), (1, 7, 8), (6, 9)]
    marked = states(token_trie(tree_event(cands, 0, 1, 4, "correction")))
    assert marked == {
        (1,): "accepted",
        (1, 2): "rejected",  # the winner's next node, refused
        (1, 7): "rejected",  # a sibling below the kept node: the target's argmax is neither
        (6,): "rejected",
        (1, 2, 3): "untested",  # below a refusal: never tested
        (1, 7, 8): "untested",
        (6, 9): "untested",
        (1, 4): "correction",  # the target's own token, after the kept path
    }


def test_nothing_kept_hangs_the_correction_on_the_root():
    marked = states(token_trie(tree_event([(1, 2), (3,)], 0, 0, 5, "correction")))
    assert marked == {(1,): "rejected", (3,): "rejected", (1, 2): "untested", (5,): "correction"}


def test_a_fully_accepted_path_ends_in_a_bonus_and_a_run_ended_by_eos_in_nothing():
    bonus = states(token_trie(tree_event([(1, 2), (1, 3, 4)], 0, 2, 9, "bonus")))
    assert bonus == {
        (1,): "accepted",
        (1, 2): "accepted",
        (1, 3): "rejected",
        (1, 3, 4): "untested",
        (1, 2, 9): "bonus",
    }
    ended = states(token_trie(tree_event([(1, 2, 3), (1, 5)], 0, 2, None, "end")))
    assert ended == {(1,): "accepted", (1, 2): "accepted", (1, 5): "rejected", (1, 2, 3): "untested"}


def test_rejection_sampling_marks_only_the_siblings_it_tried():
    trials = [Trial(1, 1, 0.2, 1.0, False, 0.7), Trial(1, 3, 0.6, 1.0, True, 0.1), Trial(2, 4, 0.3, 1.0, False, 0.9)]
    nodes = token_trie(tree_event([(1, 2), (3, 4), (5,)], 1, 1, 8, "correction", "lossless", trials))
    assert states(nodes) == {
        (1,): "rejected",
        (1, 2): "untested",
        (3,): "accepted",
        (3, 4): "rejected",
        (5,): "untested",  # the sibling after the accepted one was never tried
        (3, 8): "correction",
    }
    assert [n.p for n in nodes[1:4]] == [0.2, None, 0.6]  # the p each was tried with rides along as a tooltip


def svg_of(html):
    start = html.index("<svg")
    return ET.fromstring(html[start : html.index("</svg>", start) + len("</svg>")])


class Tags(HTMLParser):
    def __init__(self, html):
        super().__init__()
        self.tags = set()
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)


def test_hostile_token_text_is_escaped_everywhere():
    texts = dict(enumerate(HOSTILE, start=1))
    cands = [(1, 2, 3), (1, 4), (5, 6, 7), (8,)]
    html = explain_step(tree_event(cands, 0, 1, 2, "correction"), texts.get)
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert Tags(html).tags <= MARKUP
    svg = svg_of(html)  # well-formed XML: no token closed a tag or broke an attribute
    nodes = {int(g.get("data-node")): g for g in svg.iter(f"{SVG}g")}
    trie = token_trie(tree_event(cands, 0, 1, 2, "correction"))
    for i, n in enumerate(trie):
        if n.token is None:
            continue
        tip = nodes[i].find(f"{SVG}title").text
        shown = "".join({" ": "\u00b7", "\n": "\u21b5", "\t": "\u2192"}.get(c, c) for c in texts[n.token])
        assert tip.startswith(f"{shown or chr(0x2205)} (token {n.token})")  # the full text, exactly, as a tooltip
        label = "".join(nodes[i].find(f"{SVG}text").itertext())
        cut = "".join({" ": "\u00b7", "\n": "\u21b5", "\t": "\u2192"}.get(c, c) for c in clip(texts[n.token], 12)[0])
        assert label == (cut or "\u2205")  # drawn as visible marks, cut to the label width


def test_a_label_is_cut_by_character_cells_and_never_inside_an_entity():
    assert clip("&" * 40, 8) == ("&" * 7 + "\u2026", True) and clip("abc", 8) == ("abc", False)
    assert clip("漢字漢字漢字", 8) == ("漢字漢\u2026", True)  # wide characters take two cells
    html = tree_view(tree_event([(1,)], 0, 0, 2, "correction"), {1: "&" * 40, 2: "x"}.get)
    label = "".join(svg_of(html).find(f".//{SVG}g[@data-node='1']/{SVG}text").itertext())
    assert label == "&" * 11 + "\u2026" and "&amp;" * 11 + "\u2026<" in html


def text_of_width(cells):
    """Every token as wide as `cells` character cells (and hostile)."""
    return lambda t: ("<&" * cells)[:cells]


def shapes():
    """The largest trees the app can ask for: 64 nodes as a star (a draft-model or EAGLE tree of 64 first guesses),
    as a bushy tree FITS_UP_TO deep, as a chain γ 32 deep with a sibling at every position; Medusa's widest named
    tree; history lookup's 16 candidates of γ 32 (512 nodes)."""
    from specviz.drafters.medusa.medusa_drafter import TREES

    star = [(i,) for i in range(MOST_NODES)]
    bushy = [tuple(b >> k & 1 for k in range(FITS_UP_TO)) for b in range(6)]  # 2 + 4 + 6 · 9 = 60 nodes
    comb = [tuple(range(DEEPEST))] + [(*range(k), 1000 + k) for k in range(MOST_NODES - DEEPEST)]
    medusa = list(TREES["wide"])  # its index paths have the trie's shape
    history = [tuple(1000 * c + k for k in range(DEEPEST)) for c in range(16)]
    return {"star": star, "bushy": bushy, "comb": comb, "medusa": medusa, "history": history}


def overlap(a, b):
    return a.x < b.x + b.w and b.x < a.x + a.w and a.y < b.y + b.h and b.y < a.y + a.h


def crossing(nodes, boxes, i, j):
    """Whether the edges into nodes i and j cross: between the same two columns, one starts above the other and ends
    below it (each leaves its column at the column's right edge, so across a gap they are one S-curve shifted and
    stretched, and cross exactly then)."""
    if nodes[i].depth != nodes[j].depth:
        return False
    starts = boxes[nodes[i].parent].y - boxes[nodes[j].parent].y
    ends = boxes[i].y - boxes[j].y
    return starts * ends < 0


@pytest.mark.parametrize("name", list(shapes()))
@pytest.mark.parametrize("cells", [1, 4, 30])
def test_the_largest_trees_never_overlap_stay_inside_and_fit_the_column_up_to_their_promise(name, cells):
    cands = shapes()[name]
    for accepted, kind in ((0, "correction"), (len(cands[0]), "bonus")):
        nodes = token_trie(tree_event(cands, 0, accepted, 5000, kind))
        texts = ["" if n.token is None else text_of_width(cells)(n.token) for n in nodes]
        placed = layout(nodes, texts)
        boxes = placed.boxes
        assert len(boxes) == len(nodes)
        assert all(0 <= b.x and b.x + b.w <= placed.width and 0 <= b.y and b.y + b.h <= placed.height for b in boxes)
        by_column = {}
        for n, b in zip(nodes, boxes):
            by_column.setdefault(n.depth, []).append(b)
        assert len({round(b.x) for n, b in zip(nodes, boxes) if n.depth == 1}) == 1  # one column per position
        for column in by_column.values():  # boxes of one column: disjoint; columns themselves never share an x
            assert not any(overlap(a, b) for a, b in combinations(column, 2))
        assert boxes[ROOT].y < BOX_H  # the root in the top row: on screen before any scrolling
        assert not any(crossing(nodes, boxes, i, j) for i, j in combinations(range(1, len(nodes)), 2))
        ends = [max(b.x + b.w for b in by_column[d]) for d in sorted(by_column)]
        starts = [min(b.x for b in by_column[d]) for d in sorted(by_column)]
        assert all(end < start for end, start in zip(ends, starts[1:]))
        for n, b in zip(nodes, boxes):  # the label, as clipped, fits inside its box
            if n.token is not None:
                assert display_cells(b.label) <= placed.cap
                assert (display_cells(b.label) + (n.state == "bonus")) * CELL + 2 * PAD <= b.w and b.h == BOX_H
        depth = max(n.depth for n in nodes)
        if depth <= FITS_UP_TO + 1:
            assert placed.fits and placed.width <= FIT_WIDTH
        if not placed.fits:  # too deep to fit: labels at the narrowest width, and the box scrolls sideways
            assert placed.cap == LABEL_CAPS[-1] and placed.width > FIT_WIDTH and depth > FITS_UP_TO
            assert "sv-tree-wide" in tree_view(tree_event(cands, 0, accepted, 5000, kind), text_of_width(cells))


def test_short_tokens_keep_their_full_text_and_a_deep_tree_of_them_scrolls():
    nodes = token_trie(tree_event(shapes()["comb"], 0, 3, 5000, "correction"))
    placed = layout(nodes, ["" if n.token is None else "ab" for n in nodes])
    assert not any(b.clipped for b in placed.boxes) and not placed.fits  # γ 32 is too deep for the column, labels kept
    wide = layout(nodes, ["" if n.token is None else "a" * 20 for n in nodes], fit=10**6)
    assert wide.fits and wide.cap == LABEL_CAPS[0]  # room enough: the widest labels


def test_the_explanation_draws_a_tree_step_and_leaves_a_chain_step_alone():
    tree = explain_step(tree_event([(1, 2), (3,)], 0, 1, 4, "correction"), str)
    assert tree.count("<svg") == 1 and "candidates</b>, verified together as a token tree" in tree
    assert 'data-state="accepted"' in tree and 'data-state="correction"' in tree and "sv-tree-legend" in tree
    assert "one pass" not in tree
    block = explain_step(replace(tree_event([(1, 2), (3,)], 0, 1, 4, "correction"), block=8), str)
    assert "candidates</b>, drafted in one pass of a block of 8" in block and block.count("<svg") == 1
    chain = replace(tree_event([(1, 2)], 0, 1, 4, "correction"), candidates=None, winner=None)
    assert "<svg" not in explain_step(chain, str) and "sv-tree" not in explain_step(chain, str)


def test_a_real_tree_step_from_a_tiny_model_is_drawn(target, drafts, tokenizer):
    from specviz.record import TokenTexts
    from specviz.runs import generate_named
    from specviz.settings import Settings

    ids = tokenizer.encode("w5 w5 w5 w9 w5 w5 w5")
    events = list(generate_named(target, ids, Settings(max_new_tokens=60, gamma=3), "history", drafts["partial"]))
    steps = [e for e in events if e.candidates]
    assert steps
    text_of = TokenTexts(tokenizer)
    for e in steps:
        svg = svg_of(explain_step(e, text_of))
        drawn = [g.get("data-state") for g in svg.iter(f"{SVG}g")]
        distinct = {c[:k] for c in e.candidates for k in range(1, len(c) + 1)}
        own = e.next_kind in ("correction", "bonus")
        assert len(drawn) == 1 + len(distinct) + own and drawn.count("root") == 1
        assert drawn.count("accepted") == e.accepted and drawn.count(e.next_kind) == own
        assert drawn.count("rejected") >= (e.accepted < len(e.proposed))
        labels = [
            "".join(g.find(f"{SVG}text").itertext()) for g in svg.iter(f"{SVG}g") if g.get("data-state") != "root"
        ]
        assert all(label.strip() for label in labels)


def test_in_a_browser_every_label_sits_inside_its_box_and_no_boxes_meet(browser, tmp_path):
    """The layout's character-cell estimate against a real font: rendered at 1280×720 with the app's stylesheet."""
    texts = {i: t for i, t in enumerate(["return", " the", "\n", "漢字", "<&>", "WWWWWWWWWWWWWWWW", "Ω", "->"] * 8)}
    cands = [tuple(range(k, k + 6)) for k in range(0, 56, 7)] + [(0, 1, 2, 40, 41, 42)]
    html = explain_step(tree_event(cands, 0, 2, 60, "correction"), lambda t: texts.get(t, "x"))
    css = (ROOT_DIR / "assets" / "specviz.css").read_text()
    page_file = tmp_path / "tree.html"
    page_file.write_text(f"<!doctype html><meta charset=utf-8><style>{css}</style><body>{html}</body>")
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(page_file.as_uri())
    found = page.evaluate(
        """() => [...document.querySelectorAll('g.sv-tn')].filter(g => g.querySelector('rect')).map(g => {
            const r = g.querySelector('rect').getBBox(), t = g.querySelector('text').getBBox();
            return [r.x, r.y, r.width, r.height, t.x, t.y, t.width, t.height]; })"""
    )
    width, scrolls = page.evaluate(
        "() => { const box = document.querySelector('.sv-tree-box');"
        " return [box.querySelector('svg').getBoundingClientRect().width, box.scrollWidth > box.clientWidth]; }"
    )
    page.screenshot(path=str(tmp_path / "tree.png"), full_page=True)
    page.close()
    assert found and width <= FIT_WIDTH and not scrolls
    for rx, ry, rw, rh, tx, ty, tw, th in found:
        assert rx <= tx and tx + tw <= rx + rw and ry <= ty and ty + th <= ry + rh, "a label spills out of its box"
    rects = [f[:4] for f in found]
    for (ax, ay, aw, ah), (bx, by, bw, bh) in combinations(rects, 2):
        assert not (ax < bx + bw and bx < ax + aw and ay < by + bh and by < ay + ah), "two node boxes meet"
