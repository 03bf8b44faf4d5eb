"""Static SVG charts for the workload report: each drafter's speedup as bars, and its acceptance by draft position as
lines. No script and no chart library: plain SVG text that any browser draws offline and that prints as it shows.
Every label is escaped; names too long for their column are cut, with the whole name as the element's tooltip."""

import math
from collections.abc import Sequence
from html import escape

from ..analysis.physics import shown_speedup, speedup_forbidden
from ..events import PLAIN
from ..workload.view import WorkloadRow

FONT = 13  # px; the layout below budgets about 0.62 of this per character of a label
LABEL_ROW = 16  # px: one row of the band of labels kept above a chart's data, clear of every line
CHAR_W = 0.62 * FONT
GAIN = "#009e73"
LOSS = "#d55e00"
GRID = "#d9d9d9"
INK = "#333333"
# Okabe-Ito colours (black in place of the yellow, which fades on white), each line also given its own dash and marker
SERIES_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#000000", "#999999")
DASHES = ("", "6 3", "2 3", "8 3 2 3")
MARKERS = ("circle", "square", "triangle", "diamond")
MAX_POSITIONS = 12  # α_k drawn for k up to this; deeper positions are tested too rarely to read


def nice_ticks(top: float, most: int = 6) -> list[float]:
    """Round tick values from 0 to at least `top`, at most `most` + 1 of them, a 1, 2, 2.5 or 5 step apart."""
    top = max(top, 1e-9)
    raw = top / most
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    return [round(i * step, 10) for i in range(math.ceil(top / step - 1e-9) + 1)]


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _clip(label: str, room_px: float) -> str:
    """`label` cut to what fits in `room_px` at the budgeted character width."""
    most = max(int(room_px // CHAR_W), 2)
    return label if len(label) <= most else label[: most - 1] + "\u2026"


def _text(x: float, y: float, words: str, anchor: str = "start", extra: str = "", tip: str = "") -> str:
    """A label; the white outline painted under it keeps it legible where it crosses a grid or reference line."""
    title = f"<title>{escape(tip)}</title>" if tip else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" stroke="#fff" stroke-width="3" paint-order="stroke"'
        f"{extra}>{title}{escape(words)}</text>"
    )


def _svg(width: int, height: int, label: str, inner: str, css_class: str) -> str:
    return (
        f'<svg class="rp-chart {css_class}" role="img" aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" font-size="{FONT}" '
        f'font-family="system-ui, sans-serif" fill="{INK}">{inner}</svg>'
    )


def _empty(width: int, label: str, css_class: str, why: str) -> str:
    return _svg(width, 60, label, _text(width / 2, 34, why, "middle", ' font-style="italic"'), css_class)


def spaced_axes(xs: list, ticks: list[float], width: int, box: tuple, plot_top: float, x_words, title: str):
    """The frame of a chart whose points stand equally spaced along x in the order of `xs` (levels, rates) and whose
    value axis runs from 0 at the foot to the top tick at `plot_top` (a band of labels may sit above it): the
    function placing (x, value), and the gridlines, their values, the x labels (`x_words` of each) and the x title.
    `box`: left, right, top and bottom of the plot, in px."""
    left, right, _, bottom = box

    def at(x, value):
        i = xs.index(x)
        px = left + (0.5 if len(xs) == 1 else i / (len(xs) - 1)) * (width - left - right)
        return px, bottom - value / ticks[-1] * (bottom - plot_top)

    parts = []
    for t in ticks:
        y = at(xs[0], t)[1]
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="{GRID}"/>')
        parts.append(_text(left - 6, y + 4, f"{t:g}", "end"))
    parts += [_text(at(x, 0)[0], bottom + 18, x_words(x), "middle") for x in xs]
    parts.append(_text(left + (width - left - right) / 2, bottom + 36, title, "middle"))
    return at, parts


def speedup_bars(rows: Sequence[WorkloadRow], width: int = 640) -> str:
    """One horizontal bar per drafter: its speedup over plain decoding (green above 1×, orange below), its value and
    tokens/s at the bar's end, a dashed line at 1× (plain decoding). Drafters with no result say so in place."""
    drafters = [r for r in rows if r.name != PLAIN]
    label = "speedup over plain decoding, per drafter"
    if not drafters:
        return _empty(width, label, "rp-speedup", "no drafter was run")
    left = 150
    right = 190
    top = 30
    bar = 22
    gap = 10
    plot_w = width - left - right
    values = [r.speedup for r in drafters if r.speedup is not None]
    ticks = nice_ticks(max([1.0, *values]) * 1.05)
    x = lambda v: left + v / ticks[-1] * plot_w  # noqa: E731
    axis_y = top + len(drafters) * (bar + gap)
    height = axis_y + 46
    parts = [f'<line x1="{x(t):.1f}" y1="{top - 4}" x2="{x(t):.1f}" y2="{axis_y}" stroke="{GRID}"/>' for t in ticks]
    parts += [_text(x(t), axis_y + 16, f"{_num(t)}×", "middle") for t in ticks]
    parts.append(_text(left + plot_w / 2, axis_y + 36, "speedup: tokens/s over plain decoding's", "middle"))
    best = max((r.speedup for r in drafters if r.speedup is not None and not speedup_forbidden(r.speedup, r.tau)),
               default=None)  # fmt: skip
    for i, r in enumerate(drafters):
        y = top + i * (bar + gap)
        parts.append(_text(8, y + bar / 2 + 4, _clip(r.name, left - 16), tip=f"{r.name}: {r.words}"))
        if r.speedup is None:
            parts.append(_text(left + 6, y + bar / 2 + 4, "no result", extra=' font-style="italic"', tip=r.note))
            continue
        colour = GAIN if r.speedup >= 1 else LOSS
        parts.append(f'<rect x="{left}" y="{y}" width="{x(r.speedup) - left:.1f}" height="{bar}" fill="{colour}"/>')
        rate = f" · {r.tokens_per_s:.1f} tok/s" if r.tokens_per_s is not None else ""
        star = " \u2605" if r.speedup == best and len(values) > 1 else ""
        said = (
            shown_speedup(r.speedup, r.tau) if speedup_forbidden(r.speedup, r.tau) else f"{r.speedup:.2f}×{rate}{star}"
        )
        parts.append(_text(x(r.speedup) + 6, y + bar / 2 + 4, said))
    one = x(1.0)
    parts.append(
        f'<line x1="{one:.1f}" y1="{top - 6}" x2="{one:.1f}" y2="{axis_y}" stroke="{INK}" stroke-dasharray="4 3"/>'
    )
    parts.append(_text(one, top - 12, "plain decoding = 1×", "middle"))
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" stroke="{INK}"/>')
    return _svg(width, height, label, "".join(parts), "rp-speedup")


def _marker(shape: str, x: float, y: float, colour: str, tip: str) -> str:
    title = f"<title>{escape(tip)}</title>"
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}">{title}</circle>'
    if shape == "square":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{colour}">{title}</rect>'
    corners = ((0, -5), (5, 4), (-5, 4)) if shape == "triangle" else ((0, -5), (5, 0), (0, 5), (-5, 0))
    points = " ".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in corners)
    return f'<polygon points="{points}" fill="{colour}">{title}</polygon>'


