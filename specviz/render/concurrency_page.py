"""Concurrent requests in HTML: the progress line, the table (a row per lane and level: total tokens/s, each
request's own, τ, the speedup over plain decoding batched the same way with its spread over the rounds and the
theory's, the γ the batch drafted, whether every row wrote what its prompt writes alone), each lane's verdict (where it
stops paying, with that spread, and a concurrency sweep of too few rounds saying so), the identity badge, vLLM's
configuration, and the whole concurrency sweep as one offline page with SVG charts.
Every piece of model or user text is escaped."""

from html import escape

from ..analysis.physics import MOVED_MARK
from ..events import PLAIN
from ..trace import EXACT_ON, identity_grounds
from ..traffic.levels_view import VERDICT_ROUNDS, ConcurrencyView, requests
from . import html_table
from .concurrency_charts import crossover_label, crossovers, lane_colour, series
from .panels import record_page
from .svg_charts import INK, LABEL_ROW, _svg, _text, nice_ticks, spaced_axes


def _x(value, pattern: str = "{:.2f}×") -> str:
    return "–" if value is None else pattern.format(value)


def progress_line(message: str, done: int, kind: str) -> str:
    """The line under a run of many requests: what it is doing, and how many runs are done."""
    runs = "1 run" if done == 1 else f"{done} runs"
    return f'<div class="sv-progress-text {kind}">{escape(message)} · {runs} done</div>'


def concurrency_progress(view: ConcurrencyView) -> str:
    done = sum(len(runs) for runs in view.runs.values())
    kind = "sv-stopped" if view.stopped else "sv-done" if view.finished else "sv-busy"
    return progress_line(view.message, done, kind)


def crossover_words(view: ConcurrencyView, lane: str) -> str:
    """Where the lane stops paying, with its speedup there and that speedup's spread over the rounds (levels whose
    rounds fall on both sides of 1× named as not settled), and the theory's verdict where it priced a level (adaptive
    γ has none); "mixed" where it is below plain at one level and above at a larger one; levels the physics forbids
    left out and named; no verdict before a level has run."""
    figures = {level: f for level in view.levels if (f := view.figures(lane, level)) is not None}
    if not figures:
        return "not run yet"
    steady = view.steady(lane)
    at = view.crossover(lane)
    if not steady:
        words = "no verdict: the machine's speed moved at every level run"
    elif view.mixed(lane):
        words = f"mixed: {_sides(steady)}"
    elif at is None:
        last = steady[-1][0]
        words = f"pays at every level run: {ratio_words(view, lane, last, f' at {requests(last)}')}"
    else:
        words = f"below plain from {requests(at)}: {ratio_words(view, lane, at, ' there')}"
    if any(f.predicted is not None for f in figures.values()):
        theory = view.steady(lane, theory=True)
        words += (
            f"; theory: {f'mixed: {_sides(theory)}' if view.mixed(lane, True) else _stops(view.crossover(lane, True))}"
        )
    moved = [level for level, f in figures.items() if f.moved]
    if moved:
        words += f"; left out: {_levels(moved)} ({figures[moved[0]].moved})"
    both = [level for level, f in figures.items() if f.spread and f.spread[0] < 1 <= f.spread[1]]
    if both:
        words += f"; not settled at {_levels(both)}: its rounds fall on both sides of 1×"
    return words


def ratio_words(view: ConcurrencyView, lane: str, level: int, where: str = "") -> str:
    """The lane's speedup at `level` (`where`, said after it) and its spread: "1.15× (0.93–1.20 over 3 rounds)", or
    "1.15× (one round)"."""
    f = view.figures(lane, level)
    if f is None or f.speedup is None:
        return "–"
    if f.rounds < 2 or f.spread is None:
        return f"{f.speedup:.2f}×{where} (one round)"
    return f"{f.speedup:.2f}×{where} ({f.spread[0]:.2f}–{f.spread[1]:.2f} over {f.rounds} rounds)"


def rounds_words(view: ConcurrencyView, how: str = "") -> str:
    """A concurrency sweep of fewer than VERDICT_ROUNDS rounds says so, and why it matters ("" once it has them, or
    before any run); `how`: how to ask for more, in the caller's words."""
    n = view.fewest_rounds()
    if not 0 < n < VERDICT_ROUNDS:
        return ""
    ran = "One round: each figure is a single run" if n == 1 else f"{n} rounds: each figure is the median of {n} runs"
    return (
        f"{ran}, and on a shared machine a speedup near 1× can land on either side from one sweep to the next; "
        f"a verdict needs at least {VERDICT_ROUNDS} rounds{how}."
    )


def _levels(levels: list[int]) -> str:
    return requests(levels[0]) if len(levels) == 1 else f"{', '.join(map(str, levels))} requests"


