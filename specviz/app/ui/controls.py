"""The screen's controls for drafter options, made from the drafters' own declarations, and the order in which
the API takes every control. No torch: the kinds arrive as data from app.py."""

import gradio as gr

from . import fields

# The /run and /sweep endpoints take their parameters in this order (callers may pass them by position), so it
# never changes; the drafters' other options follow it in menu order, and then the settings added since (exact).
API_ORDER = (
    "pair",
    "drafter",
    "dtype",
    "prompt",
    "gamma",
    "max_new",
    "temperature",
    "top_k",
    "top_p",
    "seed",
    "ngram_min",
    "candidates",
    "choice",
    "medusa_tree",
    "acceptance",
    "adaptive",
    "draft_dtype",
)


def option_widget(spec, value):
    """A slider for a bounded integer, a radio or a menu for a choice, else a text box."""
    common = dict(
        value=value,
        label=spec.label,
        info=spec.help[:1].upper() + spec.help[1:] + ".",
        elem_id="sv-opt-" + spec.name.replace("_", "-"),
    )
    if spec.integer:
        return fields.Slider(spec.low, spec.high, step=1, **common)
    if spec.choices and spec.strict and len(spec.choices) <= 3:
        return gr.Radio(list(spec.choices), **common)
    if spec.choices:
        return gr.Dropdown(list(spec.choices), **common)
    return gr.Textbox(**common)


def option_panels(kinds, chosen: str) -> tuple[dict, dict]:
    """One folded panel per drafter with options on screen, shown while that drafter is chosen, each option at the
    value the drafter measured best with.
    Returns ({option name: widget}, {drafter name: panel})."""
    widgets = {}
    panels = {}
    for kind in kinds:
        specs = [s for s in kind.options.specs() if s.app]
        if not specs:
            continue
        with gr.Accordion(f"{kind.listing.label}: options", open=False, visible=kind.name == chosen) as panel:
            for spec in specs:
                widgets[spec.name] = option_widget(spec, kind.listing.prefers(spec.name, spec.default))
        panels[kind.name] = panel
    return widgets, panels


def in_api_order(controls: dict) -> dict:
    """The controls as the endpoints take them: the published order first, then the rest as declared."""
    first = [name for name in API_ORDER if name in controls]
    return {name: controls[name] for name in first + [n for n in controls if n not in first]}
