"""The settings sidebar: the model pair (or any pair a visitor names), the drafter and its options, the precisions,
the decoding controls, the rarely used settings folded, and the example prompts. Each part adds its components to
the screen (a namespace the layout hands round) in the order they appear. No torch here."""

from html import escape

import gradio as gr

from ...settings import ACCEPTANCE_MODES, MAX_GAMMA, MAX_NEW_TOKENS, Settings
from . import fields
from .controls import option_panels
from .examples import EXAMPLE_KINDS, example_rows


def settings_sidebar(
    s,
    pair_labels: list[str],
    kinds,
    dtypes: list[str],
    max_new_default: int,
    draft_default: str,
    prompts: dict,
    runtimes: list[str],
    about_runtimes: str = "",
) -> None:
    """The sidebar, open at first. Sets, besides the controls, `s.drafter_notes` (a line per drafter, shown under
    the menu), `s.options` ({option name: widget}) and `s.option_boxes` ({drafter name: its options' panel})."""
    with gr.Sidebar(label="Settings", open=True, elem_id="sv-sidebar", width=390):  # the pair's name whole
        model_choices(s, pair_labels)
        drafter_choice(s, kinds)
        runtime_choice(s, list(runtimes), about_runtimes)
        precisions(s, dtypes, draft_default)
        decoding_controls(s, kinds[0], max_new_default)
        s.options, s.option_boxes = option_panels(kinds, kinds[0].name)
        more_settings(s)
        example_prompts(s, kinds, prompts)


def model_choices(s, pair_labels: list[str]) -> None:
    """The pair menu, and below it, folded, a pair of any target and any draft."""
    s.pair = gr.Dropdown(
        pair_labels,
        value=pair_labels[0],
        label="Model pair (target ← draft)",
        info="Loaded once and kept; switching loads the new pair.",
        allow_custom_value=True,
        elem_id="sv-pair",
    )
    with gr.Accordion("Any target, any draft", open=False):
        s.any_target = gr.Textbox(
            label="target", placeholder="offline preset, model folder or Hub id", elem_id="sv-any-target"
        )
        s.any_draft = gr.Textbox(
            label="draft (any tokenizer)", placeholder="e.g. smollm2-135m-instruct", elem_id="sv-any-draft"
        )
        s.add_pair = gr.Button("Use this pair", size="sm", elem_id="sv-add-pair")


def drafter_choice(s, kinds) -> None:
    """The drafter menu and the line under it that says how the chosen drafter drafts."""
    s.drafter = gr.Dropdown(
        [(k.listing.label, k.name) for k in kinds],
        value=kinds[0].name,
        label="Drafter",
        info="Who proposes tokens for the target to verify.",
        elem_id="sv-drafter",
    )
    s.drafter_notes = {
        k.name: f'<span class="sv-note">{escape(k.listing.summary[:1].upper() + k.listing.summary[1:])}.</span>'
        for k in kinds
    }
    s.drafter_note = gr.HTML(s.drafter_notes[kinds[0].name], elem_id="sv-drafter-note")


def runtime_choice(s, runtimes: list[str], about: str) -> None:
    """What computes the models: each runtime this device runs (`about`: a line on each), or auto (measured here)."""
    s.runtime = gr.Radio(
        runtimes,
        value=runtimes[0],
        label="Runtime",
        info=f"{about}{'; ' * bool(about)}auto: whichever is faster here, measured (why: the Why this speedup tab).",
        elem_id="sv-runtime",
        visible=len(runtimes) > 1,
    )


def precisions(s, dtypes: list[str], draft_default: str) -> None:
    """The target's precision and the draft's (the target's own unless chosen), and exact mode."""
    s.dtype = gr.Radio(
        dtypes,
        value=dtypes[0],
        label="Precision",
        info="auto: the precision whose verify is cheapest on this device, measured once (why: the Why this speedup "
        "tab). int8 (CPU) is an int8 model on both sides, token-exact in exact mode; bfloat16 is fast with AMX.",
    )
    s.draft_dtype = gr.Dropdown(
        ["same", *(d for d in dtypes if d != "auto")],
        value=draft_default,
        label="Draft precision",
        info="An int8 draft costs less per guess; the target alone decides the output.",
        elem_id="sv-draft-dtype",
    )
    s.exact = gr.Checkbox(
        True,
        label="exact mode",
        elem_id="sv-exact",
        info="For a bfloat16 or int8 target on a CPU: every token computed as one-token decoding computes it, so "
        "greedy outputs are plain decoding's bit for bit. Off (or elsewhere), a near tie can round apart.",
    )


def decoding_controls(s, first, max_new_default: int) -> None:
    """γ, adaptive γ, the token budget and the temperature. The race a visitor starts with runs the first drafter's
    measured best settings."""
    s.gamma = fields.Slider(
        1,
        MAX_GAMMA,
        value=first.listing.prefers("gamma", Settings.gamma),
        step=1,
        label="γ (draft length)",
        info="Tokens proposed per verification step (adaptive: the most).",
    )
    s.adaptive = gr.Checkbox(
        first.listing.prefers("adaptive", Settings.adaptive),
        label="adaptive γ (up to γ)",
        elem_id="sv-adaptive",
        info="Choose the draft length (a tree's size) every step from measured acceptance "
        "and costs; γ 0 (a plain step) when speculation cannot pay.",
    )
    s.max_new = fields.Slider(1, MAX_NEW_TOKENS, value=max_new_default, step=1, label="Max new tokens")
    s.temperature = fields.Slider(
        0, 2, value=0, step=0.05, label="Temperature", info="0 = greedy (outputs comparable token by token)."
    )


def more_settings(s) -> None:
    """The sampling settings few change, folded."""
    with gr.Accordion("More settings", open=False):
        s.acceptance = gr.Radio(
            list(ACCEPTANCE_MODES),
            value="lossless",
            label="acceptance when sampling",
            info="lossless: rejection sampling keeps the target's distribution. typical "
            "(Medusa's): accepts any plausible token, lossy by design. greedy: exact, "
            "temperature 0 only.",
        )
        s.top_k = fields.Number(0, precision=0, label="Top-k", info="0 switches it off.")
        s.top_p = fields.Slider(0.05, 1, value=1, step=0.05, label="Top-p", info="1 switches it off.")
        s.seed = fields.Number(0, precision=0, label="Seed", info="Same seed for both sides.")


def example_prompts(s, kinds, prompts: dict) -> None:
    """Example prompts by kind, each setting the drafter and γ measured best for it (the prompt alone where that
    drafter is not on this screen)."""
    with gr.Accordion(
        "Example prompts (each sets the drafter and γ measured best for it)", open=False, elem_id="sv-examples"
    ):
        offered = {k.name for k in kinds}
        for example in EXAMPLE_KINDS:
            rows = example_rows(example, prompts)
            if example.drafter in offered:
                gr.Examples(rows, inputs=[s.prompt, s.drafter, s.gamma, s.adaptive], label=example.title())
            else:
                gr.Examples([row[:1] for row in rows], inputs=[s.prompt], label=example.label)
