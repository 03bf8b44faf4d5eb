"""A traffic run on the page: the verdict in words (where each drafter stops paying, each lane's capacity), the table
of every lane and rate with the simulator's figure and its error beside the measured one, and static SVG charts of
TPOT and goodput against the request rate, the simulator's points dashed and the stop-paying rate marked. No script;
every name and number escaped."""

from html import escape

from ..analysis.physics import MOVED_MARK
from ..events import PLAIN
from ..traffic.rates_view import TrafficView, error_of
from . import html_table
from .concurrency_page import progress_line
from .panels import record_page
from .svg_charts import INK, LABEL_ROW, SERIES_COLOURS, _svg, _text, nice_ticks, spaced_axes

CHARTS = {  # what: (title, the figure of a RateFigures, its unit)
    "tpot50": ("median time per output token", lambda f: f.tpot[0], "s"),
    "tpot99": ("p99 time per output token", lambda f: f.tpot[2], "s"),
    "goodput": ("goodput: requests per second that met the SLO", lambda f: f.goodput, "req/s"),
}


def _sentence(words: str) -> str:
    """The first letter up, the rest as written (str.capitalize would turn "SLO" into "slo")."""
    return words[:1].upper() + words[1:]


def lane_colour(view: TrafficView, lane: str) -> str:
    return "#000000" if lane == PLAIN else SERIES_COLOURS[(view.lanes.index(lane) - 1) % len(SERIES_COLOURS)]


def traffic_verdict(view: TrafficView) -> str:
    """The sentences a product manager needs: per drafter, where it stops paying; per lane, its capacity."""
    items = []
    for lane in view.lanes:
        if lane in view.notes:
            items.append(f"<li><b>{escape(lane)}</b> cannot serve concurrent requests: {escape(view.notes[lane])}</li>")
            continue
        if not view.measured(lane):
            continue
        capacity = view.capacity_words(lane)
        words = capacity if lane == PLAIN else f"{view.paying_words(lane)}; {capacity}"
        items.append(f"<li><b>{escape(lane)}</b>: {escape(words)}</li>")
    rounds = "one round: a verdict needs three" if view.rounds == 1 else f"medians of {view.rounds} rounds"
    slo = f"SLO: first token within {view.slo.ttft_s:g} s, then {view.slo.tpot_s:g} s per token; {rounds}"
    headline = view.headline()
    said = f'<p class="sv-traffic-headline">{escape(headline)}</p>' if headline else ""
    return f'<div class="sv-traffic-verdict">{said}<p>{escape(slo)}</p><ul>{"".join(items)}</ul></div>'


def traffic_progress(view: TrafficView) -> str:
    done = len(view.order)
    kind = "sv-done" if view.finished else "sv-busy"
    return progress_line(view.message, done, kind)


def traffic_charts(view: TrafficView) -> str:
    """The three charts side by side where the page is wide enough; a line saying what comes before any run."""
    if not any(view.measured(lane) for lane in view.lanes):
        return '<p class="sv-note">TPOT and goodput against the request rate appear here as each rate runs.</p>'
    figures = "".join(
        f'<figure class="sv-traffic-chart"><figcaption>{escape(_sentence(CHARTS[what][0]))} '
        f"({escape(CHARTS[what][2])})</figcaption>{svg_traffic_chart(view, what)}</figure>"
        for what in CHARTS
    )
    return f'<div class="sv-traffic-charts">{figures}</div>'


def traffic_production(view: TrafficView) -> str:
    """Into production: vLLM's draft length per batch size as the runs' steps measured it, and for engines that take
    no table, the rate from which to turn speculation off."""
    if not view.advice and not view.turn_off_lines():
        return ""
    items = "".join(
        f"<li><b>{escape(a.drafter)}</b>: <code>{escape(a.flag)}</code><br><small>{escape(a.note)}</small></li>"
        if a.config
        else f"<li><b>{escape(a.drafter)}</b>: no vLLM equivalent ({escape(a.note)})</li>"
        for a in view.advice
    )
    off = "".join(f"<li>{escape(line)}</li>" for line in view.turn_off_lines())
    vllm = f"<p>Into production, for vLLM:</p><ul>{items}</ul>" if items else ""
    others = "For engines without a per-batch-size table:" if items else "Into production:"
    return f'<div class="sv-vllm">{vllm}' + (f"<p>{others}</p><ul>{off}</ul>" if off else "") + "</div>"


