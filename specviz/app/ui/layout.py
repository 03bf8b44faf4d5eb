"""The Gradio screen. Once Run is pressed the story fits one screenful (1280×720 and up): the prompt and the buttons,
the two sides streaming, the metrics strip and the identity badge; the controls sit in a sidebar, the rarely used
ones folded; Figure 1, the step explanation, the charts, the drafter comparison, the γ sweep and the recorded runs
are tabs right below. A presenter mode (?presenter=1) shows only that, larger. No torch here: the backend yields
pure-Python views (race.py, sweep.py, compare.py) and handlers.py turns them into HTML and charts.
"""

import json
from html import escape
from types import SimpleNamespace

import gradio as gr

from ...runtime import ASSETS
from ...settings import ACCEPTANCE_MODES, MAX_GAMMA, MAX_NEW_TOKENS
from ..replay import SPEEDS
from . import charts, fields, panels
from .controls import in_api_order, option_panels
from .examples import EXAMPLE_KINDS, example_rows
from .explain import explain_step
from .figure1 import legend
from .handlers import Handlers, recorded_runs

# Runs once in the browser: presenter mode from the URL, Ctrl+Enter in the prompt runs, ← → step through Figure 1.
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
# Figure 1's rows say which step they show; a click on one asks for its explanation.
PICK_JS = (
    "element.addEventListener('click', (e) => { const row = e.target.closest('.sv-row[data-step]'); "
    "if (row) { trigger('pick', {step: Number(row.dataset.step)}); } });"
)


