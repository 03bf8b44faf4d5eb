"""Plotly charts: the race's tokens/s over each side's own time, and the γ sweep with theory drawn over it."""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...events import StepEvent
from ..race import RaceView
from ..sweep import SweepView

PLAIN_COLOUR, SPEC_COLOUR, THEORY_COLOUR = "#7f7f7f", "#0072b2", "#e69f00"
_LAYOUT = dict(template="plotly_white", font=dict(size=15), margin=dict(l=50, r=20, t=50, b=45), height=340,
               legend=dict(orientation="h", y=-0.25))


def running_rate(events: list[StepEvent]) -> tuple[list[float], list[float]]:
    """(own clock at the end of each step, tokens/s so far over decode time): ends at the metrics' tokens/s."""
    clock = decode = 0.0
    tokens, xs, ys = 0, [], []
    for e in events:
        clock += e.prefill_s + e.step_s
        decode += e.step_s
        tokens += len(e.tokens)
        xs.append(round(clock, 4))
        ys.append(round(tokens / decode, 3) if decode > 0 else 0.0)
    return xs, ys


def race_chart(view: RaceView) -> go.Figure:
    fig = go.Figure()
    for name, lane, colour in (("plain", view.plain, PLAIN_COLOUR), ("speculative", view.spec, SPEC_COLOUR)):
        xs, ys = running_rate(lane.events)
        fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines", line=dict(color=colour, width=3)))
    fig.update_layout(title="tokens/s so far, against each side's own clock", xaxis_title="own clock (s)",
                      yaxis_title="tokens/s", **_LAYOUT)
    return fig


def sweep_chart(view: SweepView) -> go.Figure:
    points, theory = view.points(), view.theory()
    gammas = [p.gamma for p in points]
    fig = make_subplots(rows=1, cols=3, subplot_titles=("acceptance rate", "tokens per step (τ)", "speedup over plain"))
    fig.add_trace(go.Scatter(x=gammas, y=[p.acceptance_rate for p in points], name="acceptance (accepted/drafted)",
                             mode="lines+markers", line=dict(color=SPEC_COLOUR)), row=1, col=1)
    fig.add_trace(go.Scatter(x=gammas, y=[p.tokens_per_step for p in points], name="τ measured",
                             mode="lines+markers", line=dict(color=SPEC_COLOUR), showlegend=False), row=1, col=2)
    fig.add_trace(go.Scatter(x=gammas, y=[p.speedup for p in points], name="speedup measured",
                             mode="lines+markers", line=dict(color=SPEC_COLOUR, width=3)), row=1, col=3)
    if theory is not None:
        label = f"theory: α={theory.alpha:.2f}, c={theory.c:.2f}"
        fig.add_trace(go.Scatter(x=list(view.gammas), y=list(theory.speedups), name=label, mode="lines",
                                 line=dict(color=THEORY_COLOUR, dash="dash", width=3)), row=1, col=3)
        fig.add_vline(x=theory.best_gamma, line=dict(color=THEORY_COLOUR, dash="dot"), row=1, col=3)
    best = view.best_measured()
    if best is not None:
        top = max(p.speedup for p in points)
        fig.add_trace(go.Scatter(x=[best], y=[top], name=f"best measured γ = {best}", mode="markers",
                                 marker=dict(symbol="star", size=18, color=SPEC_COLOUR)), row=1, col=3)
    fig.add_hline(y=1.0, line=dict(color=PLAIN_COLOUR, dash="dot"), row=1, col=3)
    fig.update_xaxes(title_text="γ (draft length)", dtick=1)
    fig.update_layout(title="γ sweep on this prompt" + ("" if view.finished else " (running…)"), **_LAYOUT)
    return fig


def placeholder(title: str) -> go.Figure:
    """An empty chart that says what will appear in it."""
    fig = go.Figure()
    fig.update_layout(title=title, xaxis=dict(visible=False), yaxis=dict(visible=False), **_LAYOUT)
    return fig


def compare_chart(rows) -> go.Figure:
    """Tokens/s of every drafter beside plain decoding, each bar labelled with its speedup."""
    done = [r for r in rows if r.tokens_per_s is not None]
    fig = go.Figure(go.Bar(x=[r.name for r in done], y=[r.tokens_per_s for r in done],
                           text=[f"{r.speedup:.2f}×" if r.speedup else "" for r in done], textposition="outside",
                           marker_color=[PLAIN_COLOUR if r.name == "plain" else SPEC_COLOUR for r in done]))
    fig.update_layout(title="tokens/s on this prompt (label: speedup over plain)", yaxis_title="tokens/s", **_LAYOUT)
    return fig
