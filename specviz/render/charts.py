"""Plotly charts: the race's tokens/s over each side's own time, the γ sweep with theory drawn over it, Compare all,
and a step's acceptance rule replayed."""

import textwrap
from html import escape

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.diagnosis import time_split
from ..analysis.physics import MOVED_MARK
from ..analysis.rule_replay import ReplayedStep
from ..analysis.theory import per_token_alpha
from ..events import PLAIN, StepEvent, summarize
from ..views.race import SPEC, RaceView
from ..views.sweep import SweepView
from .figure1 import WHITESPACE
from .svg_charts import LOSS, nice_ticks

PLAIN_COLOUR = "#7f7f7f"
SPEC_COLOUR = "#0072b2"
THEORY_COLOUR = "#e69f00"
# The legend sits at the foot of the figure itself (container coordinates), not at a fraction of the plot's height
# below it: Plotly then reserves the legend's rows in the bottom margin, so the axis titles and tick labels are laid
# out above it however many rows it wraps into at the chart's width.
_LAYOUT = dict(
    template="plotly_white",
    font=dict(size=15),
    margin=dict(l=50, r=20, t=50, b=10),
    height=360,
    legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, xanchor="left"),
)


def running_rate(events: list[StepEvent]) -> tuple[list[float], list[float]]:
    """(own clock at the end of each step, tokens/s so far over decode time): ends at the metrics' tokens/s."""
    clock = decode = 0.0
    tokens = 0
    xs = []
    ys = []
    for e in events:
        clock += e.prefill_s + e.step_s
        decode += e.step_s
        tokens += len(e.tokens)
        xs.append(round(clock, 4))
        ys.append(round(tokens / decode, 3) if decode > 0 else 0.0)
    return xs, ys


def race_chart(view: RaceView) -> go.Figure:
    fig = go.Figure()
    for name, lane, colour in ((PLAIN, view.plain, PLAIN_COLOUR), (SPEC, view.spec, SPEC_COLOUR)):
        xs, ys = running_rate(lane.events)
        fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines", line=dict(color=colour, width=3)))
    fig.update_layout(
        title="tokens/s so far", xaxis_title="each side's own clock (s)", yaxis_title="tokens/s", **_LAYOUT
    )
    # Both axes from 0, and the tokens/s labels kept clear of the axis: an autoranged lowest label sat in the corner
    # and ran into the clock's first label.
    fig.update_xaxes(rangemode="tozero")
    fig.update_yaxes(rangemode="tozero", ticklabelstandoff=8)
    return fig


def sweep_chart(view: SweepView) -> go.Figure:
    points = view.points()
    theory = view.theory()
    gammas = [p.gamma for p in points]
    fig = make_subplots(
        rows=1, cols=3, subplot_titles=("acceptance", "tokens/step", "speedup"), horizontal_spacing=0.09
    )
    measured = (
        ("acceptance (accepted/drafted)", [p.acceptance_rate for p in points], dict(color=SPEC_COLOUR)),
        ("τ measured", [p.tokens_per_step for p in points], dict(color=SPEC_COLOUR)),
        ("speedup measured", [p.speedup for p in points], dict(color=SPEC_COLOUR, width=3)),
    )
    for col, (name, ys, line) in enumerate(measured, start=1):  # τ, in the same colour, adds no legend entry
        shown = go.Scatter(x=gammas, y=ys, name=name, mode="lines+markers", line=line, showlegend=col != 2)
        fig.add_trace(shown, row=1, col=col)
    if theory is not None:
        label = f"theory: α={theory.alpha:.2f}, c={theory.c:.2f}" + (" per pass" if theory.block else "")
        dashed = dict(color=THEORY_COLOUR, dash="dash", width=3)
        fig.add_trace(
            go.Scatter(x=list(view.gammas), y=list(theory.speedups), name=label, mode="lines", line=dashed),
            row=1,
            col=3,
        )
        fig.add_vline(x=theory.best_gamma, line=dict(color=THEORY_COLOUR, dash="dot"), row=1, col=3)
    best = view.best_measured()
    if best is not None:
        star = dict(symbol="star", size=18, color=SPEC_COLOUR)
        top = next(p.speedup for p in points if p.gamma == best)
        fig.add_trace(
            go.Scatter(x=[best], y=[top], name=f"best measured γ = {best}", mode="markers", marker=star), row=1, col=3
        )
    moved = [p for p in points if p.moved]
    if moved:  # a speedup its τ forbids: shown crossed out, never the best
        cross = dict(symbol="x", size=16, color=LOSS)
        name = f"{MOVED_MARK}: speedup beyond its τ, left out"
        shown = go.Scatter(x=[p.gamma for p in moved], y=[p.speedup for p in moved], name=name, mode="markers")
        fig.add_trace(shown.update(marker=cross), row=1, col=3)
    fig.add_hline(y=1.0, line=dict(color=PLAIN_COLOUR, dash="dot"), row=1, col=3)
    _sweep_axes(fig, view.gammas, [p.speedup for p in points] + (list(theory.speedups) if theory is not None else []))
    fig.update_layout(title="γ sweep on this prompt" + ("" if view.finished else " (running…)"), **_LAYOUT)
    return fig


def _sweep_axes(fig: go.Figure, gammas, speedups: list[float]) -> None:
    """γ on every x axis over the whole sweep from its first point, named once under the middle one (the three share
    it), with Plotly's own tick spacing (every γ where they fit, every other one on a phone); speedup from 0 with room
    above the highest point and plain's line at 1, so no tick label sits on the top edge under the subplot's title."""
    if gammas:
        fig.update_xaxes(range=[min(gammas) - 0.5, max(gammas) + 0.5])
    fig.update_xaxes(title_text="γ (draft length)", row=1, col=2)
    fig.update_yaxes(range=[0, max([1.0, *speedups]) * 1.12], row=1, col=3)
    fig.update_annotations(font_size=13)  # the subplots' titles, each within its third of the width


