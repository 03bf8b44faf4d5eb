"""The benchmark's report: a markdown summary with its targets, every cell, and a plotly HTML page.
Pure Python over BenchRows (no torch)."""

import statistics
from html import escape

from .rows import COUNTERPART

TARGETS = (
    "best drafter ≥ 2.0× plain on code and ≥ 1.2× transformers' best on every kind; with the same draft, the "
    "draft model ≥ 1.15× transformers' assisted generation at its better schedule; geometric mean of the best "
    "over transformers' plain ≥ 2.2×; the draft model and the hybrid adaptive never below plain; plain ≥ "
    "transformers' plain at every prompt length; efficiency ≥ 0.95"
)
MODEL_DRAFTERS = ("draft", "hybrid")  # the drafters raced against transformers' assisted generation, same draft


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _f(x, suffix="") -> str:
    return "" if x is None else f"{x:.2f}{suffix}"


def _groups(rows, *keys):
    """Rows grouped by the given keys, in first-seen order."""
    out = {}
    for r in rows:
        out.setdefault(tuple(getattr(r, k) for k in keys), []).append(r)
    return out


def cell_table(rows) -> str:
    head = (
        "| kind | T | method | γ | α | τ | tok/s | speedup | speedup ÷ τ | predicted | efficiency | i.i.d. theory | "
        "vs transformers | same as plain |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (kind, t, method, gamma), rs in _groups(rows, "kind", "temperature", "name", "gamma").items():
        same = [r.same_as_plain for r in rs if r.same_as_plain is not None]
        lines.append(
            f"| {kind} | {t:g} | {method} | {'' if gamma is None else gamma} | {_f(_mean(r.alpha for r in rs))} | "
            f"{_f(_mean(r.tau for r in rs))} | {_f(_mean(r.tps for r in rs))} | "
            f"{_f(_mean(r.speedup for r in rs), 'x')} | {_f(_mean(r.per_tau for r in rs))} | "
            f"{_f(_mean(r.predicted for r in rs), 'x')} | {_f(_mean(r.efficiency for r in rs))} | "
            f"{_f(_mean(r.iid for r in rs), 'x')} | {_f(_mean(r.vs_transformers for r in rs))} | "
            f"{f'{sum(same)}/{len(same)}' if same else ''} |"
        )
    return "\n".join(lines)


def summary_table(rows) -> str:
    """Per kind, temperature and drafter: the best fixed γ, adaptive, and transformers' counterpart."""
    lines = [
        "| kind | T | drafter | best fixed γ | its speedup | adaptive: speedup (mean γ) | transformers: best γ / its default "
        "| efficiency (range) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ours = [r for r in rows if r.library == "specviz" and r.method != "plain"]
    for (kind, t, method), rs in _groups(ours, "kind", "temperature", "name").items():
        by_gamma = {g: _mean(r.speedup for r in grs) for (g,), grs in _groups(rs, "gamma").items()}
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
            and r.method == COUNTERPART.get(rs[0].method)
            and r.draft_dtype == rs[0].draft_dtype
            and r.draft_name == rs[0].draft_name
        ]
        their = {g: _mean(r.speedup for r in grs) for (g,), grs in _groups(theirs, "gamma").items()}
        their_fixed = {g: s for g, s in their.items() if g != "adaptive"}
        their_text = (
            ""
            if not their
            else (f"{max(their_fixed.values()):.2f}x" if their_fixed else "–")
            + (f" / {their['adaptive']:.2f}x" if "adaptive" in their else "")
        )
        eff = [r.efficiency for r in rs if r.efficiency is not None]
        lines.append(
            f"| {kind} | {t:g} | {method} | {'' if best is None else best} | {_f(fixed.get(best), 'x')} | "
            f"{_f(by_gamma.get('adaptive'), 'x')} ({_f(_mean(r.mean_gamma for r in adaptive))}) | "
            f"{their_text} | {f'{min(eff):.2f}–{max(eff):.2f}' if eff else ''} |"
        )
    return "\n".join(lines)


def engine_table(rows) -> str:
    """The engine against the engine: per kind, temperature and draft, specviz's draft model and hybrid (best γ, fixed
    or adaptive) against transformers' assisted generation with the same draft, at a constant length and at its own
    defaults; with the hybrid's share of copied steps and the draft tokens each step verified (a tree's size)."""
    lines = [
        "| kind | T | draft | draft model: tok/s (γ) | hybrid: tok/s (γ), copied, nodes | transformers assisted: "
        "constant (γ) / defaults | draft model ÷ theirs | hybrid ÷ theirs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    cells = [r for r in rows if r.draft_dtype and (r.method in MODEL_DRAFTERS or r.method == "transformers assisted")]
    for (kind, t, name, dtype), rs in _groups(cells, "kind", "temperature", "draft_name", "draft_dtype").items():
        best = {m: _best_cell([r for r in rs if r.method == m]) for m in (*MODEL_DRAFTERS, "transformers assisted")}
        theirs = [r for r in rs if r.method == "transformers assisted"]
        constant = _best_cell([r for r in theirs if r.gamma != "adaptive"])
        defaults = _best_cell([r for r in theirs if r.gamma == "adaptive"])
        top = best["transformers assisted"]
        ratio = lambda mine: _f(mine[1] / top[1]) if mine and top else ""  # noqa: E731
        hybrid = best["hybrid"]
        hybrid_rows = [r for r in rs if r.method == "hybrid" and hybrid and r.gamma == hybrid[0]]
        lines.append(
            f"| {kind} | {t:g} | {name} {dtype} | {_cell(best['draft'])} | "
            + (
                f"{_cell(hybrid)}, {_mean(r.copied for r in hybrid_rows):.0%}, {_f(_mean(r.nodes for r in hybrid_rows))}"
                if hybrid
                else ""
            )
            + f" | {_cell(constant)} / {_f(defaults[1]) if defaults else '–'} | "
            f"{ratio(best['draft'])} | {ratio(hybrid)} |"
        )
    return "\n".join(lines)


def _best_cell(rs):
    """(γ, mean tokens/s over prompts) of the fastest γ among these rows; None if there are none."""
    by_gamma = {g: _mean(r.tps for r in grs) for (g,), grs in _groups(rs, "gamma").items()}
    return max(by_gamma.items(), key=lambda kv: kv[1]) if by_gamma else None


def _cell(cell) -> str:
    return "" if cell is None else f"{cell[1]:.2f} ({cell[0]})"


def alpha_c_table(rows) -> str:
    """Per kind, temperature, drafter and draft precision, at its best fixed γ: α, c (drafting per token ÷ one target
    forward), the speedup the paper's formula predicts from them (with the verify cost V(γ+1)/V(1) measured), and the
    speedup measured."""
    lines = [
        "| kind | T | drafter | best fixed γ | α | c | predicted from α and c | measured |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ours = [r for r in rows if r.library == "specviz" and r.method != "plain" and r.gamma not in (None, "adaptive")]
    for (kind, t, name), rs in _groups(ours, "kind", "temperature", "name").items():
        by_gamma = _groups(rs, "gamma")
        (gamma,), best = max(by_gamma.items(), key=lambda kv: _mean(r.speedup for r in kv[1]))
        lines.append(
            f"| {kind} | {t:g} | {name} | {gamma} | {_f(_mean(r.alpha for r in best))} | "
            f"{_f(_mean(r.c for r in best))} | {_f(_mean(r.iid for r in best), 'x')} | "
            f"{_f(_mean(r.speedup for r in best), 'x')} |"
        )
    return "\n".join(lines)


def position_table(rows) -> str:
    """Per kind, temperature and drafter, at its largest fixed γ: α_k by draft position (means over prompts), beside
    the pooled α that the i.i.d. theory assumes at every position."""
    ours = [r for r in rows if r.library == "specviz" and r.by_depth and r.gamma not in (None, "adaptive")]
    if not ours:
        return ""
    depth = max(len(r.by_depth) for r in ours)
    lines = [
        "| kind | T | drafter | γ | pooled α | " + " | ".join(f"α_{k}" for k in range(1, depth + 1)) + " |",
        "|---|---|---|---|---|" + "---|" * depth,
    ]
    for (kind, t, name), rs in _groups(ours, "kind", "temperature", "name").items():
        gamma = max(r.gamma for r in rs)
        at = [r for r in rs if r.gamma == gamma]
        by_k = [_mean(r.by_depth[k] for r in at if k < len(r.by_depth)) if k < gamma else None for k in range(depth)]
        lines.append(
            f"| {kind} | {t:g} | {name} | {gamma} | {_f(_mean(r.alpha for r in at))} | "
            + " | ".join(_f(a) if a is not None else "" for a in by_k)
            + " |"
        )
    return "\n".join(lines)


def runs_in_order_table(rows) -> str:
    """Kinds whose prompts are one task asked again with small changes, run in order: per run, each lookup drafter's
    τ and speedup at its best γ (fixed or adaptive), so drafting from earlier runs shows as the runs go on."""
    lookups = ("suffix", "history", "ngram")
    ours = [r for r in rows if r.library == "specviz" and r.method in lookups and r.kind.startswith("repeat")]
    if not ours:
        return ""
    present = [m for m in lookups if any(r.method == m for r in ours)]
    lines = [
        "| kind | T | run | " + " | ".join(f"{m}: τ, speedup (γ)" for m in present) + " |",
        "|---|---|---|" + "---|" * len(present),
    ]
    for (kind, t, run), rs in _groups(ours, "kind", "temperature", "run_index").items():
        cells = []
        for m in present:
            mine = [r for r in rs if r.method == m]
            best = max(mine, key=lambda r: r.speedup) if mine else None
            cells.append(f"{best.tau:.2f}, {best.speedup:.2f}x ({best.gamma})" if best else "")
        lines.append(f"| {kind} | {t:g} | {run + 1} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(rows) -> list[str]:
    """The targets the benchmark is held to, each with the figure measured."""
    ours = [r for r in rows if r.library == "specviz" and r.method != "plain" and not r.method.startswith("oracle")]
    lines = []
    code = [r for r in ours if r.kind == "code" and r.temperature == 0]
    if code:
        (name, gamma), best = max(
            _groups(code, "name", "gamma").items(), key=lambda kv: _mean(r.speedup for r in kv[1])
        )
        lines.append(
            f"best speedup on code (greedy, mean over prompts): {_mean(r.speedup for r in best):.2f}x "
            f"({name}, γ {gamma}) (target ≥ 2.00x)"
        )
    theirs = [r for r in rows if r.library == "transformers" and r.method != "transformers plain"]
    for (kind, t), rs in _groups(ours, "kind", "temperature").items():
        other = [r for r in theirs if r.kind == kind and r.temperature == t]
        if not other:
            continue
        (name, gamma), best = max(_groups(rs, "name", "gamma").items(), key=lambda kv: _mean(r.tps for r in kv[1]))
        (o_name, o_gamma), o_best = max(
            _groups(other, "name", "gamma").items(), key=lambda kv: _mean(r.tps for r in kv[1])
        )
        ratio = _mean(r.tps for r in best) / _mean(r.tps for r in o_best)
        lines.append(
            f"{kind}, T {t:g}: specviz's best ({name}, γ {gamma}) over transformers' best ({o_name}, γ "
            f"{o_gamma}), tokens/s: {ratio:.2f} (target ≥ 1.20)"
        )
    lines += _same_draft_lines(rows)
    kinds_best = []
    for (kind, t), rs in _groups(ours, "kind", "temperature").items():
        plain = [r for r in rows if r.method == "transformers plain" and r.kind == kind and r.temperature == t]
        if plain:
            best = max(_groups(rs, "name", "gamma").values(), key=lambda group: _mean(r.tps for r in group))
            kinds_best.append(_mean(r.tps for r in best) / _mean(r.tps for r in plain))
    if kinds_best:
        lines.append(
            f"specviz's best over transformers' plain decoding, geometric mean over {len(kinds_best)} kinds × "
            f"temperatures: {statistics.geometric_mean(kinds_best):.2f}x (range {min(kinds_best):.2f}–"
            f"{max(kinds_best):.2f}; target ≥ 2.20x)"
        )
    diagnosed = [(r.diagnosed / r.decode_speedup, r) for r in ours if r.diagnosed and r.decode_speedup]
    if diagnosed:
        close = sum(abs(ratio - 1) <= 0.15 for ratio, _ in diagnosed)
        ratio, worst = max(diagnosed, key=lambda pair: abs(pair[0] - 1))
        lines.append(
            f"the diagnosis's predicted speedup within 15% of the measured one (decode time): {close} of "
            f"{len(diagnosed)} cells; furthest {ratio:.2f} ({worst.name}, {worst.kind}, γ {worst.gamma}) "
            "(target: every cell)"
        )
    references = [r.same_as_plain for r in rows if r.method == "transformers plain" and r.same_as_plain is not None]
    if references:
        lines.append(
            f"specviz's plain output identical to transformers' greedy generate: {sum(references)} of "
            f"{len(references)} prompts (an independent reference; in bfloat16 a near-tie may round apart)"
        )
    for (kind, t), rs in _groups([r for r in rows if r.method == "transformers plain"], "kind", "temperature").items():
        if kind.startswith("context-"):
            lines.append(
                f"plain decoding at a {rs[0].prompt_tokens}-token prompt, T {t:g}: "
                f"{_mean(r.vs_transformers for r in rs):.2f}x transformers' plain (target ≥ 1.00)"
            )
    suffix = [r for r in ours if r.method == "suffix" and r.kind.startswith("repeat")]
    later = [r for r in suffix if r.run_index >= 2]
    if later:
        best = [max(rs, key=lambda r: r.speedup) for rs in _groups(later, "kind", "temperature", "run_index").values()]
        lines.append(
            f"suffix decoding from the third run on ({len(best)} runs, best γ each): τ min "
            f"{min(r.tau for r in best):.2f}, speedup min {min(r.speedup for r in best):.2f}x (targets τ ≥ 3, "
            f"≥ 2.00x)"
        )
    first = [r for r in suffix if r.run_index == 0 and r.gamma == "adaptive"]
    if first:
        lines.append(
            f"suffix decoding on a first run with nothing cached, adaptive γ: lowest "
            f"{min(r.speedup for r in first):.2f}x over {len(first)} cells (target ≥ 1.00x)"
        )
    protected = [r for r in ours if r.method in MODEL_DRAFTERS and r.gamma == "adaptive"]
    if protected:
        lowest = min(protected, key=lambda r: r.speedup)
        lines.append(
            f"the draft model and the hybrid, adaptive: lowest {lowest.speedup:.2f}x plain ({lowest.name}, "
            f"{lowest.kind}, T {lowest.temperature:g}) over {len(protected)} cells (target ≥ 1.00x)"
        )
    for (name,), rs in _groups([r for r in ours if r.efficiency is not None], "name").items():
        eff = sorted(r.efficiency for r in rs)
        lines.append(
            f"efficiency of {name}: min {eff[0]:.2f}, median {statistics.median(eff):.2f} over {len(eff)} cells "
            f"(target ≥ 0.95)"
        )
    return lines


def _same_draft_lines(rows) -> list[str]:
    """Per draft: the draft model's best over transformers' assisted generation with that draft at its better
    schedule (a constant length or its defaults), kind by kind, and the lowest."""
    lines = []
    cells = [r for r in rows if r.draft_dtype and r.method in ("draft", "transformers assisted")]
    for (name, dtype), rs in _groups(cells, "draft_name", "draft_dtype").items():
        ratios = {}
        for (kind, t), krs in _groups(rs, "kind", "temperature").items():
            mine, theirs = (_best_cell([r for r in krs if r.method == m]) for m in ("draft", "transformers assisted"))
            if mine and theirs:
                ratios[f"{kind} T {t:g}"] = mine[1] / theirs[1]
        if ratios:
            each = ", ".join(f"{k} {v:.2f}" for k, v in ratios.items())
            lines.append(
                f"same draft ({name} {dtype}): specviz's draft model over transformers' assisted generation at "
                f"its better schedule: lowest {min(ratios.values()):.2f} ({each}) (target ≥ 1.15)"
            )
    return lines


def markdown_report(rows, meta) -> str:
    in_order, positions = runs_in_order_table(rows), position_table(rows)
    title = (
        f"specviz bench: {meta['target']}"
        + (f" ← {meta['draft']}" if meta.get("draft") else "")
        + f", {meta['dtype']}, {meta['device']}, {meta['max_new_tokens']} new tokens, best of {meta['repeats']}, "
        f"{meta['prompts']} prompts, {meta['minutes']} min, {meta['when']}"
    )
    return "\n\n".join(
        [
            f"## {title}",
            "### Targets\n\n" + "\n".join(f"- {line}" for line in targets(rows)),
            "### Summary (means over the prompts of a kind)\n\n" + summary_table(rows),
            "### The engine against the engine: the same draft in specviz and in transformers\n\n" + engine_table(rows),
            "### α and c per drafter and precision, and the speedup they predict\n\n" + alpha_c_table(rows),
            *(["### Acceptance by draft position (at each drafter's largest γ)\n\n" + positions] if positions else []),
            *(["### Runs in order: drafting from earlier runs\n\n" + in_order] if in_order else []),
            "### Every cell (means over the prompts of a kind)\n\n" + cell_table(rows),
        ]
    )


def html_report(rows, meta) -> str:
    """One self-contained page: speedup and efficiency against γ per kind and temperature, then the targets."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    panels = list(_groups(rows, "kind", "temperature"))
    fig = make_subplots(
        rows=len(panels),
        cols=2,
        subplot_titles=[
            f"{kind}, T {t:g}: {what}" for kind, t in panels for what in ("speedup over plain", "efficiency")
        ],
    )
    order = [*map(str, meta["gammas"]), "adaptive"]
    for i, (kind, t) in enumerate(panels, start=1):
        cell = [r for r in rows if r.kind == kind and r.temperature == t and r.gamma is not None]
        for (method, library), rs in _groups(cell, "name", "library").items():
            xs = [g for g in order if any(str(r.gamma) == g for r in rs)]
            mean_at = lambda g, key: _mean(getattr(r, key) for r in rs if str(r.gamma) == g)  # noqa: E731
            dash = "dash" if library == "transformers" else "solid"
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[mean_at(g, "speedup") for g in xs],
                    name=method,
                    legendgroup=method,
                    showlegend=i == 1,
                    line=dict(dash=dash),
                ),
                row=i,
                col=1,
            )
            if library == "specviz":
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=[mean_at(g, "efficiency") for g in xs],
                        name=method,
                        legendgroup=method,
                        showlegend=False,
                    ),
                    row=i,
                    col=2,
                )
        fig.add_hline(y=1.0, line=dict(color="grey", dash="dot"), row=i, col=1)
        fig.add_hline(y=0.95, line=dict(color="grey", dash="dot"), row=i, col=2)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=order, title_text="γ")
    fig.update_layout(height=320 * len(panels), template="plotly_white")
    title = escape(f"specviz bench: {meta['target']} ({meta['dtype']}, {meta['device']}, {meta['when']})")
    items = "".join(f"<li>{escape(line)}</li>" for line in targets(rows))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
        f"<h1>{title}</h1><p>Targets: {escape(TARGETS)}</p><ul>{items}</ul>"
        f"{fig.to_html(include_plotlyjs=True, full_html=False)}</body></html>"
    )
