"""A workload's results as one HTML file that travels (email, a ticket, a slide): what was run and on what, each
drafter's totals with the best marked, every prompt's speedup per drafter, two static SVG charts and every output
coloured by where its tokens came from, folded per prompt. No script and nothing fetched: it opens offline, and every
piece of model or user text is escaped. Beside it, the per-drafter table as CSV for a spreadsheet."""

import csv
import io
import math
from dataclasses import asdict
from datetime import datetime
from html import escape
from pathlib import Path

from ..analysis.physics import shown_speedup, speedup_forbidden
from ..events import PLAIN, summarize
from ..paths import ASSETS
from ..trace import EXACT_ADVICE, identity_grounds
from ..workload.view import WorkloadRow, WorkloadView, duration
from . import html_table
from .figure1 import ORIGIN_CLASS, origin_text
from .handoff_block import production_block
from .svg_charts import acceptance_lines, speedup_bars

LEGEND = (
    ("accepted", "accepted draft token"),
    ("correction", "target's own token after a rejection"),
    ("bonus", "target's bonus token (every draft accepted)"),
    ("plain", "plain step (nothing drafted)"),
)


def _fmt(value: float | None, pattern: str = "{:.2f}", missing: str = "–") -> str:
    return missing if value is None else pattern.format(value)


def _runs(view: WorkloadView) -> str:
    """How many runs (one prompt on one side) finished with a result, of all, and how many failed."""
    done = sum(c.done and not c.note for c in view.cells.values())
    failed = sum(c.done and bool(c.note) for c in view.cells.values())
    total = len(view.prompts) * len(view.sides)
    return f"{done} of {total} runs finished" + (f", {failed} failed" if failed else "")


def _best(rows: list[WorkloadRow]) -> str | None:
    """The drafter with the highest speedup (None when none beat plain decoding)."""
    scored = [r for r in rows if r.name != PLAIN and r.speedup is not None and r.speedup > 1]
    scored = [r for r in scored if not speedup_forbidden(r.speedup, r.tau)]  # the machine moved: no winner
    return max(scored, key=lambda r: r.speedup).name if scored else None


MODEL_WORDS = {
    "target": "target model",
    "draft": "draft model",
    "pair": "models",
    "precision": "precision",
    "draft_precision": "draft precision",
}


def _facts(view: WorkloadView, created: datetime) -> str:
    models = [(MODEL_WORDS.get(k, k), v) for k, v in asdict(view.models).items() if v and k != "exact"]
    decoding = (
        "greedy (temperature 0): a drafter must write exactly plain decoding's tokens; "
        + identity_grounds(view.models.exact)
        if view.greedy
        else "sampled: each output is a draw, so outputs are not compared token for token"
    )
    facts = [
        ("made", created.strftime("%Y-%m-%d %H:%M %Z").strip()),
        *models,
        ("draft length", view.setting),
        ("new tokens", f"at most {view.max_new_tokens} per prompt"),
        ("decoding", decoding),
        ("prompts", str(len(view.prompts))),
        ("runs", _runs(view)),
        ("wall time", duration(view.wall_s)),
        *_cluster_facts(view),
    ]
    items = "".join(f"<dt>{escape(str(k))}</dt><dd>{escape(str(v))}</dd>" for k, v in facts)
    return f'<dl class="rp-facts">{items}</dl>'


def _cluster_facts(view: WorkloadView) -> list[tuple[str, str]]:
    """Where a cluster's workload ran: each actor's share (its timings are its own node's clock), and what was run
    again after an actor died."""
    shares = view.placements()
    if not shares:
        return []
    total = sum(seconds for _, seconds in shares.values()) or 1.0
    facts = [
        (name, f"{len(prompts)} prompts, {duration(seconds)} decoding ({seconds / total:.0%} of the work)")
        for name, (prompts, seconds) in shares.items()
    ]
    again = view.retried()
    facts.append(("retried", ", ".join(f"prompt {i + 1}" for i in again) if again else "none: no actor died"))
    return facts


def _state(view: WorkloadView) -> str:
    if view.stopped or not view.finished:
        how = "Stopped early" if view.stopped else "Still running when saved"
        return (
            f'<div class="rp-mark rp-stopped">\u26a0 {how}: {_runs(view)}. Each drafter\'s totals '
            "count only the prompts that both it and plain decoding finished.</div>"
        )
    return f'<div class="rp-mark rp-complete">\u2714 Complete: {_runs(view)}.</div>'


