"""The benchmark's report: a markdown summary with its targets, every cell, and a plotly HTML page.
Pure Python over BenchRows."""

from html import escape

from ..analysis.physics import MOVED_MARK, speedup_forbidden
from ..events import PLAIN
from .nearest import nearest_table
from .rows import BenchMeta
from .scoreboard import scoreboard_table
from .tally import ASSISTED, best_cell, drafters, figure, groups, markdown_table, mean, spread
from .targets import TARGETS, targets

NEAREST_TITLE = (
    "### Taking it to production: what the nearest setting gives up\n\n"
    "Each drafter as specviz ran it (adaptive γ) against what each engine runs in its place: vLLM and SGLang as "
    "the specviz drafter nearest to their method at its best fixed γ here (a tree stays a tree), transformers as its "
    "own method at its default schedule; speedups over plain decoding, geometric means over kinds and temperatures, "
    "the ratio to specviz's in brackets.\n\n"
)

SCOREBOARD_TITLE = (
    "### The scoreboard: each library's plain decoding and its fastest method, per kind\n\n"
    "Whole-call tokens/s (prefill included), means over a kind's prompts of the median runs; transformers' best is "
    "the fastest of its plain decoding, assisted generation and prompt lookup as they ran here.\n\n"
)


def cell_table(rows) -> str:
    titles = ["kind", "T", "method", "γ", "α", "τ", "tok/s (slowest–fastest)", "speedup", "speedup ÷ τ", "predicted",
              "efficiency", "i.i.d. theory", "vs transformers", "same as plain"]  # fmt: skip
    lines = []
    for (kind, t, method, gamma), rs in groups(rows, "kind", "temperature", "name", "gamma").items():
        same = [r.same_as_plain for r in rs if r.same_as_plain is not None]
        low, high = spread(rs)
        speedup = mean(r.speedup for r in rs)
        tau = mean(r.tau for r in rs)
        moved = f" {MOVED_MARK}" if speedup_forbidden(speedup, tau) else ""  # a figure to rerun, not to report
        lines.append([
            kind, f"{t:g}", method, "" if gamma is None else gamma, figure(mean(r.alpha for r in rs)),
            figure(tau), f"{figure(mean(r.tps for r in rs))} ({low:.2f}–{high:.2f})", figure(speedup, "x") + moved,
            figure(mean(r.per_tau for r in rs)), figure(mean(r.predicted for r in rs), "x"),
            figure(mean(r.efficiency for r in rs)), figure(mean(r.iid for r in rs), "x"),
            figure(mean(r.vs_transformers for r in rs)), f"{sum(same)}/{len(same)}" if same else "",
        ])  # fmt: skip
    return markdown_table(titles, lines)


def summary_table(rows) -> str:
    """Per kind, temperature and drafter: the best fixed γ, adaptive, and transformers' counterpart."""
    titles = ["kind", "T", "drafter", "best fixed γ", "its speedup", "adaptive: speedup (mean γ)",
              "transformers: best γ / its default", "efficiency (range)"]  # fmt: skip
    lines = []
    ours = [r for r in rows if r.library == "specviz" and r.method != PLAIN]
    counterparts = drafters().counterparts
    for (kind, t, method), rs in groups(ours, "kind", "temperature", "name").items():
        by_gamma = {g: mean(r.speedup for r in grs) for (g,), grs in groups(rs, "gamma").items()}
        fixed = {g: s for g, s in by_gamma.items() if g != "adaptive"}
        best = max(fixed, key=fixed.get) if fixed else None
        adaptive = [r for r in rs if r.gamma == "adaptive"]
        theirs = [
            r
            for r in rows
            if r.library == "transformers"
            and r.kind == kind
            and r.temperature == t
            and r.gamma is not None
            and r.method == counterparts.get(rs[0].method)
            and r.draft_dtype == rs[0].draft_dtype
            and r.draft_name == rs[0].draft_name
        ]
        their = {g: mean(r.speedup for r in grs) for (g,), grs in groups(theirs, "gamma").items()}
        their_fixed = {g: s for g, s in their.items() if g != "adaptive"}
        their_text = (
            ""
            if not their
            else (f"{max(their_fixed.values()):.2f}x" if their_fixed else "–")
            + (f" / {their['adaptive']:.2f}x" if "adaptive" in their else "")
        )
        eff = [r.efficiency for r in rs if r.efficiency is not None]
        adaptive_text = f"{figure(by_gamma.get('adaptive'), 'x')} ({figure(mean(r.mean_gamma for r in adaptive))})"
        eff_range = f"{min(eff):.2f}–{max(eff):.2f}" if eff else ""
        best_text = "" if best is None else best
        best_speedup = figure(fixed.get(best), "x")
        lines.append([kind, f"{t:g}", method, best_text, best_speedup, adaptive_text, their_text, eff_range])
    return markdown_table(titles, lines)


