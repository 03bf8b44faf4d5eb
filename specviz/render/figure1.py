"""Figure 1 of Leviathan et al., live: one row per verification step, every token escaped.

Accepted draft tokens are green, rejected ones red and struck through, the target's correction blue,
a bonus token (all drafts accepted) blue with a star. Colour always has a second cue (strike-through,
star, underline) so the figure reads for colour-blind viewers and in print.
"""

from collections.abc import Callable, Iterable
from html import escape

from ..events import StepEvent

TokenText = Callable[[int], str]  # token id -> the text it stands for

WHITESPACE = {" ": "\u00b7", "\n": "\u21b5", "\t": "\u2192", "\r": "\u240d"}
ORIGIN_CLASS = {
    "accepted": "sv-acc",
    "rejected": "sv-rej",
    "correction": "sv-cor",
    "bonus": "sv-bonus",
    "plain": "sv-plain",
    "candidate": "sv-cand",
}
LEGEND_LABELS = {
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "correction": "target's correction",
    "bonus": "bonus token (all accepted)",
    "plain": "plain decoding step",
    "candidate": "losing candidate (tree step)",
}


def visible(text: str, tag: str = "span") -> str:
    """HTML for a token with its whitespace drawn: space ·, newline ↵, tab →; everything escaped. `tag` wraps the
    marks: span in HTML, tspan inside an SVG drawing (where a span would end the drawing)."""
    if text == "":
        return f'<{tag} class="sv-empty">\u2205</{tag}>'
    return "".join(f'<{tag} class="sv-ws">{WHITESPACE[c]}</{tag}>' if c in WHITESPACE else escape(c) for c in text)


def _token(text: str, origin: str, title: str = "", inner: str | None = None) -> str:
    """A token chip; `inner` is ready HTML to show instead of the token's visible text."""
    tag = "del" if origin == "rejected" else "span"
    tip = f' title="{escape(title)}"' if title else ""
    star = '<sup class="sv-star">\u2605</sup>' if origin == "bonus" else ""
    return (
        f'<{tag} class="sv-tok {ORIGIN_CLASS[origin]}"{tip}>{visible(text) if inner is None else inner}{star}</{tag}>'
    )


def _probs(event: StepEvent, i: int) -> str:
    q = "" if event.q is None else f", q={event.q[i]:.2f}"
    return f"p={event.p[i]:.2f}{q}"


def step_row(event: StepEvent, text_of: TokenText) -> str:
    """One step: accepted drafts, then the rejected rest, then the target's own token."""
    cells = [_token(text_of(t), "accepted", _probs(event, i)) for i, t in enumerate(event.proposed[: event.accepted])]
    cells += [
        _token(text_of(t), "rejected", _probs(event, event.accepted + i))
        for i, t in enumerate(event.proposed[event.accepted :])
    ]
    if event.next_token is not None:
        cells.append(_token(text_of(event.next_token), event.next_kind))
    if event.proposed:
        drafted = f"γ {event.gamma} · {event.accepted}/{len(event.proposed)} accepted"
        drafted += f" · from {escape(event.origin)}" if event.origin else ""
        drafted += f" · {event.block} drafted in one pass" if event.block else ""
    else:  # adaptive γ chose a plain step (γ 0), a drafter found nothing to propose, or plain decoding itself
        drafted = "plain step" + (" (γ 0)" if event.gamma == 0 else " (nothing proposed)")
    inside = "".join(cells) + _losers(event, text_of) + _spelled(event)
    return (
        f'<div class="sv-row" data-step="{event.index}"><span class="sv-step">{event.index + 1}</span>'
        f'<span class="sv-cells">{inside}</span><span class="sv-note">{drafted}</span></div>'
    )


def _spelled(event: StepEvent) -> str:
    """A draft with another tokenizer: its guess in its own tokens, beside the target tokens it became."""
    if not event.draft_tokens:
        return ""
    chips = "".join(_token(t, "candidate") for t in event.draft_tokens)
    return f'<span class="sv-spelled"><span class="sv-note">drafted as</span> {chips}</span>'


def _losers(event: StepEvent, text_of: TokenText) -> str:
    """A tree step: the candidates that lost, collapsed beside the winning path."""
    if not event.candidates:
        return ""
    lost = [c for i, c in enumerate(event.candidates) if i != event.winner]
    rows = "".join(
        '<div class="sv-alt-row">' + "".join(_token(text_of(t), "candidate") for t in c) + "</div>" for c in lost
    )
    return (
        f'<details class="sv-alts"><summary>+{len(lost)} other candidate{"s" * (len(lost) != 1)}</summary>'
        f"{rows}</details>"
    )


def step_rows(events: Iterable[StepEvent], text_of: TokenText) -> str:
    return '<div class="sv-fig1">' + "".join(step_row(e, text_of) for e in events) + "</div>"


def origin_text(events: Iterable[StepEvent], text_of: TokenText) -> str:
    """The finished text, each token tinted by where it came from, whitespace kept as it is."""
    parts = []
    for e in events:
        parts += [
            f'<span class="{ORIGIN_CLASS["accepted"]}">{escape(text_of(t))}</span>' for t in e.proposed[: e.accepted]
        ]
        if e.next_token is not None:
            parts.append(f'<span class="{ORIGIN_CLASS[e.next_kind]}">{escape(text_of(e.next_token))}</span>')
    return '<div class="sv-text">' + "".join(parts) + "</div>"


def legend() -> str:
    return (
        '<div class="sv-legend">'
        + "".join(_token("", origin, inner=escape(label)) for origin, label in LEGEND_LABELS.items())
        + "</div>"
    )