def _sides(steady: list[tuple[int, float]]) -> str:
    """Where a mixed lane is below plain and where above: "below plain at 1 request, above at 2 requests"."""
    below = [level for level, value in steady if value < 1]
    above = [level for level, value in steady if value >= 1]
    return f"below plain at {_levels(below)}, above at {_levels(above)}"


def _stops(level: int | None) -> str:
    return "pays at every level run" if level is None else f"below plain from {requests(level)}"


def crossover_line(view: ConcurrencyView, lane: str) -> str:
    return f"{lane}: {crossover_words(view, lane)}"


def verdicts(view: ConcurrencyView) -> str:
    """Each lane's verdict in one sentence, and a concurrency sweep of too few rounds saying so."""
    drafted = [lane for lane in view.lanes if lane != PLAIN and lane not in view.notes]
    crossings = "".join(f"<li>{escape(crossover_line(view, lane))}</li>" for lane in drafted)
    few = rounds_words(view, f" (set rounds to {VERDICT_ROUNDS})")
    note = f'<p class="sv-rounds">{escape(few)}</p>' if few else ""
    return f'<div class="sv-verdict"><ul class="sv-crossover">{crossings}</ul>{note}</div>'


def _speedup_head(view: ConcurrencyView) -> str:
    counts = {len(runs) for (lane, _), runs in view.runs.items() if lane != PLAIN}
    if not counts or counts == {1}:
        return "speedup (1 round)" if counts else "speedup"
    return f"speedup (range, {counts.pop()} rounds)" if len(counts) == 1 else "speedup (range over its rounds)"


def _speedup_cell(f) -> str:
    if f.speedup is None or f.spread is None or f.rounds < 2:
        shown = _x(f.speedup)
    else:
        shown = f"{f.speedup:.2f}× ({f.spread[0]:.2f}–{f.spread[1]:.2f})"
    return f"{shown} {MOVED_MARK}" if f.moved and f.speedup is not None else shown


def concurrency_table(view: ConcurrencyView) -> str:
    speedup = _speedup_head(view)
    head = ("lane", "requests", "total tok/s", "per request", "τ", speedup, "theory", "γ drafted", "identical")
    body = []
    for lane in view.lanes:
        if lane in view.notes:
            note = f"cannot decode concurrent requests: {view.notes[lane]}"
            body.append(f'<tr><td>{escape(lane)}</td><td colspan="{len(head) - 1}">{escape(note)}</td></tr>')
            continue
        for level in view.levels:
            f = view.figures(lane, level)
            if f is None:
                continue
            same = view.identical.get((lane, level))
            parted = f"{len(same) - sum(same)} of {len(same)} parted" if same else ""
            identical = "–" if same is None else "yes" if all(same) else parted
            cells = (
                lane,
                str(level),
                f"{f.throughput:.1f}",
                f"{f.latency:.1f}",
                f"{f.tau:.2f}",
                _speedup_cell(f),
                _x(f.predicted) + (" ⚠" if f.moved and f.predicted is not None else ""),
                _x(f.gamma, "{:.1f}"),
                identical,
            )
            kind = "sv-moved" if f.moved else "sv-loses" if f.speedup is not None and f.speedup < 1 else ""
            body.append(html_table.row(cells, kind, f.moved or ""))
    return verdicts(view) + html_table.table("sv-concurrency", head, body) + concurrency_badge(view)


def concurrency_badge(view: ConcurrencyView) -> str:
    """Whether every greedy row wrote what its prompt writes decoded alone, and what that rests on."""
    if not view.greedy:
        words = "sampled: each row follows the target's law; no row is compared"
        return f'<div class="sv-badge sv-badge-info">{escape(words)}</div>'
    rows = [same for same in view.identical.values()]
    if not rows:
        return ""
    parted = sum(len(same) - sum(same) for same in rows)
    total = sum(len(same) for same in rows)
    if parted == 0:
        grounds = (
            identity_grounds(view.exact)
            if view.exact == EXACT_ON
            else "no near tie fell the other way (exact mode was off, so one could have)"
        )
        words = f"every row ({total}) wrote exactly what its prompt writes decoded alone: {grounds}"
        return f'<div class="sv-badge sv-badge-ok">{escape(words)}</div>'
    why = (
        "a batch's forward rounds otherwise than one row's in bfloat16, so a near tie can fall the other way"
        if view.exact != EXACT_ON
        else "exact mode was on: this is a defect"
    )
    words = f"{parted} of {total} rows parted from their prompt decoded alone: {why}"
    return f'<div class="sv-badge sv-badge-diff">{escape(words)}</div>'