def engine_table(rows) -> str:
    """The engine against the engine: per kind, temperature and draft, specviz's draft model and hybrid (best γ, fixed
    or adaptive) against transformers' assisted generation with the same draft, at a constant length and at its own
    defaults; with the hybrid's share of copied steps and the draft tokens each step verified (a tree's size)."""
    titles = ["kind", "T", "draft (precision)", "draft model: tok/s (γ)", "hybrid: tok/s (γ), copied, nodes",
              "transformers assisted: constant (γ) / defaults", "draft model ÷ theirs", "hybrid ÷ theirs"]  # fmt: skip
    lines = []
    d = drafters()
    cells = [r for r in rows if r.draft_dtype and (r.method in d.model or r.method == ASSISTED)]
    for (kind, t, name, dtype), rs in groups(cells, "kind", "temperature", "draft_name", "draft_dtype").items():
        best = {m: best_cell([r for r in rs if r.method == m]) for m in (*d.model, ASSISTED)}
        theirs = [r for r in rs if r.method == ASSISTED]
        constant = best_cell([r for r in theirs if r.gamma != "adaptive"])
        defaults = best_cell([r for r in theirs if r.gamma == "adaptive"])
        top = best[ASSISTED]
        mine = best.get(d.draft_model)
        hybrid = best.get(d.hybrid)
        hybrid_rows = [r for r in rs if r.method == d.hybrid and hybrid and r.gamma == hybrid[0]]
        copied = mean(r.copied for r in hybrid_rows)
        hybrid_text = f"{_cell(hybrid)}, {copied:.0%}, {figure(mean(r.nodes for r in hybrid_rows))}" if hybrid else ""
        theirs_text = f"{_cell(constant)} / {figure(defaults[1]) if defaults else '–'}"
        lines.append([kind, f"{t:g}", f"{name} {dtype}", _cell(mine), hybrid_text, theirs_text, _ratio(mine, top),
                      _ratio(hybrid, top)])  # fmt: skip
    return markdown_table(titles, lines)


def _ratio(mine, theirs) -> str:
    """Tokens/s of one best cell over another's, where both ran."""
    return figure(mine[1] / theirs[1]) if mine and theirs else ""


def _cell(cell) -> str:
    return "" if cell is None else f"{cell[1]:.2f} ({cell[0]})"


def alpha_c_table(rows) -> str:
    """Per kind, temperature, drafter and draft precision, at its best fixed γ: α, c (drafting per token ÷ one target
    forward), the speedup the paper's formula predicts from them (with the verify cost V(γ+1)/V(1) measured), and the
    speedup measured."""
    titles = ["kind", "T", "drafter", "best fixed γ", "α", "c", "predicted from α and c", "measured"]
    lines = []
    ours = [r for r in rows if r.library == "specviz" and r.method != PLAIN and r.gamma not in (None, "adaptive")]
    for (kind, t, name), rs in groups(ours, "kind", "temperature", "name").items():
        by_gamma = groups(rs, "gamma")
        (gamma,), best = max(by_gamma.items(), key=lambda kv: mean(r.speedup for r in kv[1]))
        alpha, c, iid, speedup = (mean(getattr(r, key) for r in best) for key in ("alpha", "c", "iid", "speedup"))
        lines.append([kind, f"{t:g}", name, gamma, figure(alpha), figure(c), figure(iid, "x"), figure(speedup, "x")])
    return markdown_table(titles, lines)


def position_table(rows) -> str:
    """Per kind, temperature and drafter, at its largest fixed γ: α_k by draft position (means over prompts), beside
    the pooled α that the i.i.d. theory assumes at every position."""
    ours = [r for r in rows if r.library == "specviz" and r.by_depth and r.gamma not in (None, "adaptive")]
    if not ours:
        return ""
    depth = max(len(r.by_depth) for r in ours)
    titles = ["kind", "T", "drafter", "γ", "pooled α", *(f"α_{k}" for k in range(1, depth + 1))]
    lines = []
    for (kind, t, name), rs in groups(ours, "kind", "temperature", "name").items():
        gamma = max(r.gamma for r in rs)
        at = [r for r in rs if r.gamma == gamma]
        by_k = [mean(r.by_depth[k] for r in at if k < len(r.by_depth)) if k < gamma else None for k in range(depth)]
        lines.append([kind, f"{t:g}", name, gamma, figure(mean(r.alpha for r in at)), *(figure(a) for a in by_k)])
    return markdown_table(titles, lines)