def _header(view: WorkloadView, created: datetime) -> str:
    n = len(view.prompts)
    return (
        '<h1>specviz: speculative decoding on your prompts</h1><p class="rp-lead">Every drafter raced against plain '
        f"decoding on each of {n} prompt{'s' * (n != 1)}: how much faster it wrote, how many of its guesses the "
        f"target accepted, and whether it wrote the target's own text.</p>{_state(view)}{_facts(view, created)}"
    )


def _note(view: WorkloadView, r: WorkloadRow) -> str:
    if r.note == "waiting" and view.finished:
        return "not reached before the stop" if view.stopped else "no result"
    failures = sum(1 for (_, side), c in view.cells.items() if side == r.name and c.note)
    return r.note + (f" (on {failures} prompts)" if failures > 1 else "")


def _identical(view: WorkloadView, r: WorkloadRow) -> str:
    if r.name == PLAIN:
        return "(reference)"
    if not view.greedy:
        return "sampled \u2014 n/a"
    return "–" if r.identical is None or not r.prompts else f"{r.identical}/{r.prompts} identical"


TABLE_HEAD = (
    ("drafter", "the drafter, and how it drafted and verified"),
    ("prompts", "prompts counted: finished by both this side and plain decoding"),
    ("tokens", "new tokens written on the prompts counted"),
    ("tokens/s", "new tokens per second of decoding (prefill excluded)"),
    ("speedup", "tokens/s over plain decoding's on the same prompts"),
    ("α", "acceptance rate: accepted / drafted tokens"),
    ("τ", "tokens per target forward"),
    ("identical to plain", "greedy: outputs equal to plain decoding's, token for token"),
    ("note", "why a drafter has no result, or failed on some prompts"),
)


def drafter_table(view: WorkloadView, rows: list[WorkloadRow]) -> str:
    """Plain decoding's totals and each drafter's, the best drafter marked by a tint and a word."""
    best = _best(rows)
    body = []
    for r in rows:
        words = "plain decoding (the reference)" if r.name == PLAIN else r.words
        mark = '<span class="rp-badge">\u2605 best</span>' if r.name == best else ""
        speedup = shown_speedup(r.speedup, r.tau)
        cells = [_fmt(r.tokens_per_s), speedup, _fmt(r.alpha), _fmt(r.tau), _identical(view, r)]
        best_class = ' class="rp-best"' if r.name == best else ""
        body.append(
            f'<tr data-drafter="{escape(r.name)}"{best_class}>'
            f'<td>{escape(r.name)}{mark}<span class="rp-words">{escape(words)}</span></td><td>{r.prompts}</td>'
            f"<td>{r.tokens}</td>"
            + "".join(f"<td>{escape(c)}</td>" for c in cells)
            + f'<td class="rp-note">{escape(_note(view, r))}</td></tr>'
        )
    return (
        f'<div class="rp-scroll">{html_table.table("rp-table", dict(TABLE_HEAD), body, dict(TABLE_HEAD))}</div>'
        "<p class=\"rp-explain\">speedup: a drafter's tokens per second of decoding over plain decoding's, both "
        "counted over the same prompts (prefill excluded). α: the share of drafted tokens the target accepted. τ: "
        "tokens written per target forward (plain decoding: 1).</p>" + _parting_note(view, rows)
    )


def _parting_note(view: WorkloadView, rows: list[WorkloadRow]) -> str:
    """Why greedy outputs can part from plain decoding's, where some did: a near tie tipped by rounding."""
    if not view.greedy or all(r.identical in (None, r.prompts) for r in rows if r.name != PLAIN):
        return ""
    grounds = identity_grounds(view.models.exact)
    return (
        '<p class="rp-explain">Where a greedy output parts from plain decoding\'s, its card below says at which '
        f"token and how close the target's top two were there: {escape(grounds)}. {escape(EXACT_ADVICE)}</p>"
    )


def _tint(speedup: float) -> str:
    """A cell's background: green for a gain, orange for a loss, deeper the further from 1×."""
    strength = min(0.45, 0.08 + 0.3 * abs(math.log2(max(speedup, 1e-3))))
    colour = "0, 158, 115" if speedup >= 1 else "213, 94, 0"
    return f' style="background: rgba({colour}, {strength:.2f})"'