def build_app(
    backend, pair_labels: list[str], kinds, dtypes: list[str], max_new_default: int = 128, draft_default: str = "same"
) -> gr.Blocks:
    """`kinds`: the drafter kinds to offer (drafters.registry.kinds(menu_only=True)), each with its option panel;
    `draft_default`: the draft precision a run starts with ("same" as the target's, or one of `dtypes`)."""
    prompts = json.loads((ASSETS / "prompts.json").read_text())
    s = SimpleNamespace()
    with gr.Blocks(title="specviz: speculative decoding you can see") as demo:
        s.prompt = gr.Textbox(
            prompts["code"][0],
            lines=2,
            max_lines=4,
            show_label=False,
            elem_id="sv-prompt",
            placeholder="Prompt (Ctrl+Enter runs)",
            scale=6,
            label="Prompt",
            render=False,
        )
        with gr.Sidebar(label="Settings", open=True, elem_id="sv-sidebar"):
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
            s.drafter = gr.Dropdown(
                [(k.label, k.name) for k in kinds],
                value=kinds[0].name,
                label="Drafter",
                info="Who proposes tokens for the target to verify.",
                elem_id="sv-drafter",
            )
            summaries = {
                k.name: f'<span class="sv-note">{escape(k.summary[:1].upper() + k.summary[1:])}.</span>' for k in kinds
            }
            s.drafter_note = gr.HTML(summaries[kinds[0].name], elem_id="sv-drafter-note")
            s.dtype = gr.Radio(
                dtypes,
                value=dtypes[0],
                label="Precision",
                info="bfloat16 is ~2× faster on CPU; float32 makes greedy outputs token-exact; int8 "
                "(CPU) is an int8 model on both sides.",
            )
            s.draft_dtype = gr.Dropdown(
                ["same", *dtypes],
                value=draft_default,
                label="Draft precision",
                info="An int8 draft costs less per guess; the target alone decides the output.",
                elem_id="sv-draft-dtype",
            )
            first = kinds[0]  # the race a visitor starts with runs its measured best settings
            s.gamma = fields.Slider(
                1,
                MAX_GAMMA,
                value=first.prefers("gamma", 4),
                step=1,
                label="γ (draft length)",
                info="Tokens proposed per verification step (adaptive: the most).",
            )
            s.adaptive = gr.Checkbox(
                first.prefers("adaptive", False),
                label="adaptive γ (up to γ)",
                elem_id="sv-adaptive",
                info="Choose the draft length (a tree's size) every step from measured acceptance "
                "and costs; γ 0 (a plain step) when speculation cannot pay.",
            )
            s.max_new = fields.Slider(1, MAX_NEW_TOKENS, value=max_new_default, step=1, label="Max new tokens")
            s.temperature = fields.Slider(
                0, 2, value=0, step=0.05, label="Temperature", info="0 = greedy (outputs comparable token by token)."
            )
            options, option_boxes = option_panels(kinds, kinds[0].name)
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
            with gr.Accordion(
                "Example prompts (each sets the drafter and γ measured best for it)", open=False, elem_id="sv-examples"
            ):
                offered = {k.name for k in kinds}
                for example in EXAMPLE_KINDS:
                    rows = example_rows(example, prompts)
                    if example.drafter in offered:
                        gr.Examples(rows, inputs=[s.prompt, s.drafter, s.gamma, s.adaptive], label=example.title())
                    else:  # a screen without that drafter: the prompts alone
                        gr.Examples([row[:1] for row in rows], inputs=[s.prompt], label=example.label)

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
            with gr.Column(scale=1, min_width=150, elem_classes="sv-buttons"):
                s.run = gr.Button("Run side by side", variant="primary", elem_id="sv-run")
                with gr.Row():
                    s.compare = gr.Button("Compare all", elem_id="sv-compare", size="sm", min_width=60)
                    s.stop = gr.Button("Stop", variant="stop", elem_id="sv-stop", size="sm", min_width=60)
        s.status = gr.HTML(panels.status("ready"), elem_id="sv-status")
        s.echo = gr.HTML(elem_id="sv-echo")
        with gr.Row(equal_height=True, elem_classes="sv-lanes"):
            with gr.Column():
                gr.HTML('<h3 class="sv-side">Plain decoding</h3>')
                s.plain_text = gr.HTML(elem_id="sv-plain", elem_classes="sv-lane")
            with gr.Column():
                gr.HTML('<h3 class="sv-side">Speculative decoding</h3>')
                s.spec_text = gr.HTML(elem_id="sv-spec", elem_classes="sv-lane")
        s.metrics = gr.HTML(elem_id="sv-metrics")
        s.badge = gr.HTML(elem_id="sv-badge")
        with gr.Tabs(elem_id="sv-tabs") as s.tabs:
            with gr.Tab("Figure 1", id="fig1"):
                gr.HTML(legend())
                s.rows = gr.HTML(elem_id="sv-fig1", max_height=520, autoscroll=True, js_on_load=PICK_JS)
            with gr.Tab("Explain a step", id="explain"):
                with gr.Row():
                    s.prev = gr.Button("◀", elem_id="sv-step-prev", size="sm", scale=0, min_width=50)
                    s.step = gr.Slider(1, 2, value=1, step=1, label="step of the speculative side", elem_id="sv-step")
                    s.next = gr.Button("▶", elem_id="sv-step-next", size="sm", scale=0, min_width=50)
                s.explanation = gr.HTML(explain_step(None, str), elem_id="sv-explain")
                with gr.Row(equal_height=True):
                    s.replay_rule = gr.Dropdown(
                        [],
                        label="replay this step's acceptance rule, with no model",
                        elem_id="sv-replay-rule",
                        scale=4,
                        interactive=False,
                    )
                    s.replay_step = gr.Button("Replay it 10,000 times", elem_id="sv-replay-step", scale=1)
                s.replay_verdict = gr.HTML(elem_id="sv-replay-verdict")
                s.replay_plot = gr.Plot(
                    charts.placeholder("a sampled step's rule, replayed: what it emits against p"),
                    elem_id="sv-replay-chart",
                )
            with gr.Tab("tokens/s", id="chart"):
                s.race_plot = gr.Plot(
                    charts.placeholder("tokens/s of both sides appear here during a run"),
                    label="tokens/s",
                    elem_id="sv-race-chart",
                )
            with gr.Tab("Why this speedup", id="why"):
                s.diagnosis = gr.HTML(panels.diagnosis(None), elem_id="sv-diagnosis")
                with gr.Row():
                    s.time_plot = gr.Plot(
                        charts.placeholder("after a run: where each side's time went"),
                        label="time",
                        elem_id="sv-time-chart",
                    )
                    s.position_plot = gr.Plot(
                        charts.placeholder("after a run: how acceptance decays along the draft"),
                        label="acceptance by position",
                        elem_id="sv-position-chart",
                    )
            with gr.Tab("Compare drafters", id="compare"):
                gr.HTML(
                    '<p class="sv-note">“Compare all” runs plain decoding once, then every drafter with the '
                    "current settings, one after the other.</p>"
                )
                s.compare_table = gr.HTML(panels.compare_table([]), elem_id="sv-compare-table")
                s.compare_chart = gr.Plot(
                    charts.placeholder("tokens/s and speedup of every drafter appear here"), elem_id="sv-compare-chart"
                )
                s.compare_texts = {}
                with gr.Tabs():
                    for name in ["plain", *(k.name for k in kinds)]:
                        with gr.Tab(name):
                            s.compare_texts[name] = gr.HTML(elem_id=f"sv-compare-{name}")
            with gr.Tab("γ sweep", id="sweep"):
                s.sweep = gr.Button("γ sweep 1…8 on this prompt", elem_id="sv-sweep")
                s.sweep_plot = gr.Plot(
                    charts.placeholder("press “γ sweep” to measure γ = 1…8 on the current prompt"),
                    label="γ sweep",
                    elem_id="sv-sweep-chart",
                )
            with gr.Tab("Recorded runs", id="recorded"):
                runs = recorded_runs()
                with gr.Row():
                    s.recorded = gr.Dropdown(
                        runs, value=runs[0][1] if runs else None, label="recorded runs", elem_id="sv-recorded", scale=3
                    )
                    s.upload = gr.File(label="or a trace file", file_types=[".json"], elem_id="sv-upload", scale=2)
                    s.speed = gr.Radio(list(SPEEDS), value="1×", label="pace", elem_id="sv-speed", scale=1)
                with gr.Row():
                    s.replay = gr.Button("Replay", elem_id="sv-replay")
                    s.download = gr.DownloadButton("Download trace (JSON)", elem_id="sv-download")
                    s.snapshot = gr.DownloadButton("Download snapshot (HTML)", elem_id="sv-snapshot")
            with gr.Tab("Run in numbers", id="numbers"):
                s.summary = gr.JSON(elem_id="sv-summary")
            with gr.Tab("How the race is run", id="how"):
                gr.HTML(panels.how_it_runs())
        s.trace = gr.State(None)  # the path of the last run's trace file

        h = Handlers(backend, s)
        controls = in_api_order(
            dict(
                pair=s.pair,
                drafter=s.drafter,
                dtype=s.dtype,
                prompt=s.prompt,
                gamma=s.gamma,
                max_new=s.max_new,
                temperature=s.temperature,
                top_k=s.top_k,
                top_p=s.top_p,
                seed=s.seed,
                acceptance=s.acceptance,
                adaptive=s.adaptive,
                draft_dtype=s.draft_dtype,
                **options,
            )
        )
        race_outputs = [
            s.status,
            s.echo,
            s.plain_text,
            s.spec_text,
            s.rows,
            s.metrics,
            s.badge,
            s.race_plot,
            s.summary,
            s.trace,
            s.step,
            s.download,
            s.snapshot,
            s.diagnosis,
            s.time_plot,
            s.position_plot,
        ]
        compare_outputs = [
            s.status,
            s.compare_table,
            s.compare_chart,
            *s.compare_texts.values(),
            s.download,
            s.snapshot,
        ]
        device = dict(concurrency_id="device", concurrency_limit=1)  # one generation on the device at a time
        s.run.click(h.waiting, None, s.status, api_name=False, queue=False).then(  # waiting() arms Stop at the click
            h.race, inputs_kwargs=controls, outputs=race_outputs, api_name="run", **device
        )
        s.sweep.click(h.arm, None, None, api_name=False, queue=False).then(
            h.sweep, inputs_kwargs=controls, outputs=[s.status, s.sweep_plot], api_name="sweep", **device
        )
        s.compare.click(
            h.to_comparison,
            None,
            s.tabs,
            api_name=False,
            queue=False,
            js="() => { document.querySelector('#sv-tabs').scrollIntoView({behavior: 'smooth'}); }",
        ).then(h.compare, inputs_kwargs=controls, outputs=compare_outputs, api_name="compare", **device)
        s.replay.click(
            h.replay,
            [s.recorded, s.upload, s.speed],
            race_outputs,
            api_name="replay",
            concurrency_id="replay",
            concurrency_limit=None,
        ).then(h.after_replay, s.trace, compare_outputs, api_name=False, queue=False)
        s.step.change(h.explain, [s.step, s.trace], s.explanation, api_name=False, queue=False)
        s.prev.click(lambda v, t: h.nudge(v, t, -1), [s.step, s.trace], s.step, api_name=False, queue=False)
        s.next.click(lambda v, t: h.nudge(v, t, +1), [s.step, s.trace], s.step, api_name=False, queue=False)
        s.rows.pick(h.pick, s.trace, [s.step, s.explanation, s.tabs], api_name=False, queue=False)
        s.trace.change(h.explain, [s.step, s.trace], s.explanation, api_name=False, queue=False)
        for source in (s.step, s.trace):  # the rules a step can be replayed with follow the step shown
            source.change(h.replay_choices, [s.step, s.trace], s.replay_rule, api_name=False, queue=False)
        s.replay_step.click(
            h.replay_rule,
            [s.step, s.trace, s.replay_rule],
            [s.replay_verdict, s.replay_plot],
            api_name=False,
            queue=False,
        )
        boxes = list(option_boxes.values())
        s.drafter.change(
            lambda name: [gr.update(visible=n == name) for n in option_boxes] + [summaries.get(name, "")],
            s.drafter,
            boxes + [s.drafter_note],
            api_name=False,
            queue=False,
        )
        s.pair.change(h.load, [s.pair, s.dtype, s.draft_dtype], [s.status], api_name="load", **device)
        for precision in (s.dtype, s.draft_dtype):
            precision.change(h.load, [s.pair, s.dtype, s.draft_dtype], [s.status], api_name=False, **device)
        s.stop.click(h.stop, None, None, api_name="stop", concurrency_id="stop", concurrency_limit=None)
        s.add_pair.click(h.add_pair, [s.any_target, s.any_draft], [s.pair, s.status], api_name="add_pair")
        demo.load(
            None, None, s.presenter, js="() => new URLSearchParams(window.location.search).get('presenter') === '1'"
        )
        demo.unload(h.leave)  # the visitor's earlier runs, kept for drafting, go with them
        s.presenter.change(None, s.presenter, None, js="(on) => { window.svSetPresenter(on); return []; }")
    return demo


# Gradio keeps each session's component values and state after it closes (its state for an hour), up to this many
# sessions, least recently used dropped first: at about 1 MB for a session whose last run was 1,500 tokens long.
SESSIONS_KEPT = 256


def launch_options() -> dict:
    """Theme, stylesheet and the page's script (Gradio 6 takes them in launch(), not in Blocks()), and how many
    sessions' screens the server keeps."""
    return dict(
        theme=gr.themes.Soft(),
        css=(ASSETS / "specviz.css").read_text(),
        js=CLIENT_JS,
        state_session_capacity=SESSIONS_KEPT,
    )
