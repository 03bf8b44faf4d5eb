"""HTML for the Grand Prix: one lane per row, each with its name and how it drafts, a progress bar (tokens written of
the maximum), its live tokens/s, speedup over plain and τ, the tail of its text coloured by origin, and its finishing
place; and the small acceptance-by-position bars of the comparison table. Every piece of model or user text is
escaped."""

from html import escape

from ..analysis.physics import shown_speedup
from ..events import summarize
from ..views.grand_prix import GrandPrixView, RaceLane
from .figure1 import origin_text

TAIL_TOKENS = 48  # a lane shows at most its last this many tokens (its box shows the last two lines of those)


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def pace_line(view: GrandPrixView) -> str:
    """What the picture's pace means, in one line."""
    if view.recorded:
        return "replayed on each lane's own clock: every lane moves as fast as it really ran"
    n = len([lane for lane in view.lanes if lane.runs])
    if view.finished:
        return "finished: each lane's numbers are its own clock's; replay it at real pace from Compare drafters"
    return (
        f"live: {n} lanes take turns on one device, so this moves at about 1/{n} of real time; "
        "each lane's numbers are its own clock's"
    )


def grand_prix_lanes(view: GrandPrixView) -> str:
    """Every lane of the race, plain decoding first."""
    rows = "".join(_lane(view, lane) for lane in view.lanes)
    return (
        f'<div class="sv-gp" data-lanes="{len(view.lanes)}"><div class="sv-gp-pace">{escape(pace_line(view))}</div>'
        f"{rows}</div>"
    )


def _lane(view: GrandPrixView, lane: RaceLane) -> str:
    m = summarize(lane.events)
    place = view.place(lane)
    state = "sv-gp-off" if not lane.runs else "sv-gp-done" if lane.done else "sv-gp-running"
    shown = min(1.0, m.new_tokens / view.max_new_tokens) if view.max_new_tokens else 0.0
    if lane.done and lane.runs:
        shown = 1.0
    head = (
        f'<div class="sv-gp-head"><div class="sv-gp-title"><span class="sv-gp-place">{ordinal(place) if place else ""}'
        f'</span><span class="sv-gp-name">{escape(lane.name)}</span></div>'
        f'<span class="sv-gp-words" title="{escape(lane.words)}">{escape(lane.words)}</span></div>'
    )
    bar = (
        f'<div class="sv-gp-bar" role="progressbar" aria-valuenow="{m.new_tokens}" aria-valuemax="'
        f'{view.max_new_tokens}"><div class="sv-gp-fill" style="width: {100 * shown:.1f}%"></div>'
        f'<span class="sv-gp-count">{m.new_tokens} / {view.max_new_tokens}</span>{_same(view, lane)}</div>'
    )
    return (
        f'<div class="sv-gp-lane {state}" data-lane="{escape(lane.name)}">{head}'
        f'<div class="sv-gp-meter">{bar}<div class="sv-gp-stats">{escape(_stats(view, lane))}</div></div>'
        f'<div class="sv-gp-text">{_text(view, lane)}</div></div>'
    )


def _stats(view: GrandPrixView, lane: RaceLane) -> str:
    if not lane.runs:
        return "does not race"
    if not lane.events:
        return "waiting for its first step"
    m = summarize(lane.events)
    parts = [f"{m.tokens_per_s:.1f} tok/s"]
    if lane is not view.plain:
        speedup = view.speedup(lane)
        parts += [shown_speedup(speedup or None, m.mean_tokens_per_step), f"τ {m.mean_tokens_per_step:.2f}"]
    return " · ".join(parts)


def _same(view: GrandPrixView, lane: RaceLane) -> str:
    """Greedy: the lane's tokens against plain decoding's, on the lane (so far while it runs; the target's verdict
    once the race is over)."""
    same = view.identical(lane) if view.finished else view.agrees_so_far(lane)
    if same is None or lane is view.plain:
        return ""
    if not same:
        return '<span class="sv-gp-same sv-gp-differs" title="its tokens part from plain decoding">≠ plain</span>'
    tip = "the same tokens as plain decoding" + ("" if view.finished else ", so far")
    mark = "✔ = plain" if view.finished else "= plain"
    return f'<span class="sv-gp-same" title="{tip}">{mark}</span>'


def _text(view: GrandPrixView, lane: RaceLane) -> str:
    if not lane.runs:
        return f'<div class="sv-text sv-waiting">{escape(lane.note)}</div>'
    if not lane.events:
        return '<div class="sv-text sv-waiting">on the grid…</div>'
    tail = []
    count = 0
    for event in reversed(lane.events):
        tail.append(event)
        count += len(event.tokens)
        if count >= TAIL_TOKENS:
            break
    return origin_text(reversed(tail), view.text_of)


def position_bars(alphas, width: int = 7, height: int = 18) -> str:
    """α by draft position as small bars on one line (an SVG a few characters wide), with the values in its title."""
    shown = list(alphas)[:12]
    if not shown:
        return "–"
    words = ", ".join("–" if a is None else f"{a:.2f}" for a in shown)
    bars = "".join(
        f'<rect x="{i * (width + 1)}" y="{height - max(1.0, (a or 0) * height):.1f}" width="{width}" '
        f'height="{max(1.0, (a or 0) * height):.1f}" fill="{"#009e73" if a is not None else "#bbb"}"/>'
        for i, a in enumerate(shown)
    )
    return (
        f'<svg class="sv-spark" role="img" width="{len(shown) * (width + 1)}" height="{height}" '
        f'viewBox="0 0 {len(shown) * (width + 1)} {height}"><title>α by position: {escape(words)}</title>{bars}</svg>'
    )
