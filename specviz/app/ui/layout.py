"""The Gradio screen. Once Run is pressed the story fits one screenful (1280×720 and up): the prompt and the buttons,
the two sides streaming, the metrics strip and the identity badge; the controls sit in a sidebar, the rarely used
ones folded; Figure 1, the step explanation, the charts, the drafter comparison, the γ sweep and the recorded runs
are tabs right below. A presenter mode (?presenter=1) shows only that, larger. No torch here: the backend yields
pure-Python views (specviz/views/) and handlers.py has specviz/render/ draw them.
This module lays out the race; the sidebar (sidebar.py) and the tabs (tabs.py) lay out their own parts, the
components a race fills are declared once (race_screen.py), and wiring.py says what each control sets off.
"""

import json
from types import SimpleNamespace

import gradio as gr

from ...paths import ASSETS
from ...render import panels
from ...settings import AUTO
from .handlers import Handlers
from .race_screen import RaceScreen
from .sidebar import settings_sidebar
from .tabs import result_tabs
from .wiring import wire_events

# Runs once in the browser: presenter mode from the URL, the sidebar folded on a phone, Ctrl+Enter in the prompt runs,
# ← → step through Figure 1.
CLIENT_JS = """() => {
  window.svSetPresenter = (on) => {
    document.body.classList.toggle('sv-presenter', !!on);
    const sidebar = document.querySelector('#sv-sidebar');  // presenting: the settings fold away, the race widens
    if (sidebar && sidebar.classList.contains('open') === !!on) { sidebar.querySelector('.toggle-button')?.click(); }
    const url = new URL(window.location.href);
    if (on) { url.searchParams.set('presenter', '1'); } else { url.searchParams.delete('presenter'); }
    window.history.replaceState(null, '', url);
  };
  if (new URLSearchParams(window.location.search).get('presenter') === '1') { window.svSetPresenter(true); }
  // On a phone the open sidebar covers the whole screen (Gradio widens it to the window): it starts folded there.
  const sidebar = document.querySelector('#sv-sidebar');
  if (window.matchMedia('(max-width: 768px)').matches && sidebar?.classList.contains('open')) {
    sidebar.querySelector('.toggle-button')?.click();
  }
  document.addEventListener('keydown', (e) => {
    const inPrompt = e.target.closest && e.target.closest('#sv-prompt');
    if (inPrompt && e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      document.querySelector('#sv-run').click();
      return;
    }
    const typing = ['INPUT', 'TEXTAREA', 'SELECT'].includes(e.target.tagName) || e.target.isContentEditable;
    if (typing) { return; }
    if (e.key === 'ArrowLeft') { document.querySelector('#sv-step-prev')?.click(); }
    if (e.key === 'ArrowRight') { document.querySelector('#sv-step-next')?.click(); }
  });
}"""


def build_app(
    backend,
    pair_labels: list[str],
    kinds,
    dtypes: list[str],
    max_new_default: int = 128,
    draft_default: str = "same",
    runtimes: tuple[str, ...] = (AUTO,),
    about_runtimes: str = "",
) -> gr.Blocks:
    """`kinds`: the drafter kinds to offer (drafters.registry.kinds(menu_only=True)), each with its option panel;
    `draft_default`: the draft precision a run starts with ("same" as the target's, or one of `dtypes`); `runtimes`:
    what may compute the models, the first the default (one alone: the choice is not shown), with a line on each
    (`about_runtimes`)."""
    prompts = json.loads((ASSETS / "prompts.json").read_text())
    s = SimpleNamespace()  # the screen's components by name, filled part by part, top to bottom
    with gr.Blocks(title="specviz: speculative decoding you can see") as demo:
        s.prompt = prompt_box(prompts["code"][0])  # drawn in the race's prompt bar, but the examples fill it
        sidebar = (pair_labels, kinds, dtypes, max_new_default, draft_default, prompts, runtimes, about_runtimes)
        settings_sidebar(s, *sidebar)
        race_row(s)
        result_tabs(s, kinds)
        s.trace = gr.State(None)  # the path of the last run's trace file
        s.race = RaceScreen.of(s)
        wire_events(demo, s, Handlers(backend, s))
    return demo