def placeholder(title: str) -> go.Figure:
    """An empty chart that says in its middle what will appear in it, in lines short enough for a phone's width."""
    fig = go.Figure()
    shown = dict(text="<br>".join(textwrap.wrap(title, 32)), x=0.5, xanchor="center", y=0.5, yanchor="middle")
    fig.update_layout(title=shown, xaxis=dict(visible=False), yaxis=dict(visible=False), **_LAYOUT)
    return fig


def compare_chart(rows) -> go.Figure:
    """Tokens/s of every drafter beside plain decoding, each bar labelled with its speedup."""
    done = [r for r in rows if r.tokens_per_s is not None]
    fig = go.Figure(
        go.Bar(
            x=[r.name for r in done],
            y=[r.tokens_per_s for r in done],
            text=[f"{r.speedup:.2f}×" if r.speedup else "" for r in done],
            textposition="outside",
            marker_color=[PLAIN_COLOUR if r.name == PLAIN else SPEC_COLOUR for r in done],
        )
    )
    fig.update_layout(
        title="tokens/s by drafter", xaxis_title="label: speedup over plain", yaxis_title="tokens/s", **_LAYOUT
    )
    top = max((r.tokens_per_s for r in done), default=0)
    if top > 0:  # headroom above the tallest bar for its label, which the plot area would otherwise clip
        fig.update_yaxes(range=[0, top * 1.18])
    return fig


def replay_chart(replay: ReplayedStep) -> go.Figure:
    """What the replayed rule emitted, as shares, beside the target's p (and the drafter's q) of the same tokens."""
    labels = []
    seen = set()
    for label in replay.labels:  # two tokens may read the same: keep them apart
        shown = escape("".join(WHITESPACE.get(c, c) for c in label) or "\u2205")
        while shown in seen:
            shown += "\u200b"
        seen.add(shown)
        labels.append(shown)
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=labels,
            y=[c / replay.n for c in replay.counts],
            name=f"emitted in {replay.n:,} replays",
            marker_color=SPEC_COLOUR,
        )
    )
    fig.add_trace(go.Bar(x=labels, y=list(replay.p), name="target's p", marker_color=PLAIN_COLOUR))
    if replay.q is not None:
        fig.add_trace(go.Bar(x=labels, y=list(replay.q), name="drafter's q", marker_color=THEORY_COLOUR))
    fig.update_layout(
        title=f"χ² test against p: p-value {replay.p_value:.3g}",
        barmode="group",
        yaxis_title="share",
        **_LAYOUT,
    )
    return fig


def position_chart(events: list[StepEvent]) -> go.Figure:
    """α_k for each draft position of one run, against the flat line the i.i.d. theory assumes, and how many drafts
    each step accepted."""
    m = summarize(events)
    alphas = m.acceptance_by_position
    ks = list(range(1, len(m.by_position) + 1))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("α_k by draft position", "accepted per step"))
    fig.add_trace(
        go.Bar(
            x=ks,
            y=alphas,
            name="α_k measured",
            marker_color=SPEC_COLOUR,
            text=[f"{a}/{t}" for t, a in m.by_position],
            textposition="outside",
        ),
        row=1,
        col=1,
    )
    alpha = per_token_alpha(events)
    if alpha is not None and ks:
        fig.add_trace(
            go.Scatter(
                x=[0.5, ks[-1] + 0.5],
                y=[alpha, alpha],
                mode="lines",
                name=f"i.i.d. theory: α = {alpha:.2f} at every position",
                line=dict(color=THEORY_COLOUR, dash="dash", width=3),
            ),
            row=1,
            col=1,
        )
    fig.add_trace(
        go.Bar(
            x=list(range(len(m.accepted_lengths))),
            y=list(m.accepted_lengths),
            name="steps",
            marker_color=PLAIN_COLOUR,
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(title_text="draft position k", dtick=1, row=1, col=1)
    fig.update_xaxes(title_text="drafts accepted", dtick=1, row=1, col=2)
    fig.update_yaxes(range=[0, 1.15], row=1, col=1)
    # Whole counts, the top tick below the plot's top edge: a label there would reach into the subplot's title.
    counts = [int(t) for t in nice_ticks(max(m.accepted_lengths, default=1), 4) if float(t).is_integer()]
    fig.update_yaxes(range=[0, 1.15 * counts[-1]], tickvals=counts, row=1, col=2)
    fig.update_layout(title="where the drafter's guesses hold" + ("" if ks else " (no step drafted)"), **_LAYOUT)
    return fig


SPLIT_COLOURS = {"prefill": "#cccccc", "draft": THEORY_COLOUR, "verify": SPEC_COLOUR, "overhead": "#d55e00"}


def time_chart(view: RaceView) -> go.Figure:
    """Where each side's own time went: prefill, drafting, verify forwards (plain: its forwards), overhead."""
    splits = {PLAIN: time_split(view.plain.events), SPEC: time_split(view.spec.events)}
    fig = go.Figure()
    for part, colour in SPLIT_COLOURS.items():
        values = [getattr(split, part) for split in splits.values()]
        fig.add_trace(
            go.Bar(
                y=list(splits),
                x=values,
                name=part,
                orientation="h",
                marker_color=colour,
                text=[f"{v:.1f} s" if v >= 0.05 else "" for v in values],
                textposition="inside",
            )
        )
    fig.update_layout(title="where each side's own time went", barmode="stack", xaxis_title="seconds", **_LAYOUT)
    return fig
