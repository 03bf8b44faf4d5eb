"""A recorded run as one self-contained HTML page (for slides and email): the two sides coloured by origin, the metrics,
the identity badge, Figure 1 and the tokens/s chart as inline SVG. No script and nothing fetched: it opens offline,
and every piece of model or user text is escaped as on the screen."""

from html import escape

from ..events import PLAIN
from ..paths import ASSETS
from ..serving.handoff import recorded
from ..trace import Trace
from ..views.grand_prix import KIND as GRAND_PRIX
from ..views.grand_prix import from_trace
from ..views.race import SPEC, RaceView
from ..views.replay import replay
from . import panels
from .charts import PLAIN_COLOUR, SPEC_COLOUR, running_rate
from .figure1 import legend, origin_text, step_rows
from .handoff_block import production_block
from .runtime_compare import runtime_comparison

PAGE_CSS = """body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 1.5rem auto; padding: 0 1rem; }
.sv-lanes { display: grid; grid-template-columns: 1fr 1fr; gap: 1.5rem; }
.sv-meta { opacity: 0.75; font-size: 0.95rem; }
.sv-compare { border-collapse: collapse; } .sv-compare td, .sv-compare th { padding: 0.2rem 0.6rem; }
"""


def final_view(trace: Trace, side: str | None = None) -> RaceView:
    """The last view a replay of `trace` reaches, at once."""
    *_, view = replay(trace, side, speed=1.0, sleep=lambda _: None)
    return view


def svg_chart(view: RaceView, width: int = 720, height: int = 260) -> str:
    """Tokens/s so far against each side's own clock, as the app's chart draws it."""
    series = [
        (PLAIN, running_rate(view.plain.events), PLAIN_COLOUR),
        ("speculative", running_rate(view.spec.events), SPEC_COLOUR),
    ]
    x_max = max([max(xs, default=0) for _, (xs, _), _ in series] + [1e-9])
    y_max = max([max(ys, default=0) for _, (_, ys), _ in series] + [1e-9]) * 1.1
    left, bottom = 50, height - 30

    def point(x, y):
        return f"{left + x / x_max * (width - left - 10):.1f},{bottom - y / y_max * (bottom - 10):.1f}"

    def polyline(xs, ys, colour):
        points = " ".join(point(x, y) for x, y in zip(xs, ys))
        return f'<polyline fill="none" stroke="{colour}" stroke-width="3" points="{points}"/>'

    lines = "".join(polyline(xs, ys, colour) for _, (xs, ys), colour in series if xs)
    keys = "".join(
        f'<text x="{left + 10 + 130 * i}" y="20" fill="{colour}">{name}</text>'
        for i, (name, _, colour) in enumerate(series)
    )
    axes = (
        f'<line x1="{left}" y1="{bottom}" x2="{width - 10}" y2="{bottom}" stroke="#888"/>'
        f'<line x1="{left}" y1="10" x2="{left}" y2="{bottom}" stroke="#888"/>'
        f'<text x="{left}" y="{height - 8}">0</text><text x="{width - 60}" y="{height - 8}">{x_max:.1f} s</text>'
        f'<text x="4" y="20">{y_max:.1f}</text>'
        f'<text x="{width / 2 - 80}" y="{height - 8}">own clock (s) → tokens/s so far</text>'
    )
    return (
        f'<svg class="sv-chart" role="img" aria-label="tokens per second of both sides" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" font-size="13">{axes}{lines}{keys}</svg>'
    )


def compare_table(trace: Trace) -> str:
    rows = from_trace(trace).rows()
    fmt = lambda v, p="{:.2f}": "–" if v is None else p.format(v)  # noqa: E731
    body = "".join(
        f"<tr><td>{escape(r.name)}</td><td>{fmt(r.tokens_per_s)}</td><td>{fmt(r.speedup, '{:.2f}×')}</td>"
        f"<td>{fmt(r.alpha)}</td><td>{fmt(r.tau)}</td><td>{fmt(r.target_forwards, '{}')}</td>"
        f"<td>{'–' if r.identical is None else 'yes' if r.identical else 'no'}</td><td>{escape(r.note)}</td></tr>"
        for r in rows
    )
    return (
        '<table class="sv-compare sv-metrics"><thead><tr><th>drafter</th><th>tokens/s</th><th>speedup</th><th>α</th>'
        f"<th>τ</th><th>target forwards</th><th>identical</th><th></th></tr></thead><tbody>{body}</tbody></table>"
    )


def lane_texts(trace: Trace) -> str:
    """Each lane's text, coloured by origin, under its name and how it drafted."""
    return "".join(
        f'<h3 class="sv-side">{escape(s.name)}</h3><div class="sv-mode">{escape(s.words)}</div>'
        + (origin_text(s.events, trace.text_of) if s.events else panels.waiting_text("did not race"))
        for s in trace.sides
    )


def snapshot_html(trace: Trace, side: str | None = None) -> str:
    view = final_view(trace, side)
    models = trace.models
    meta = escape(
        f"{models.pair or models.target} · {models.precision} · {models.device} · "
        f"recorded {trace.created} · γ {trace.settings.get('gamma')}, temperature "
        f"{trace.settings.get('temperature')}, {trace.settings.get('max_new_tokens')} new tokens at most"
    )
    several = trace.kind in (GRAND_PRIX, "comparison")
    raced = from_trace(trace) if several else None
    runtimes = runtime_comparison(raced, raced.runtime, raced.curves) if raced is not None else ""
    comparison = (
        f"<h2>Every lane of the Grand Prix</h2>{compare_table(trace)}{runtimes}{lane_texts(trace)}" if several else ""
    )
    css = (ASSETS / "specviz.css").read_text() + PAGE_CSS
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>specviz: {escape(trace.prompt[:60])}</title>"
        f'<style>{css}</style></head><body><h1 class="sv-title">specviz</h1><p class="sv-meta">{meta}</p>'
        f'{panels.prompt_echo(trace.prompt)}<div class="sv-lanes"><div><h3 class="sv-side">Plain decoding</h3>'
        f'{panels.lane_text(view, PLAIN)}</div><div><h3 class="sv-side">Speculative decoding</h3>'
        f"{panels.lane_text(view, SPEC)}</div></div>{panels.metrics_strip(view)}{panels.identity_badge(view)}"
        f"{comparison}{production_block(recorded(trace.extra))}"
        f"<h2>tokens/s</h2>{svg_chart(view)}"
        f"<h2>Every verification step (Figure 1 of Leviathan et al.)</h2>{legend()}"
        f"{step_rows(view.spec.events, view.text_of)}</body></html>"
    )
