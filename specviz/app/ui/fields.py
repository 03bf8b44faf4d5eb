"""Sliders and number boxes that name themselves in an error. A browser can only send what the control allows, but
the API can send anything: Gradio's own answer to γ = "abc" is a generic error that names no field. These check the
value before Gradio does and say, in one line, which field is wrong and why."""

import math
from html import escape

import gradio as gr


def _checked(component, payload):
    """`payload` as a number within the component's range, or a one-line error naming the field (escaped: Gradio
    shows an error's text as HTML)."""
    name = component.label or "a number field"
    value = payload
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise gr.Error(f"{escape(name)} must be a number, got {escape(repr(payload)[:80])}", print_exception=False)
    if component.minimum is not None and value < component.minimum:
        raise gr.Error(
            f"{escape(name)}: value {value:g} is below the minimum {component.minimum:g}", print_exception=False
        )
    if component.maximum is not None and value > component.maximum:
        raise gr.Error(
            f"{escape(name)}: value {value:g} is above the maximum {component.maximum:g}", print_exception=False
        )
    return value


class Slider(gr.Slider):
    is_template = True  # drawn by Gradio's own slider

    def preprocess(self, payload):
        return super().preprocess(_checked(self, payload))


class Number(gr.Number):
    is_template = True  # drawn by Gradio's own number box

    def preprocess(self, payload):
        return None if payload is None else super().preprocess(_checked(self, payload))