def runs_in_order_table(rows) -> str:
    """Kinds whose prompts are one task asked again with small changes, run in order: per run, each lookup drafter's
    τ and speedup at its best γ (fixed or adaptive), so drafting from earlier runs shows as the runs go on."""
    lookups = drafters().lookups
    ours = [r for r in rows if r.library == "specviz" and r.method in lookups and r.kind.startswith("repeat")]
    if not ours:
        return ""
    present = [m for m in lookups if any(r.method == m for r in ours)]
    titles = ["kind", "T", "run", *(f"{m}: τ, speedup (γ)" for m in present)]
    lines = []
    for (kind, t, run), rs in groups(ours, "kind", "temperature", "run_index").items():
        cells = []
        for m in present:
            mine = [r for r in rs if r.method == m]
            best = max(mine, key=lambda r: r.speedup) if mine else None
            cells.append(f"{best.tau:.2f}, {best.speedup:.2f}x ({best.gamma})" if best else "")
        lines.append([kind, f"{t:g}", run + 1, *cells])
    return markdown_table(titles, lines)


def markdown_report(rows, meta: BenchMeta) -> str:
    in_order = runs_in_order_table(rows)
    positions = position_table(rows)
    nearest = nearest_table(rows)
    scoreboard = scoreboard_table(rows)
    title = (
        f"specviz bench: {meta.target}"
        + (f" ← {meta.draft}" if meta.draft else "")
        + f", {meta.dtype}, {meta.device}, {meta.max_new_tokens} new tokens, median of {meta.repeats}, "
        f"{meta.prompts} prompts, {meta.minutes} min, {meta.when}"
    )
    modes = (
        f"specviz's target: {meta.exact} (a row marked [exact off] ran without exact mode; transformers always runs "
        "the model's own attention and kernels)"
    ) + (
        f". Ran on {meta.cluster}; a prompt kind ran whole on one actor, and its rows' speeds are that actor's own "
        "clock, each against its own plain runs"
        if meta.cluster
        else ""
    )
    return "\n\n".join(
        [
            f"## {title}",
            modes,
            *([SCOREBOARD_TITLE + scoreboard] if scoreboard else []),
            "### Targets\n\n" + "\n".join(f"- {line}" for line in targets(rows)),
            "### Summary (means over the prompts of a kind)\n\n" + summary_table(rows),
            "### The engine against the engine: the same draft in specviz and in transformers\n\n" + engine_table(rows),
            "### α and c per drafter and precision, and the speedup they predict\n\n" + alpha_c_table(rows),
            *([NEAREST_TITLE + nearest] if nearest else []),
            *(["### Acceptance by draft position (at each drafter's largest γ)\n\n" + positions] if positions else []),
            *(["### Runs in order: drafting from earlier runs\n\n" + in_order] if in_order else []),
            "### Every cell (means over the prompts of a kind)\n\n" + cell_table(rows),
        ]
    )


def html_report(rows, meta: BenchMeta) -> str:
    """One self-contained page: speedup and efficiency against γ per kind and temperature, then the targets."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    panels = list(groups(rows, "kind", "temperature"))
    fig = make_subplots(
        rows=len(panels),
        cols=2,
        subplot_titles=[
            f"{kind}, T {t:g}: {what}" for kind, t in panels for what in ("speedup over plain", "efficiency")
        ],
    )
    order = [*map(str, meta.gammas), "adaptive"]
    for i, (kind, t) in enumerate(panels, start=1):
        cell = [r for r in rows if r.kind == kind and r.temperature == t and r.gamma is not None]
        for (method, library), rs in groups(cell, "name", "library").items():
            xs = [g for g in order if any(str(r.gamma) == g for r in rs)]
            dash = "dash" if library == "transformers" else "solid"
            # per panel row: speedup on the left (specviz solid, transformers dashed), specviz's efficiency right
            drawn = [("speedup", 1, dict(showlegend=i == 1, line=dict(dash=dash)))]
            if library == "specviz":
                drawn.append(("efficiency", 2, dict(showlegend=False)))
            for key, col, style in drawn:
                ys = [_mean_at(rs, g, key) for g in xs]
                fig.add_trace(go.Scatter(x=xs, y=ys, name=method, legendgroup=method, **style), row=i, col=col)
        fig.add_hline(y=1.0, line=dict(color="grey", dash="dot"), row=i, col=1)
        fig.add_hline(y=0.95, line=dict(color="grey", dash="dot"), row=i, col=2)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=order, title_text="γ")
    fig.update_layout(height=320 * len(panels), template="plotly_white")
    title = escape(f"specviz bench: {meta.target} ({meta.dtype}, {meta.device}, {meta.when})")
    items = "".join(f"<li>{escape(line)}</li>" for line in targets(rows))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
        f"<h1>{title}</h1>"
        + (f"<p>Ran on {escape(meta.cluster)}</p>" if meta.cluster else "")
        + f"<p>Targets: {escape(TARGETS)}</p><ul>{items}</ul>"
        f"{fig.to_html(include_plotlyjs=True, full_html=False)}</body></html>"
    )


def _mean_at(rows, gamma: str, key: str):
    """The mean of a row field over the rows at one γ (as the chart's axis spells it)."""
    return mean(getattr(r, key) for r in rows if str(r.gamma) == gamma)