def vllm_block(advice, rounds: int = 0) -> str:
    """Each drafter's measured best draft length per concurrency range, as vLLM's --speculative-config (the
    serving package's VllmAdvice, written where the concurrency sweep ran); from fewer than VERDICT_ROUNDS `rounds`,
    saying so."""
    if not advice:
        return ""
    few = (
        f'<p class="sv-rounds">from {"one round" if rounds == 1 else f"{rounds} rounds"}: these lengths may change '
        f"with the {VERDICT_ROUNDS} rounds a verdict needs</p>"
        if 0 < rounds < VERDICT_ROUNDS
        else ""
    )
    items = "".join(
        f"<li><b>{escape(a.drafter)}</b>: <code>{escape(a.flag)}</code><br><small>{escape(a.note)}</small></li>"
        if a.config
        else f"<li><b>{escape(a.drafter)}</b>: no vLLM equivalent ({escape(a.note)})</li>"
        for a in advice
    )
    return f'<div class="sv-vllm"><p>Into production, for vLLM:</p><ul>{items}</ul>{few}</div>'


def svg_concurrency_chart(view: ConcurrencyView, what: str = "throughput", width: int = 720, height: int = 300) -> str:
    """concurrency_charts.concurrency_chart as static SVG: a line per lane against concurrency (log-2 axis), theory
    dashed."""
    label = "total tokens/s against concurrency" if what == "throughput" else "each request's tokens/s"
    lines = []
    for lane in view.lanes:
        if lane in view.notes:
            continue
        lines.append((lane, series(view, lane, what), lane_colour(view, lane), ""))
        theory = series(view, lane, "theory") if what == "throughput" and lane != PLAIN else ((), ())
        if theory[0]:  # adaptive lanes have no theory: no legend names a line that is not drawn
            lines.append((f"{lane}: theory", theory, lane_colour(view, lane), "6 3"))
    top_value = max([y for _, (_, ys), _, _ in lines for y in ys] + [1e-9])
    ticks = nice_ticks(top_value * 1.05)
    crossings = crossovers(view) if what == "throughput" else []
    left, right, top, bottom = 60, 170, 14, height - 40
    plot_top = top + 2 * LABEL_ROW * len(crossings)  # a band above the data for the crossovers' words
    levels = list(view.levels)
    box = (left, right, top, bottom)
    at, parts = spaced_axes(levels, ticks, width, box, plot_top, str, "requests decoded at once")
    for n, (name, (xs, ys), colour, dash) in enumerate(lines):
        points = " ".join(f"{px:.1f},{py:.1f}" for px, py in (at(x, y) for x, y in zip(xs, ys)))
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        if len(xs) > 1:
            parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2.5"{dashed}/>')
        parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{colour}"/>' for px, py in map(at, xs, ys)]
        parts.append(_text(width - right + 12, top + 14 + 18 * n, name, extra=f' fill="{colour}"', tip=name))
    parts.append(f'<line x1="{left}" y1="{bottom}" x2="{width - right}" y2="{bottom}" stroke="{INK}"/>')
    parts += _svg_crossovers(view, crossings, at, levels, top, plot_top, bottom)
    return _svg(width, height, label, "".join(parts), f"sv-concurrency-{what}")


def _svg_crossovers(view: ConcurrencyView, crossings, at, levels: list[int], top, plot_top, bottom) -> list[str]:
    """Each lane's crossover as a dotted line from the data's top (`plot_top`) down, labelled in the band above it
    with what it is on two lines starting (or, in the right half, ending) at the line, the n-th two rows lower."""
    parts = []
    for n, (lane, level) in enumerate(crossings):
        x = at(level, 0)[0]
        colour = lane_colour(view, lane)
        dots = f'stroke="{colour}" stroke-width="2" stroke-dasharray="2 3"'
        parts.append(f'<line x1="{x:.1f}" y1="{plot_top}" x2="{x:.1f}" y2="{bottom}" {dots}/>')
        right = levels.index(level) < len(levels) / 2
        label = crossover_label(lane, level)
        side = (x, "start") if right else (x, "end")
        for row, words in enumerate(label.split(" stops", 1)):  # two short lines above the line
            words = words if row == 0 else f"stops{words}"
            parts.append(
                _text(side[0], top + 12 + LABEL_ROW * (2 * n + row), words, side[1], f' fill="{colour}"', label)
            )
    return parts


def concurrency_snapshot_html(record) -> str:
    """A recorded concurrency sweep (a ConcurrencyRecord) as one self-contained page: no script, nothing fetched."""
    view = record.final_view()
    body = (
        f"<h2>Total tokens/s</h2>{svg_concurrency_chart(view, 'throughput')}"
        f"<h2>Each request's own tokens/s</h2>{svg_concurrency_chart(view, 'latency')}"
        f"<h2>Every lane and level</h2>{concurrency_table(view)}{vllm_block(record.vllm, view.fewest_rounds())}"
    )
    levels = f"levels {', '.join(map(str, record.levels))}"
    return record_page(record, "concurrent requests", "concurrent requests", levels, body,
                       "The prompts (row r decodes prompt r, again from the first)")  # fmt: skip