def prompt_box(text: str) -> gr.Textbox:
    """The prompt, made before the sidebar's examples that fill it and drawn later, in the prompt bar."""
    return gr.Textbox(
        text,
        lines=3,  # the examples' three lines, whole, at 1280 px
        max_lines=5,
        show_label=False,
        elem_id="sv-prompt",
        placeholder="Prompt (Ctrl+Enter runs)",
        scale=6,
        label="Prompt",
        render=False,
    )


def race_row(s) -> None:
    """What fits one screenful: the title and presenter switch, the prompt and the buttons, the status, both sides
    streaming, the metrics strip and the identity badge; or, in a Grand Prix, every lane in their place."""
    with gr.Row(elem_classes="sv-top"):
        gr.HTML(
            '<div class="sv-title">specviz <span class="sv-sub">speculative decoding you can see</span></div>',
            scale=5,
            padding=False,
        )
        s.presenter = gr.Checkbox(
            False, label="presenter mode", elem_id="sv-presenter", container=False, scale=1, min_width=160
        )
    with gr.Row(elem_classes="sv-promptbar"):
        s.prompt.render()
        with gr.Column(scale=1, min_width=170, elem_classes="sv-buttons"):
            s.run = gr.Button("Run side by side", variant="primary", elem_id="sv-run")
            with gr.Row():
                s.compare = gr.Button("Grand Prix", elem_id="sv-compare", size="sm", min_width=60)
                s.stop = gr.Button("Stop", variant="stop", elem_id="sv-stop", size="sm", min_width=60)
    s.status = gr.HTML(panels.status("ready"), elem_id="sv-status")
    s.queue_timer = gr.Timer(1.0, active=False)  # while a click waits for the device, its place in line
    s.echo = gr.HTML(elem_id="sv-echo")
    s.gp = gr.HTML(elem_id="sv-gp")  # a Grand Prix's lanes: while it holds any, they take the two sides' place
    with gr.Row(equal_height=True, elem_classes="sv-lanes"):
        with gr.Column():
            gr.HTML('<h3 class="sv-side">Plain decoding</h3>')
            s.plain_text = gr.HTML(elem_id="sv-plain", elem_classes="sv-lane")
        with gr.Column():
            gr.HTML('<h3 class="sv-side">Speculative decoding</h3>')
            s.spec_text = gr.HTML(elem_id="sv-spec", elem_classes="sv-lane")
    s.metrics = gr.HTML(elem_id="sv-metrics")
    s.badge = gr.HTML(elem_id="sv-badge")
    s.production = gr.HTML(elem_id="sv-production")


# Gradio keeps each session's component values and state after it closes (its state for an hour), up to this many
# sessions, least recently used dropped first: at about 1 MB for a session whose last run was 1,500 tokens long.
SESSIONS_KEPT = 256

# Gradio serves each rule of the stylesheet twice: as written, and scoped under its container
# (".gradio-container.gradio-container-VERSION .contain" before the selector), three classes more specific. A presenter
# rule ("body.sv-presenter …") has no scoped copy that matches (the body holds the container), so the scoped copy of
# the normal rule it overrides would win; each presenter rule names the container itself, and outranks that copy.
PRESENTER = "body.sv-presenter "


def app_stylesheet() -> str:
    """specviz.css as the app serves it: its presenter rules raised above Gradio's scoped copies of the normal ones."""
    return (ASSETS / "specviz.css").read_text().replace(PRESENTER, PRESENTER + ".gradio-container .contain ")


def launch_options() -> dict:
    """Theme, stylesheet and the page's script (Gradio 6 takes them in launch(), not in Blocks()), and how many
    sessions' screens the server keeps."""
    return dict(
        theme=gr.themes.Soft(),
        css=app_stylesheet(),
        js=CLIENT_JS,
        state_session_capacity=SESSIONS_KEPT,
    )
