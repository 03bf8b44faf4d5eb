"""One verification step explained, for someone who has not read the paper: at every drafted position the target's p
and the drafter's q as paired bars, the acceptance probability and the draw that decided, and where the target's own
token came from. Built from the step's recorded detail; every token and number is escaped."""

from collections.abc import Callable
from html import escape

from ..events import DRAFTED, Leading, StepEvent, Trial
from .figure1 import visible
from .tree_view import tree_view

TokenText = Callable[[int], str]
SHOWN = 8  # bars per position

RULES = {
    "greedy": "Greedy decoding (temperature 0). A drafted token is kept when it is the target's own first choice there "
    "(its argmax); at the first one that is not, the target's first choice replaces it. The output is "
    "exactly what the target alone would write.",
    "sampled": "Sampling, with a drafter that sampled its tokens from its own distribution q. The target keeps a "
    "drafted token x with probability min(1, p(x)/q(x)): always when it likes x at least as much as the drafter did, "
    "otherwise in proportion. At the first rejection it draws its own token from what p has left over, "
    "norm(max(0, p − q)). Together this makes every token follow the target's own distribution exactly.",
    "point": "Sampling, with a drafter that names tokens without probabilities (a lookup, Medusa's or EAGLE's "
    "heads: q is a point mass, q(x) = 1). The target keeps a candidate x with probability p(x); a rejected x is "
    "removed from p and the next candidate at that position is tried against what is left; when none is left, the "
    "target draws its own token from the remainder. The output follows the target's own distribution exactly.",
    "typical": "Typical acceptance (Medusa's), lossy by design: a drafted token is kept when the target's p(x) clears "
    "min(ε, δ·exp(−H(p))), a bar that rises when the target is confident. Faster, but the output no longer "
    "follows the target's distribution.",
}


def explain_step(event: StepEvent | None, text_of: TokenText, total: int = 0) -> str:
    if event is None:
        return (
            '<div class="sv-explain sv-waiting">Run a race, then pick a step: click a row of Figure 1, or use '
            "the slider or the ← → keys.</div>"
        )
    head = f'<div class="sv-explain-head"><b>Step {event.index + 1}</b>{f" of {total}" if total else ""}: '
    if not event.proposed or event.detail is None:
        return (
            f'<div class="sv-explain">{head}a plain step. Nothing was drafted (γ 0, or the drafter found nothing '
            f"to propose), so the target wrote one token itself: {_chip(text_of, event.next_token)}.</div></div>"
        )
    d = event.detail
    kept = f"{event.accepted} of {len(event.proposed)} drafted token{'s' * (len(event.proposed) != 1)} kept"
    head += f"γ {event.gamma}, {event.forward_tokens} tokens in one target forward; {escape(kept)}.</div>"
    if event.origin in DRAFTED:
        writer = escape(event.origin[:1].upper() + event.origin[1:])
        head += f'<p class="sv-origin">{writer} wrote this draft: no copy promised more this step.</p>'
    elif event.origin:
        head += f'<p class="sv-origin">The draft was copied from {escape(event.origin)}.</p>'
    rule = d.rule if d.rule in ("greedy", "typical") else ("sampled" if event.q is not None else "point")
    parts = [head, f'<p class="sv-rule">{escape(RULES[rule])}</p>', _candidates(event, text_of)]
    for k, lead in enumerate(d.leading):
        trials = [t for t in d.trials if t.depth == k + 1]
        parts.append(_position(k, lead, trials, event, text_of, rule))
    return '<div class="sv-explain">' + "".join(parts) + "</div>"


def _chip(text_of: TokenText, token: int | None, cls: str = "") -> str:
    if token is None:
        return "(none: the run ended)"
    return f'<span class="sv-tok {cls}">{visible(text_of(token))}</span>'


def _candidates(event: StepEvent, text_of: TokenText) -> str:
    """A tree step: the candidates drawn as the tree the target verified, the accepted path in green."""
    if not event.candidates:
        return ""
    drafted = (
        f", drafted in one pass of a block of {event.block} (each column is one position of the block, its best "
        "tokens side by side)"
        if event.block
        else ""
    )
    return (
        f'<div class="sv-tree"><b>{len(event.candidates)} candidates</b>{drafted}, verified together as a token tree '
        "(shared beginnings are one node). Read it left to right, one column per draft position; siblings are "
        "alternatives for the same position, tried top to bottom. Figure 1 shows the candidate that holds the green "
        f"path. Hover a node for its full text.{tree_view(event, text_of)}</div>"
    )


