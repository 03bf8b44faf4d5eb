"""A tree step drawn as a tree, as on a whiteboard: the candidates merged into a trie (a shared beginning is one
node), the last committed token as the root on the left, one column per draft position, siblings stacked in the
order they were tried. The accepted path is green, a branch the target refused red where it broke off, what lies
below a refusal (never tested) grey and faded, and the target's own token after the accepted path blue (a
correction, underlined, or a bonus, dashed with a star), as in Figure 1.

Inline SVG at its natural size (one px per unit, so the labels stay readable), its coordinates computed here;
`layout` returns the node boxes so their geometry can be checked. Every token text is escaped. No torch."""

import unicodedata
from dataclasses import dataclass, field
from html import escape

from ..events import StepEvent
from .figure1 import WHITESPACE, TokenText, visible

ROOT = 0  # the root's index in a trie's node list

FIT_WIDTH = 880  # px: the explanation's content column at a 1280-wide screen with the sidebar open (882 measured)
# Label widths (character cells) tried in turn until the drawing fits FIT_WIDTH. At the narrowest, 12 columns of any
# text fit (11 draft positions and the target's own token); a deeper tree fits where its tokens are short, and
# otherwise scrolls sideways rather than shrink its labels.
LABEL_CAPS = (12, 10, 8, 6, 4)
FONT_PX = 14
CELL = 8.6  # px per character cell of a 14 px monospace font (0.6 em), a little over for safety
PAD = 6  # px between a node's border and its label, left and right
BOX_H = 20  # a node's height, and the distance between two rows
ROW = 26
GAP = 22  # px between two columns: room for the edges
MIN_W = 26  # the narrowest node (a one-character token)
ROOT_W = 12  # the root marker's diameter
MARGIN = 6

GREEN = "#009e73"
RED = "#d55e00"
BLUE = "#0072b2"
GREY = "rgba(127, 127, 127, 0.85)"
STAR = "#e69f00"
# state: (fill, stroke, dashes, stroke width, opacity); the same colours as Figure 1's chips (specviz.css)
LOOK = {
    "accepted": ("rgba(0, 158, 115, 0.28)", GREEN, "", 1.5, 1.0),
    "rejected": ("rgba(213, 94, 0, 0.22)", RED, "", 1.5, 1.0),
    "correction": ("rgba(0, 114, 178, 0.28)", BLUE, "", 1.5, 1.0),
    "bonus": ("rgba(0, 114, 178, 0.28)", BLUE, "5 3", 2.0, 1.0),
    "untested": ("none", GREY, "2 2", 1.0, 0.55),
}
EDGE = {
    "accepted": (GREEN, 2.5, ""),
    "rejected": (RED, 1.5, ""),
    "correction": (BLUE, 2.0, ""),
    "bonus": (BLUE, 2.0, ""),
}
EDGE_UNTESTED = (GREY, 1.0, "3 3")
WORDS = {
    "root": "the last committed token: every candidate continues from here",
    "accepted": "accepted draft",
    "rejected": "rejected: the target tested it and refused it",
    "untested": "not tested: the target never reached it",
    "correction": "the target's correction",
    "bonus": "bonus token: every draft on the path was accepted",
}


@dataclass
class Node:
    token: int | None  # None: the root
    parent: int | None
    depth: int  # 0: the root; k: the k-th draft position
    children: list[int] = field(default_factory=list)
    state: str = "untested"  # root | accepted | rejected | untested | correction | bonus
    p: float | None = None  # the target's p when the acceptance rule tried it, where it did


@dataclass(frozen=True)
class Box:
    node: int
    x: float
    y: float
    w: float
    h: float
    label: str  # the token's text as shown (clipped to the label width, "…" marking a cut), before escaping
    clipped: bool


@dataclass(frozen=True)
class Layout:
    boxes: tuple[Box, ...]  # one per node, in the trie's order
    width: float
    height: float
    cap: int  # the label width used, in character cells
    fits: bool  # within the width asked for (FIT_WIDTH); otherwise the drawing scrolls sideways in its box
    rights: tuple[float, ...]  # per column (depth): its right edge, where every edge leaving it bends


def token_trie(event: StepEvent) -> list[Node]:
    """The step's candidates as one trie, marked, plus the target's own token as an extra node after the accepted
    path (a correction or a bonus; a step that ended on an accepted EOS has none)."""
    nodes = [Node(None, None, 0, state="root")]
    index = {}
    paths = []
    for candidate in event.candidates or ():
        at = ROOT
        path = []
        for token in candidate:
            if (at, token) not in index:
                index[at, token] = len(nodes)
                nodes.append(Node(token, at, nodes[at].depth + 1))
                nodes[at].children.append(index[at, token])
            at = index[at, token]
            path.append(at)
        paths.append(path)
    kept = paths[event.winner or 0][: event.accepted] if paths else []
    _mark(nodes, kept, event)
    if event.next_token is not None and event.next_kind in ("correction", "bonus"):
        parent = kept[-1] if kept else ROOT
        nodes.append(Node(event.next_token, parent, nodes[parent].depth + 1, state=event.next_kind))
        nodes[parent].children.append(len(nodes) - 1)
    return nodes