def _series(r: WorkloadRow, n: int, at, k_max: int) -> str:
    """One drafter's α_k as a line (broken where no step tested a position) with a marker at every point."""
    colour = SERIES_COLOURS[n % 8]
    dash = DASHES[n % 4]
    shape = MARKERS[n % 4]
    runs = []
    run = []
    marks = []
    for k, alpha in enumerate(r.by_position[:k_max], 1):
        if alpha is None:
            runs = runs + [run]
            run = []
            continue
        run.append(at(k, alpha))
        marks.append(_marker(shape, *at(k, alpha), colour, f"{r.name}: α_{k} = {alpha:.2f}"))
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    lines = [
        f'<polyline points="{" ".join(f"{px:.1f},{py:.1f}" for px, py in points)}" fill="none" stroke="{colour}" '
        f'stroke-width="2.5"{dashed}/>'
        for points in [*runs, run]
        if len(points) > 1
    ]
    return "".join(lines + marks)


def _legend_entry(r: WorkloadRow, n: int, x: float, y: float, room: float) -> str:
    colour = SERIES_COLOURS[n % 8]
    dash = DASHES[n % 4]
    shape = MARKERS[n % 4]
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    sample = (
        f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x + 28:.1f}" y2="{y:.1f}" stroke="{colour}" stroke-width="2.5"{dashed}/>'
    )
    return (
        sample + _marker(shape, x + 14, y, colour, r.name) + _text(x + 36, y + 4, _clip(r.name, room - 36), tip=r.name)
    )


def acceptance_lines(rows: Sequence[WorkloadRow], width: int = 640) -> str:
    """α_k by draft position k for every drafter that drafted: of the steps that tested a k-th drafted token, the
    share that accepted it. The legend sits in its own column right of the plot."""
    drafted = [r for r in rows if r.name != PLAIN and any(a is not None for a in r.by_position)]
    label = "acceptance by draft position, per drafter"
    if not drafted:
        return _empty(width, label, "rp-alpha", "no drafter drafted a token")
    k_max = min(max(len(r.by_position) for r in drafted), MAX_POSITIONS)
    left = 62
    legend_w = 170
    top = 16
    plot_h = 220
    plot_w = width - left - legend_w - 16
    height = max(top + plot_h + 50, top + 12 + 22 * len(drafted))
    bottom = top + plot_h

    def at(k: int, alpha: float) -> tuple[float, float]:
        inset = 12  # the first and last markers clear of the axis labels
        x = left + (plot_w / 2 if k_max == 1 else inset + (k - 1) / (k_max - 1) * (plot_w - 2 * inset))
        return x, bottom - alpha * plot_h

    parts = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = bottom - tick * plot_h
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="{GRID}"/>')
        parts.append(_text(left - 8, y + 4, _num(tick), "end"))
    parts += [_text(at(k, 0)[0], bottom + 18, str(k), "middle") for k in range(1, k_max + 1)]
    parts.append(_text(left + plot_w / 2, bottom + 40, "draft position k", "middle"))
    parts.append(
        _text(0, 0, "α_k: accepted / tested", "middle", f' transform="translate(18 {top + plot_h / 2}) rotate(-90)"')
    )
    parts.append(f'<line x1="{left}" y1="{bottom}" x2="{left + plot_w}" y2="{bottom}" stroke="{INK}"/>')
    parts += [_series(r, n, at, k_max) for n, r in enumerate(drafted)]
    x_legend = left + plot_w + 24
    parts += [_legend_entry(r, n, x_legend, top + 12 + 22 * n, width - x_legend - 4) for n, r in enumerate(drafted)]
    return _svg(width, height, label, "".join(parts), "rp-alpha")