def _decision(t: Trial, text_of: TokenText, rule: str, best: int | None) -> str:
    verdict = "kept" if t.accepted else "rejected"
    tok = _chip(text_of, t.token, "sv-acc" if t.accepted else "sv-rej")
    if rule == "greedy":
        return f"drafted {tok}; the target's first choice here is {_chip(text_of, best)} → <b>{verdict}</b>"
    if rule == "typical":
        side = ">" if t.p > (t.bar or 0) else "≤"
        return f"drafted {tok}: p = {t.p:.3f} {side} bar {t.bar:.3f} → <b>{verdict}</b>"
    if rule == "sampled":
        chance = min(1.0, t.p / t.q) if t.q else 1.0
        return (
            f"drafted {tok} with q = {t.q:.3f}; the target gives it p = {t.p:.3f}, so it is kept with probability "
            f"min(1, p/q) = {chance:.3f}; the draw u = {t.u:.3f} is {'below' if t.accepted else 'not below'} "
            f"that → <b>{verdict}</b>"
        )
    return (
        f"candidate {tok}: the target gives it p = {t.p:.3f} (of what earlier rejections left), so it is kept with "
        f"probability {t.p:.3f}; the draw u = {t.u:.3f} → <b>{verdict}</b>"
    )


def _position(k: int, lead: Leading, trials: list[Trial], event: StepEvent, text_of: TokenText, rule: str) -> str:
    best = max(zip(lead.p, lead.ids))[1]
    lines = [_decision(t, text_of, rule, best) for t in trials]
    last = k == len(event.detail.leading) - 1
    own = event.tokens[k] if k < len(event.tokens) else None
    if last and event.next_token is not None:
        lines.append(_origin(event, lead, text_of, rule))
    drafted = {t.token for t in trials}
    order = sorted(range(len(lead.ids)), key=lambda i: -max(lead.p[i], (lead.q or lead.p)[i], (lead.r or lead.p)[i]))
    keep = [i for i in order if lead.ids[i] in drafted or lead.ids[i] == own]
    shown = keep + [i for i in order if i not in keep][: max(0, SHOWN - len(keep))]
    shown.sort(key=order.index)
    rows = "".join(_bar_row(lead, i, text_of, lead.ids[i] in drafted, lead.ids[i] == own) for i in shown)
    heads = (
        "<th>token</th><th>target p</th>"
        + ("<th>drafter q</th>" if lead.q else "")
        + ("<th>residual</th>" if lead.r else "")
    )
    notes = "".join(f"<li>{line}</li>" for line in lines)
    return (
        f'<div class="sv-position"><div class="sv-pos-title">Position {k + 1}</div><ul>{notes}</ul>'
        f'<table class="sv-bars"><thead><tr>{heads}</tr></thead><tbody>{rows}</tbody></table></div>'
    )


def _origin(event: StepEvent, lead: Leading, text_of: TokenText, rule: str) -> str:
    """Where the target's own token at the last tested position came from."""
    tok = _chip(text_of, event.next_token, "sv-cor" if event.next_kind == "correction" else "sv-bonus")
    if event.next_kind == "bonus":
        how = "its first choice" if rule == "greedy" else "drawn from its p here"
        return f"every draft was kept, so the target adds a bonus token, {how}: {tok}"
    if rule in ("greedy", "typical"):
        return f"the target's own token is its first choice here: {tok}"
    if lead.r is not None and rule == "sampled":
        return f"the target's correction is drawn from the residual norm(max(0, p − q)) (last column): {tok}"
    if lead.r is not None:
        return f"the target's own token is drawn from p with the rejected candidates removed (last column): {tok}"
    return f"the target's own token: {tok}"


def _bar(value: float, cls: str) -> str:
    return (
        f'<td class="sv-bar-cell"><span class="sv-bar {cls}" style="width:{max(0.0, min(1.0, value)) * 10:.2f}rem">'
        f'</span><span class="sv-bar-value">{value:.3f}</span></td>'
    )


def _bar_row(lead: Leading, i: int, text_of: TokenText, drafted: bool, own: bool) -> str:
    marks = ("sv-drafted " if drafted else "") + ("sv-emitted" if own else "")
    tags = ("drafted" if drafted else "") + (" · emitted" if own and drafted else "emitted" if own else "")
    cells = (
        _bar(lead.p[i], "sv-bar-p")
        + (_bar(lead.q[i], "sv-bar-q") if lead.q else "")
        + (_bar(lead.r[i], "sv-bar-r") if lead.r else "")
    )
    label = f'<span class="sv-note">{tags}</span>' if tags else ""
    return f'<tr class="{marks.strip()}"><td>{_chip(text_of, lead.ids[i])} {label}</td>{cells}</tr>'