def _excerpt(text: str, most: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= most else flat[: most - 1] + "\u2026"


def _matrix_cell(view: WorkloadView, i: int, side: str, top: float | None) -> str:
    value = view.speedup(i, side)
    if value is not None:
        css, star = (' class="rp-top"', " \u2605") if value == top else ("", "")
        return f"<td{css}{_tint(value)}>{value:.2f}×{star}</td>"
    found = view.cells.get((i, side))
    if found is not None and found.note:
        return f'<td title="{escape(found.note)}">failed</td>'
    return "<td>–</td>"


def speedup_matrix(view: WorkloadView, rows: list[WorkloadRow]) -> str:
    """Prompts down, drafters across: each prompt's speedup per drafter, the best on each prompt starred, and the
    drafters' totals in the last row."""
    drafters = view.sides[1:]
    if not drafters:
        return '<p class="rp-explain">No drafter could run, so there is no speedup to show.</p>'
    head = "".join(f'<th title="{escape(d)}">{escape(_excerpt(d, 16))}</th>' for d in drafters)
    body = []
    for i, prompt in enumerate(view.prompts):
        values = [v for v in (view.speedup(i, d) for d in drafters) if v is not None]
        top = max(values) if len(values) > 1 and max(values) > 1 else None  # a star only for a real win
        cells = "".join(_matrix_cell(view, i, d, top) for d in drafters)
        body.append(
            f'<tr><td class="rp-prompt-cell" title="{escape(prompt)}">{i + 1}. {escape(_excerpt(prompt, 32))}</td>'
            f"{cells}</tr>"
        )
    totals = {r.name: r.speedup for r in rows}
    body.append(
        '<tr class="rp-all"><td>all prompts counted</td>'
        + "".join(f"<td>{_fmt(totals.get(d), '{:.2f}×')}</td>" for d in drafters)
        + "</tr>"
    )
    return (
        f'<div class="rp-scroll"><table class="sv-metrics rp-matrix"><thead><tr><th>prompt</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _output_card(view: WorkloadView, i: int, side: str) -> str:
    found = view.cells.get((i, side))
    title = "plain decoding" if side == PLAIN else side
    head = f'<section class="rp-output"><h4>{escape(title)}</h4>'
    if found is None or not found.done:
        words = "stopped while it ran (not counted)" if found is not None and found.events else "not run"
        return head + f'<div class="sv-text sv-waiting">{words}</div></section>'
    if found.note:
        return head + f'<div class="rp-meta">{escape(found.note)}</div></section>'
    m = summarize(found.events)
    meta = [f"{m.new_tokens} tokens", f"{m.tokens_per_s:.1f} tok/s"]
    if side != PLAIN:
        meta.append(_fmt(view.speedup(i, side), "{:.2f}×"))
        if view.greedy:
            d = found.divergence
            meta.append("identical to plain" if d is None else _parted(d))
    return (
        f'<section class="rp-output" data-side="{escape(side)}"><h4>{escape(title)}</h4>'
        f'<div class="rp-meta">{escape(" · ".join(meta))}</div>{origin_text(found.events, view.text_of)}</section>'
    )


def _parted(d) -> str:
    """Where an output parted from plain decoding's, and the target's top two there (plain text: escaped later)."""
    top = " vs ".join(f"{text!r} {p:.3f}" for text, p in d.top)
    return f"\u2260 parts from plain at token {d.position + 1} (the target's top two there: {top})"


def outputs(view: WorkloadView) -> str:
    """Each prompt folded: its text, then plain decoding's output and every drafter's side by side."""
    legend = "".join(
        f'<span class="rp-key"><span class="{ORIGIN_CLASS[origin]}">{escape(words)}</span></span>'
        for origin, words in LEGEND
    )
    folds = []
    for i, prompt in enumerate(view.prompts):
        speeds = [(v, d) for d in view.sides[1:] if (v := view.speedup(i, d)) is not None]
        best = f" · fastest: {max(speeds)[1]} {max(speeds)[0]:.2f}×" if speeds else ""
        shown = prompt if len(prompt) <= 4000 else prompt[:4000] + f" … ({len(prompt) - 4000} more characters)"
        cards = "".join(_output_card(view, i, side) for side in view.sides)
        folds.append(
            f'<details class="rp-prompt"><summary><b>Prompt {i + 1}</b>{escape(best)} · '
            f'{escape(_excerpt(prompt, 90))}</summary><div class="sv-echo">{escape(shown)}</div>'
            f'<div class="rp-outputs">{cards}</div></details>'
        )
    return f'<div class="sv-text rp-legend">{legend}</div>{"".join(folds)}'


def report_html(view: WorkloadView, created: datetime | None = None) -> str:
    """The whole report as one self-contained HTML page (`created`: when it was made; now by default)."""
    rows = view.rows()
    created = created or datetime.now().astimezone()
    css = "".join((ASSETS / name).read_text(encoding="utf-8") for name in ("specviz.css", "report.css"))
    charts = (
        f'<div class="rp-charts"><figure><figcaption>Speedup over plain decoding</figcaption>{speedup_bars(rows, 560)}'
        f"</figure><figure><figcaption>Acceptance by draft position (α_k)</figcaption>{acceptance_lines(rows, 560)}"
        "</figure></div>"
    )
    n = len(view.prompts)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>specviz report: {n} prompt{'s' * (n != 1)}</title><style>{css}</style></head><body>"
        f"{_header(view, created)}<h2>Drafters</h2>{drafter_table(view, rows)}<h2>Charts</h2>{charts}"
        f"<h2>Speedup on each prompt</h2>{speedup_matrix(view, rows)}"
        f"<h2>Outputs, coloured by where each token came from</h2>{outputs(view)}"
        f"{production_block(view.production, open_first=False)}</body></html>"
    )


CSV_COLUMNS = (
    "drafter",
    "description",
    "prompts",
    "tokens",
    "tokens_per_s",
    "speedup",
    "alpha",
    "tau",
    "identical",
    "alpha_by_position",
    "note",
    "ran_on",
    "retried",
)


def _safe(text: str) -> str:
    """Text a spreadsheet will not take for a formula (one that starts with = + - @ gets a leading ')."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _number(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _csv_row(view: WorkloadView, r: WorkloadRow) -> dict[str, str]:
    row = {
        "drafter": _safe(r.name),
        "description": _safe("plain decoding (the reference)" if r.name == PLAIN else r.words),
        "prompts": str(r.prompts),
        "tokens": str(r.tokens),
        "tokens_per_s": _number(r.tokens_per_s, 3),
        "speedup": _number(r.speedup, 4),
        "alpha": _number(r.alpha, 4),
        "tau": _number(r.tau, 4),
        "identical": "" if r.identical is None or not view.greedy else str(r.identical),
        "alpha_by_position": " ".join(_number(a, 4) or "-" for a in r.by_position),
        "note": _safe(_note(view, r)),
        "ran_on": _safe(_ran_on(view, r.name)),
        "retried": " ".join(str(i + 1) for i in view.retried() if (i, r.name) in view.cells),
    }
    row.update({f"speedup_prompt_{i + 1}": _number(view.speedup(i, r.name), 4) for i in range(len(view.prompts))})
    return row


def _ran_on(view: WorkloadView, side: str) -> str:
    """On a cluster: which actor ran which of this side's prompts ("actor 1 on host (node …): 1 3; …")."""
    by_node: dict[str, list[int]] = {}
    for (i, s), c in sorted(view.cells.items()):
        if s == side and c.node:
            by_node.setdefault(c.node, []).append(i + 1)
    return "; ".join(f"{node}: {' '.join(map(str, prompts))}" for node, prompts in by_node.items())


def report_csv(view: WorkloadView) -> str:
    """The per-drafter table as CSV: one header row, then plain decoding and each drafter, numbers unformatted
    (empty where there is none; `identical` empty for a sampled run), then one speedup column per prompt."""
    out = io.StringIO()
    columns = [*CSV_COLUMNS, *(f"speedup_prompt_{i + 1}" for i in range(len(view.prompts)))]
    writer = csv.DictWriter(out, columns)
    writer.writeheader()
    writer.writerows(_csv_row(view, r) for r in view.rows())
    return out.getvalue()


def write_report(view: WorkloadView, html_path: str | Path) -> tuple[Path, Path]:
    """The report at `html_path` and its table beside it (same name, .csv; UTF-8 with a byte-order mark so that
    spreadsheets read its γ and α right)."""
    html_path = Path(html_path)
    csv_path = html_path.with_suffix(".csv")
    if csv_path == html_path:
        csv_path = html_path.with_name(html_path.name + ".csv")
    html_path.write_text(report_html(view), encoding="utf-8")
    csv_path.write_text(report_csv(view), encoding="utf-8-sig", newline="")
    return html_path, csv_path