def _mark(nodes: list[Node], kept: list[int], event: StepEvent) -> None:
    """Accepted: the kept path. Rejected: a child of the root or of a kept node that is not kept itself, where the
    rule tested it: greedy and typical acceptance judge every such child at once (the target's argmax or bar
    decides them all), rejection sampling tries siblings one by one and stops at the first accepted, so a later
    sibling is never tried. Everything else stays untested."""
    for n in kept:
        nodes[n].state = "accepted"
    tried = {(t.depth, t.token): t for t in event.detail.trials} if event.detail else {}
    one_by_one = event.detail is not None and event.detail.rule == "lossless"
    tested = [ROOT, *kept]
    if event.next_kind == "end" and kept:  # the run ended at an accepted EOS: nothing below it mattered
        tested.pop()
    for parent in tested:
        for child in nodes[parent].children:
            node = nodes[child]
            trial = tried.get((node.depth, node.token))  # the tested parent at depth - 1 is unique: the kept path
            node.p = trial.p if trial else None
            if node.state != "accepted" and (trial is not None or not one_by_one):
                node.state = "rejected"


def display_cells(text: str) -> int:
    """Character cells a monospace font gives `text`: wide East Asian characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def clip(text: str, cap: int) -> tuple[str, bool]:
    """`text` cut to at most `cap` cells, "…" taking the last one where it was cut; whitespace counts one cell each
    (it is drawn as one mark)."""
    if display_cells(text) <= cap:
        return text, False
    out = ""
    used = 1
    for c in text:
        used += display_cells(c)
        if used > cap:
            break
        out += c
    return out + "\u2026", True


def _rows(nodes: list[Node]) -> list[int]:
    """Each node's row, top down: a node goes on its parent's row or, where its column is taken there, on the column's
    next free row. Nodes are placed depth first, so the first candidate runs straight along the top (the root first,
    on screen without scrolling) and later siblings hang below. Rows only grow down each column in the trie's order,
    so two edges between the same two columns never cross, and an edge only spans the gap between its columns."""
    row = [0] * len(nodes)
    free = {}
    stack = [ROOT]
    while stack:  # depth first, a parent placed before its children
        n = stack.pop()
        node = nodes[n]
        row[n] = max(0 if node.parent is None else row[node.parent], free.get(node.depth, 0))
        free[node.depth] = row[n] + 1
        stack.extend(reversed(node.children))
    return row


def layout(nodes: list[Node], texts: list[str], fit: float = FIT_WIDTH) -> Layout:
    """Node boxes for the drawing: the widest label width in LABEL_CAPS that keeps it within `fit`, else the
    narrowest (the drawing then scrolls sideways)."""
    rows = _rows(nodes)
    for cap in LABEL_CAPS:
        placed = _place(nodes, texts, rows, cap, fit)
        if placed.fits:
            return placed
    return placed


def _place(nodes: list[Node], texts: list[str], rows: list[int], cap: int, fit: float) -> Layout:
    labels = [clip(t, cap) if n.token is not None else ("", False) for n, t in zip(nodes, texts)]
    widths = [
        ROOT_W if n.token is None else max(MIN_W, (display_cells(label) + (n.state == "bonus")) * CELL + 2 * PAD)
        for n, (label, _) in zip(nodes, labels)
    ]
    depth = max(n.depth for n in nodes)
    column = [0.0] * (depth + 1)
    for n, w in zip(nodes, widths):
        column[n.depth] = max(column[n.depth], w)
    left = [float(MARGIN)]
    for w in column[:-1]:
        left.append(left[-1] + w + GAP)
    boxes = []
    for i, (n, (label, cut)) in enumerate(zip(nodes, labels)):
        h = ROOT_W if n.token is None else BOX_H
        top = MARGIN + rows[i] * ROW + (BOX_H - h) / 2
        boxes.append(Box(i, left[n.depth], top, widths[i], h, label, cut))
    width = left[-1] + column[-1] + MARGIN
    height = 2 * MARGIN + max(rows) * ROW + BOX_H
    rights = tuple(x + w for x, w in zip(left, column))
    return Layout(tuple(boxes), width, height, cap, width <= fit, rights)


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _edge(a: Box, b: Box, right: float, state: str) -> str:
    """Parent a to child b: straight along a's row to its column's right edge, then one S-curve across the gap. Every
    curve in a gap has the same ends in x, so two of them cross only where their rows swap order, which the rows
    never do."""
    colour, width, dashes = EDGE.get(state, EDGE_UNTESTED)
    x1 = a.x + a.w
    y1 = a.y + a.h / 2
    x2 = b.x
    y2 = b.y + b.h / 2
    mid = (right + x2) / 2
    dash = f' stroke-dasharray="{dashes}"' if dashes else ""
    return (
        f'<path d="M{_num(x1)} {_num(y1)} H{_num(right)} C{_num(mid)} {_num(y1)} {_num(mid)} {_num(y2)} {_num(x2)} '
        f'{_num(y2)}" fill="none" stroke="{colour}" stroke-width="{width}"{dash}/>'
    )


def _tooltip(node: Node, text: str) -> str:
    if node.token is None:
        return WORDS["root"]
    shown = "".join(WHITESPACE.get(c, c) for c in text) or "\u2205"
    p = f", the target's p {node.p:.3f} when tried" if node.p is not None else ""
    return f"{shown} (token {node.token}): {WORDS[node.state]}{p}"


def _node(node: Node, box: Box, text: str) -> str:
    """One node: its box, its label, the second cue of its state (struck through, underlined, a star), and its full
    text with what happened to it as a tooltip."""
    title = f"<title>{escape(_tooltip(node, text))}</title>"
    head = f'<g class="sv-tn" data-node="{box.node}" data-state="{node.state}">{title}'
    if node.token is None:
        r = box.w / 2
        return f'{head}<circle cx="{_num(box.x + r)}" cy="{_num(box.y + r)}" r="{_num(r)}" fill="{GREY}"/></g>'
    fill, stroke, dashes, width, opacity = LOOK[node.state]
    dash = f' stroke-dasharray="{dashes}"' if dashes else ""
    fade = f' opacity="{opacity}"' if opacity < 1 else ""
    cx = box.x + box.w / 2
    cy = box.y + box.h / 2
    star = f'<tspan fill="{STAR}">\u2605</tspan>' if node.state == "bonus" else ""
    parts = [
        f'{head}<rect x="{_num(box.x)}" y="{_num(box.y)}" width="{_num(box.w)}" height="{_num(box.h)}" rx="4" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"{dash}{fade}/>',
        f'<text x="{_num(cx)}" y="{_num(cy)}" text-anchor="middle" dominant-baseline="central" fill="currentColor"'
        f"{fade}>{visible(box.label, 'tspan')}{star}</text>",
    ]
    half = display_cells(box.label) * CELL / 2
    if node.state == "rejected":  # struck through, as in Figure 1
        parts.append(_line(cx - half, cx + half, cy, "currentColor"))
    elif node.state == "correction":  # underlined
        parts.append(_line(cx - half, cx + half, cy + FONT_PX / 2 + 1, BLUE))
    return "".join(parts) + "</g>"


def _line(x1: float, x2: float, y: float, colour: str) -> str:
    return f'<line x1="{_num(x1)}" y1="{_num(y)}" x2="{_num(x2)}" y2="{_num(y)}" stroke="{colour}" stroke-width="1.5"/>'


def tree_svg(nodes: list[Node], texts: list[str], placed: Layout) -> str:
    edges = "".join(
        _edge(placed.boxes[n.parent], placed.boxes[i], placed.rights[n.depth - 1], n.state)
        for i, n in enumerate(nodes)
        if n.parent is not None
    )
    shapes = "".join(_node(n, b, t) for n, b, t in zip(nodes, placed.boxes, texts))
    w = _num(placed.width)
    h = _num(placed.height)
    label = f"the step's token tree: {len(nodes) - 1} nodes, {max(n.depth for n in nodes)} positions deep"
    return (
        f'<svg class="sv-tree-svg" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" '
        f'width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-size="{FONT_PX}" '
        f"font-family=\"ui-monospace, 'DejaVu Sans Mono', monospace\">{edges}{shapes}</svg>"
    )


def tree_legend() -> str:
    chips = (
        '<span class="sv-tree-root"></span> last committed token',
        '<span class="sv-tok sv-acc">accepted</span>',
        '<del class="sv-tok sv-rej">rejected</del>',
        '<span class="sv-tok sv-untested">not tested</span>',
        '<span class="sv-tok sv-cor">target\'s correction</span>',
        '<span class="sv-tok sv-bonus">bonus<sup class="sv-star">\u2605</sup></span>',
    )
    return '<div class="sv-tree-legend">' + "".join(f"<span>{c}</span>" for c in chips) + "</div>"


def tree_view(event: StepEvent, text_of: TokenText) -> str:
    """The drawing of a tree step with its legend; a box that scrolls when the tree is too deep to fit."""
    nodes = token_trie(event)
    texts = ["" if n.token is None else text_of(n.token) for n in nodes]
    placed = layout(nodes, texts)
    wide = "" if placed.fits else " sv-tree-wide"
    return (
        f'<div class="sv-tree-draw">{tree_legend()}<div class="sv-tree-box{wide}">'
        f"{tree_svg(nodes, texts, placed)}</div></div>"
    )
