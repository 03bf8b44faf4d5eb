"""HTML for everything around Figure 1: status line, side texts, metrics strip, the identity badge.
Every piece of model or user text goes through html.escape."""

from html import escape

from ..analysis.diagnosis import diagnose
from ..analysis.physics import shown_speedup
from ..errors import SpecvizError
from ..events import PLAIN, Metrics, summarize
from ..paths import ASSETS
from ..trace import ELSEWHERE_ADVICE, EXACT_ADVICE, EXACT_ON, NO_EXACT_MODE, identity_grounds
from ..views.race import RaceView
from . import html_table
from .figure1 import origin_text, visible
from .grand_prix_lanes import ordinal, position_bars


def status(message: str, kind: str = "info") -> str:
    """kind: info | busy | error | done."""
    return f'<div class="sv-status sv-status-{kind}">{escape(message)}</div>'


def failure(exc: Exception) -> str:
    """An exception as the status line: a SpecvizError's own line, anything else named as internal."""
    if isinstance(exc, SpecvizError):
        return status(f"error: {exc}", "error")
    return status(f"internal error ({type(exc).__name__}): {exc}; the app keeps serving", "error")


def prompt_echo(prompt: str) -> str:
    shown = prompt if len(prompt) <= 400 else prompt[:400] + " …"
    return f'<div class="sv-echo"><b>Prompt</b> {escape(shown)}</div>'


def lane_text(view: RaceView, side: str) -> str:
    lane = view.plain if side == PLAIN else view.spec
    mode = ""
    if side != PLAIN and view.mode:
        mode = f'<div class="sv-mode{" sv-mode-lossy" if view.lossy else ""}">{escape(view.mode)}</div>'
    if not lane.events:
        return mode + '<div class="sv-text sv-waiting">waiting for its first step…</div>'
    return mode + origin_text(lane.events, view.text_of)


def _fmt(value: float | None, pattern: str, missing: str = "–") -> str:
    return missing if value is None else pattern.format(value)


def _row(name: str, m: Metrics, speedup: float | None, clock_s: float) -> str:
    cells = [
        name,
        f"{m.new_tokens}",
        _fmt(m.tokens_per_s if m.new_tokens else None, "{:.2f}"),
        _fmt(speedup, "{:.2f}×"),
        _fmt(m.acceptance_rate, "{:.2f}"),
        f"{m.mean_tokens_per_step:.2f}",
        f"{m.target_forwards}",
        f"{m.draft_s:.2f} / {m.verify_s:.2f}",
        f"{m.prefill_s:.2f}",
        f"{clock_s:.2f}",
    ]
    return html_table.row(cells)


METRIC_HEADERS = (
    "side",
    "tokens",
    "tokens/s",
    "speedup",
    "α",
    "τ",
    "target forwards",
    "draft / verify s",
    "prefill s",
    "own clock s",
)
HEADER_TIPS = {
    "α": "acceptance rate: accepted / drafted tokens",
    "τ": "tokens per target forward (per step)",
    "own clock s": "this side's prefill and steps only: what its tokens/s is measured on",
}


def metrics_strip(view: RaceView) -> str:
    plain, spec = summarize(view.plain.events), summarize(view.spec.events)
    speedup = spec.tokens_per_s / plain.tokens_per_s if plain.tokens_per_s and spec.new_tokens else None
    rows = (
        _row("plain", plain, 1.0 if plain.new_tokens else None, view.plain.clock_s),
        _row("speculative", spec, speedup, view.spec.clock_s),
    )
    return html_table.table("", METRIC_HEADERS, rows, HEADER_TIPS)


def identity_badge(view: RaceView) -> str:
    """Greedy: are the two outputs the same token for token? If not, where they part and why."""
    if not view.finished:
        return '<div class="sv-badge sv-badge-wait">identity check: after the run</div>'
    if not view.greedy and view.lossy:
        return (
            '<div class="sv-badge sv-badge-diff">sampled run with typical acceptance: lossy by design, so the '
            "speculative side is not guaranteed to follow the target's distribution; choose lossless "
            "acceptance for that guarantee</div>"
        )
    if not view.greedy:
        return (
            '<div class="sv-badge sv-badge-info">sampled run: both sides draw from the same distribution '
            "(the acceptance rule guarantees it), so their texts differ like two plain samples would; "
            "set temperature 0 to compare token by token</div>"
        )
    plain, spec = view.plain.tokens, view.spec.tokens
    common = min(len(plain), len(spec))
    d = view.divergence
    if d is None:
        scope = "all" if len(plain) == len(spec) else "the first"
        note = " (the run was stopped; both sides compared as far as both got)" if view.stopped else ""
        grounds = f"; {identity_grounds(view.exact)}" if view.exact == EXACT_ON else ""
        return (
            f'<div class="sv-badge sv-badge-ok">\u2714 identical to plain decoding: {scope} {common} tokens '
            f"match{escape(note)}{escape(grounds)}</div>"
        )
    top = ", ".join(f"{visible(t)} {p:.3f}" for t, p in d.top)
    margin = d.top[0][1] - d.top[1][1] if len(d.top) == 2 else float("nan")
    return (
        f'<div class="sv-badge sv-badge-diff">\u2260 the two outputs part at token {d.position + 1}: plain chose '
        f"{visible(d.plain_token)}, speculative {visible(d.spec_token)}. The target's top two there: {top} "
        f"(margin {margin:.3f}). {escape(_why_parted(view.exact))}</div>"
    )


