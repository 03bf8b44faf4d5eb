"""Concurrent requests, drawn: total tokens/s and each request's own tokens/s against how many requests decode at
once, plain decoding and every lane (with a bar from the lowest to the highest of its rounds), the theory's
throughput beside each fixed-γ lane's (dashed), and where each lane stops paying (a dotted line at its crossover,
labelled with what it is). Plotly for the app; the snapshot page draws the same as SVG (concurrency_page.py)."""

import math
from html import escape
from statistics import median

import plotly.graph_objects as go

from ..events import PLAIN
from ..traffic.levels_view import ConcurrencyView
from .charts import _LAYOUT, PLAIN_COLOUR
from .svg_charts import SERIES_COLOURS

LABEL_PX = 38  # one crossover label's two lines, stacked above the plot


def lane_colour(view: ConcurrencyView, lane: str) -> str:
    return PLAIN_COLOUR if lane == PLAIN else SERIES_COLOURS[(view.lanes.index(lane) - 1) % len(SERIES_COLOURS)]


def series(view: ConcurrencyView, lane: str, what: str) -> tuple[list[int], list[float]]:
    """(levels, values) where the lane has a run: `what` is "throughput", "latency" or "theory" (the predicted
    speedup times plain decoding's throughput at that level)."""
    xs, ys = [], []
    for level in view.levels:
        f = view.figures(lane, level)
        plain = view.figures(PLAIN, level)
        if f is None:
            continue
        value = (
            f.predicted * plain.throughput
            if what == "theory" and f.predicted is not None and plain is not None
            else getattr(f, what, None)
            if what != "theory"
            else None
        )
        if value is not None:
            xs.append(level)
            ys.append(round(value, 3))
    return xs, ys


def round_range(view: ConcurrencyView, lane: str, what: str) -> tuple[list[float], list[float]]:
    """The lowest and the highest of the lane's rounds at each level of series(view, lane, what) ("throughput" or
    "latency")."""
    lows, highs = [], []
    for level in series(view, lane, what)[0]:
        values = [r.throughput if what == "throughput" else median(r.row_speeds) for r in view.runs[lane, level]]
        lows.append(round(min(values), 3))
        highs.append(round(max(values), 3))
    return lows, highs


def crossovers(view: ConcurrencyView) -> list[tuple[str, int]]:
    """(lane, level) for each lane that stops paying inside the levels run."""
    found = [(lane, None if lane == PLAIN or lane in view.notes else view.crossover(lane)) for lane in view.lanes]
    return [(lane, level) for lane, level in found if level is not None]


def crossover_label(lane: str, level: int, marked: bool = False) -> str:
    """What the dotted line at a lane's crossover says; `marked`: as Plotly's markup, on two lines, the lane in bold
    (and escaped: a lane's name is the visitor's)."""
    words = f"speculation stops paying ≈ {level} request{'s' * (level != 1)}"
    return f"<b>{escape(lane)}</b>: {words.replace(' stops', '<br>stops', 1)}" if marked else f"{lane}: {words}"


def concurrency_chart(view: ConcurrencyView, what: str = "throughput") -> go.Figure:
    """Total tokens/s ("throughput", with the theory and the crossovers) or the median request's own tokens/s
    ("latency") against concurrency, on a log-2 axis that names each level run."""
    fig = go.Figure()
    for lane in view.lanes:
        if lane in view.notes:
            continue
        colour = lane_colour(view, lane)
        xs, ys = series(view, lane, what)
        if xs:
            lows, highs = round_range(view, lane, what)
            bars = dict(type="data", symmetric=False, color=colour, thickness=1.5, width=5)
            bars |= dict(array=[h - y for h, y in zip(highs, ys)], arrayminus=[y - lo for lo, y in zip(lows, ys)])
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    name=lane,
                    mode="lines+markers",
                    line=dict(color=colour, width=3),
                    error_y=bars if any(h > lo for lo, h in zip(lows, highs)) else None,
                )
            )
        if what == "throughput" and lane != PLAIN:
            txs, tys = series(view, lane, "theory")
            if txs:
                fig.add_trace(
                    go.Scatter(
                        x=txs,
                        y=tys,
                        name=f"{lane}: theory",
                        mode="lines",
                        line=dict(color=colour, width=2, dash="dash"),
                    )
                )
    title = "total tokens/s: what the device serves" if what == "throughput" else "each request's own tokens/s"
    fig.update_layout(title=title, xaxis_title="requests decoded at once", yaxis_title="tokens/s", **_LAYOUT)
    # The axis spans the levels run (with a margin), not what a crossover's annotation would stretch it to.
    low, high = math.log10(min(view.levels)), math.log10(max(view.levels))
    margin = max(0.08, (high - low) * 0.04)
    fig.update_xaxes(
        type="log",
        range=[low - margin, high + margin],
        tickvals=list(view.levels),
        ticktext=[str(v) for v in view.levels],
    )
    fig.update_yaxes(rangemode="tozero", ticklabelstandoff=8)
    crossings = crossovers(view)
    if crossings:  # the crossovers' words stacked in a band above the plot, where no line is drawn (and as much room
        band = LABEL_PX * len(crossings)  # above its twin, so that the two plots line up)
        top = _LAYOUT["margin"]["t"] + band
        fig.update_layout(height=_LAYOUT["height"] + band, margin=dict(_LAYOUT["margin"], t=top))
        fig.update_layout(title=dict(text=title, y=1, yref="container", yanchor="top", pad=dict(t=8)))
    for n, (lane, at) in enumerate(crossings if what == "throughput" else []):
        colour = lane_colour(view, lane)
        fig.add_vline(x=at, line=dict(color=colour, dash="dot", width=2))
        _label_crossover(fig, view, lane, at, colour, len(crossings) - 1 - n)
    return fig


def _label_crossover(fig: go.Figure, view: ConcurrencyView, lane: str, at: int, colour: str, row: int) -> None:
    """The dotted line's words above the plot, starting at the line (ending there in the right half), `row` rows
    above the plot's top. On a log axis an annotation's x is the level's logarithm (a line's is the level itself):
    given the level, the words land far off the axis and are never drawn."""
    right = view.levels.index(at) < len(view.levels) / 2
    fig.add_annotation(
        x=math.log10(at),
        xref="x",
        y=1,
        yref="y domain",
        yshift=LABEL_PX * row,
        text=crossover_label(lane, at, marked=True),
        showarrow=False,
        xanchor="left" if right else "right",
        yanchor="bottom",
        align="left" if right else "right",
        font=dict(color=colour, size=13),
        bgcolor="rgba(255, 255, 255, 0.85)",
    )