def traffic_table(view: TrafficView) -> str:
    head = (
        "lane",
        "req/s",
        "tok/s",
        "TTFT p50 / p99 s",
        "TPOT p50 / p99 s",
        "goodput",
        "vs plain",
        "SLO",
        "identical",
        "simulated tok/s · TPOT p50",
    )
    rows = []
    for lane in view.lanes:
        for rate in view.rates:
            f = view.figures(lane, rate)
            if f is None:
                continue
            ratio = view.versus_plain(lane, rate, lambda x: x.goodput)
            sim = view.simulated.get((lane, rate))
            simulated = "–" if sim is None else (
                f"{sim.tokens_per_s:.1f} ({_pct(error_of(sim.tokens_per_s, f.tokens_per_s))}) · "
                f"{sim.tpot[0]:.3f} ({_pct(error_of(sim.tpot[0], f.tpot[0]))})"
            )  # fmt: skip
            spread = view.spread(lane, rate, lambda x: x.tpot[0])
            tpot = f"{f.tpot[0]:.3f} / {f.tpot[2]:.3f}" + _spread_of(spread)
            cells = [
                lane,
                f"{rate:g}",
                f"{f.tokens_per_s:.1f}",
                f"{f.ttft[0]:.2f} / {f.ttft[2]:.2f}",
                tpot,
                f"{f.goodput:.3f}" + _spread_of(view.spread(lane, rate, lambda x: x.goodput)),
                "–" if lane == PLAIN or ratio is None else f"{ratio:.2f}×" + moved_mark(view, lane, rate),
                "met" if f.meets_slo else "missed",
                {None: "–", True: "yes", False: "NO"}[view.identical(lane, rate)],
                simulated,
            ]
            rows.append(html_table.row(cells))
    return f'<div class="sv-traffic-scroll">{html_table.table("sv-traffic-table", head, rows)}</div>'


def moved_mark(view: TrafficView, lane: str, rate: float) -> str:
    return f" {MOVED_MARK}" if view.moved(lane, rate) else ""


def _spread_of(spread: tuple[float, float] | None) -> str:
    """A figure's lowest and highest over the rounds, after its median: how far a difference must go to be news."""
    return "" if spread is None else f" ({spread[0]:.3f}–{spread[1]:.3f})"


def _pct(error: float | None) -> str:
    return "–" if error is None else f"{error * 100:+.0f}%"


def svg_traffic_chart(view: TrafficView, what: str = "tpot50", width: int = 720, height: int = 300) -> str:
    """One figure against the request rate: a solid line per lane as measured, the simulator's points (each rate
    predicted from the others) dashed, and a dotted line where each drafter stops paying, labelled."""
    title, pick, _ = CHARTS[what]
    series = []
    for lane in view.lanes:
        measured = [(f.rate, pick(f)) for f in view.measured(lane)]
        if not measured:
            continue
        simulated = [(r, pick(s)) for r in view.rates if (s := view.simulated.get((lane, r))) is not None]
        series.append((lane, measured, simulated))
    values = [y for _, m, s in series for _, y in m + s]
    # an axis from 0 to 1 where every value is 0 (no request met the SLO): "0" at the foot, not 2e-10
    ticks = nice_ticks(max(values) * 1.05 if any(v > 0 for v in values) else 1.0)
    stops = [(lane, where) for lane, _, _ in series if lane != PLAIN and (where := view.stops_paying(lane)) is not None]
    # each stop-paying label on its own row in a band above the data and its line, so nothing drawn crosses it
    left, right, top, bottom = 64, 190, 16, height - 42
    plot_top = top + LABEL_ROW * len(stops)
    rates = list(view.rates)
    box = (left, right, top, bottom)
    at, parts = spaced_axes(rates, ticks, width, box, plot_top, lambda r: f"{r:g}", "requests per second")
    legend = 0
    for lane, measured, simulated in series:
        colour = lane_colour(view, lane)
        for points, dash, name in ((measured, "", lane), (simulated, "5 4", f"{lane}: simulated")):
            if not points:
                continue
            xy = [at(x, y) for x, y in points]
            dashed = f' stroke-dasharray="{dash}"' if dash else ""
            if len(xy) > 1:
                line = " ".join(f"{px:.1f},{py:.1f}" for px, py in xy)
                parts.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2.5"{dashed}/>')
            fill = "#fff" if dash else colour
            parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{fill}" stroke="{colour}"/>' for px, py in xy]
            parts.append(_text(width - right + 12, top + 14 + 18 * legend, name, extra=f' fill="{colour}"', tip=name))
            legend += 1
    for row, (lane, where) in enumerate(stops):
        colour = lane_colour(view, lane)
        x = at(where, 0)[0]
        dots = f'stroke="{colour}" stroke-dasharray="2 3"'
        parts.append(f'<line x1="{x:.1f}" y1="{plot_top}" x2="{x:.1f}" y2="{bottom}" {dots}/>')
        # the words start above the line (end there in the right half, so that they never reach the legend)
        anchor = "start" if rates.index(where) < len(rates) / 2 else "end"
        label = f"{lane} stops paying"
        parts.append(_text(x, top + 12 + LABEL_ROW * row, label, anchor, f' fill="{colour}"', label))
    parts.append(f'<line x1="{left}" y1="{bottom}" x2="{width - right}" y2="{bottom}" stroke="{INK}"/>')
    return _svg(width, height, f"{title} against the request rate", "".join(parts), f"sv-traffic-{what}")


def traffic_snapshot_html(record) -> str:
    """A recorded traffic run (a TrafficRecord) as one self-contained page: no script, nothing fetched."""
    view = record.final_view()
    charts = "".join(f"<h2>{escape(_sentence(CHARTS[w][0]))}</h2>{svg_traffic_chart(view, w)}" for w in CHARTS)
    body = f"{traffic_verdict(view)}{charts}<h2>Every lane and rate</h2>{traffic_table(view)}{traffic_production(view)}"
    rows = f"at most {record.max_rows} rows at once"
    return record_page(record, "traffic", "requests arriving at a rate", rows, body,
                       "The prompts (request r asks prompt r, again from the first)")  # fmt: skip