def _why_parted(exact: str) -> str:
    if exact == EXACT_ON:  # by construction this cannot happen: say so rather than explain it away
        return (
            "In exact mode this should not happen: please report it, with the run's trace (Recorded runs, "
            "Download trace)."
        )
    advice = ELSEWHERE_ADVICE if NO_EXACT_MODE in exact else EXACT_ADVICE
    return f"A near tie like this can flip: {identity_grounds(exact)}. {advice}"


def how_it_runs() -> str:
    return (
        '<div class="sv-how"><b>How the race is run.</b> Both sides share one device, so they take turns: '
        "whichever side is behind on its own clock runs its next step. Each clock counts only that side's "
        "prefill and steps (synchronised on a GPU), so each side's tokens/s is its own and the two never "
        "compute at the same instant. While both run, the screen moves at about half speed with true "
        "proportions; once one side is done, the other finishes alone.</div>"
    )


def waiting_text(note: str) -> str:
    return f'<div class="sv-text sv-waiting">{escape(note)}</div>'


def compare_table(rows) -> str:
    """Every lane of a Grand Prix: its place, speed, acceptance (by position as small bars on one line), steps and
    whether greedy output stayed the target's own."""
    headers = ("place", "lane", "tokens/s", "speedup", "α", "α by position", "τ", "target forwards", "= plain", "")
    body = []
    for r in rows:
        same = "–" if r.identical is None else "\u2714 yes" if r.identical else "\u2260 no"
        cells = [
            escape(ordinal(r.place) if r.place else ""),
            escape(r.name),
            escape(_fmt(r.tokens_per_s, "{:.2f}")),
            escape(shown_speedup(r.speedup, r.tau)),
            escape(_fmt(r.alpha, "{:.2f}")),
            position_bars(r.by_position) if r.by_position else "–",
            escape(_fmt(r.tau, "{:.2f}")),
            escape(_fmt(r.target_forwards, "{}")),
            escape(same),
            escape(r.note),
        ]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if not body:
        body = [
            f'<tr><td colspan="{len(headers)}" class="sv-waiting">press Grand Prix: plain decoding and every drafter '
            "race on this prompt, each at its best settings</td></tr>"
        ]
    return html_table.table("sv-compare", headers, body)


def diagnosis(view) -> str:
    """One line: the speedup measured and predicted, and, when speculation lost, the term that lost it; under it,
    where the precision was chosen by measuring this device, what it measured and why."""
    found = diagnose(view.plain.events, view.spec.events) if view is not None else None
    precision = getattr(view, "precision", "")
    runtime = getattr(view, "runtime", "")
    chosen = f'<div class="sv-note" id="sv-precision">precision: {escape(precision)}</div>' if precision else ""
    if runtime:
        chosen = f'<div class="sv-note" id="sv-runtime-why">runtime: {escape(runtime)}</div>' + chosen
    if found is None:
        return '<div class="sv-note">after a run that drafted: why its speedup came out as it did</div>' + chosen
    kind = "sv-diag-lost" if found.culprit else "sv-diag-paid"
    return f'<div class="sv-diagnosis {kind}">{escape(found.line())}</div>' + chosen


def record_page(record, title: str, heading: str, points: str, body: str, prompts_heading: str) -> str:
    """A recorded run under load as one self-contained page (no script, nothing fetched): its models, date and
    `points` in a line, the `body`, and the prompts it ran."""
    m = record.models
    meta = escape(
        f"{m.pair or m.target} · {m.precision} · {m.device} · recorded {record.created} · "
        f"{record.settings.get('max_new_tokens')} new tokens per request · {points}"
    )
    prompts = "".join(f"<li>{escape(p)}</li>" for p in record.prompts)
    css = (ASSETS / "specviz.css").read_text()
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>specviz: {title}</title>'
        f"<style>{css} body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 1.5rem auto; }}</style>"
        f'</head><body><h1 class="sv-title">specviz: {heading}</h1><p class="sv-meta">{meta}</p>{body}'
        f"<h2>{prompts_heading}</h2><ol>{prompts}</ol></body></html>"
    )
