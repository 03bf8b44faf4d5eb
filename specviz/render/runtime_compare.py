"""A race that compared runtimes, drawn: for each drafter raced on several, a row per runtime (its plain tokens/s,
the drafter's speedup, α, what a drafted token and a verify of 2, 4, 8 and 16 tokens cost in plain steps) and the
sentence that says why the speedups differ (views/runtimes.py). No torch, no Gradio; every name escaped."""

from html import escape

from ..views.runtimes import at, compared, sentence
from . import html_table

WIDTHS = (2, 4, 8, 16)


def runtime_comparison(view, own: str, curves: dict | None = None) -> str:
    """The comparison under a Grand Prix's table; "" when no drafter raced on two runtimes."""
    found = compared(view, own, curves) if view is not None else {}
    if not found:
        return ""
    fmt = lambda v, p="{:.2f}": "–" if v is None else p.format(v)  # noqa: E731
    head = ["drafter · runtime", "plain tok/s", "speedup", "α", "c (plain steps)"]
    head += [f"V({k})/V(1)" for k in WIDTHS]
    rows = []
    lines = []
    for drafter, sides in found.items():
        for s in sides:
            cells = [f"{drafter} · {s.runtime}", fmt(s.plain_tok_s, "{:.1f}"), fmt(s.speedup, "{:.2f}×")]
            cells += [fmt(s.alpha), fmt(s.c)] + [fmt(at(s.verify, k)) for k in WIDTHS]
            rows.append(html_table.row(cells))
        lines.append(f'<p class="sv-note">{escape(sentence(drafter, sides))}</p>')
    return (
        '<div id="sv-runtimes"><h4>The same drafter on each runtime</h4>'
        f"{html_table.table('sv-runtimes', head, rows)}{''.join(lines)}</div>"
    )
