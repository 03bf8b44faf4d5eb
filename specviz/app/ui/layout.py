"""The Gradio screen: controls, the two sides, Figure 1 live, metrics, identity badge, charts.

It knows the backend only through `race(request, stopped)` and `sweep(request, stopped=...)`, which yield
the pure-Python views of specviz.race and specviz.sweep, and `shelf.load(...)`. No torch here.
"""

import json
import threading
import time

import gradio as gr

from ...errors import SpecvizError
from ...events import summarize
from ...runtime import ASSETS
from ...settings import ACCEPTANCE_MODES, MAX_GAMMA, MAX_NEW_TOKENS
from ..race import RaceRequest, RaceView
from . import charts, panels
from .controls import in_api_order, option_panels
from .figure1 import legend, step_rows
UPDATE_EVERY_S = 0.2  # the screen refreshes at most this often; the engine never waits for it
CHART_EVERY_S = 1.0  # building a plotly figure costs ~17 ms on a laptop CPU: the chart refreshes less often
MAX_ROWS = 300  # Figure-1 rows kept on screen; earlier ones are summarised in one line
EXAMPLE_KINDS = (("code", "Code"), ("extraction", "Extraction / summary of a passage"), ("prose", "Free prose"))


class StopBoard:
    """One stop flag per browser session, so Stop halts only that viewer's run."""

    def __init__(self):
        self._flags: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def fresh(self, session: str) -> threading.Event:
        with self._lock:
            self._flags[session] = flag = threading.Event()
        return flag

    def stop(self, session: str) -> None:
        with self._lock:
            flag = self._flags.get(session)
        if flag is not None:
            flag.set()


def figure1(view: RaceView) -> str:
    events = view.spec.events
    hidden = max(0, len(events) - MAX_ROWS)
    note = f'<div class="sv-status">{hidden} earlier steps not shown</div>' if hidden else ""
    return note + step_rows(events[hidden:], view.text_of)


def _race_outputs(view: RaceView, prompt: str, chart: bool = True):
    if view.finished:
        kind, line = ("done", f"stopped after {view.wall_s:.1f} s wall time") if view.stopped else \
            ("done", f"done in {view.wall_s:.1f} s wall time (plain {view.plain.clock_s:.1f} s + speculative "
                     f"{view.spec.clock_s:.1f} s on their own clocks); {view.message}")
    else:
        kind, line = "busy", view.message if not (view.plain.events or view.spec.events) else f"running… {view.message}"
    return (panels.status(line, kind), panels.prompt_echo(prompt), panels.lane_text(view, "plain"),
            panels.lane_text(view, "spec"), figure1(view), panels.metrics_strip(view), panels.identity_badge(view),
            charts.race_chart(view) if chart else gr.skip(), race_summary(view))


def race_summary(view: RaceView) -> dict:
    """The run in numbers, for the API and for anyone who wants them raw."""
    same = None
    if view.finished and view.greedy:
        same = view.divergence is None
    return {"finished": view.finished, "stopped": view.stopped, "wall_s": round(view.wall_s, 4),
            "plain": summarize(view.plain.events).to_json(), "speculative": summarize(view.spec.events).to_json(),
            "identical": same, "mode": view.mode, "lossy": view.lossy,
            "plain_tokens": view.plain.tokens, "speculative_tokens": view.spec.tokens,
            "speculative_gammas": [e.gamma for e in view.spec.events]}  # γ of each step (adaptive: as chosen)


def _request(values: dict) -> RaceRequest:
    """The controls' values as a request; the screen calls the token budget max_new."""
    values = dict(values)
    values["max_new_tokens"] = values.pop("max_new")
    return RaceRequest.of(**values)


def _failure(exc: Exception) -> str:
    if isinstance(exc, SpecvizError):
        return panels.status(f"error: {exc}", "error")
    return panels.status(f"internal error ({type(exc).__name__}): {exc}; the app keeps serving", "error")


def build_app(backend, pair_labels: list[str], kinds, dtypes: list[str], max_new_default: int = 128) -> gr.Blocks:
    """`kinds`: the drafter kinds to offer (drafters.registry.kinds(menu_only=True)), each with its option panel."""
    board = StopBoard()
    prompts = json.loads((ASSETS / "prompts.json").read_text())

    with gr.Blocks(title="specviz: speculative decoding you can see") as demo:
        gr.HTML('<h1 class="sv-title">specviz</h1><p class="sv-sub">A small drafter guesses γ tokens, the target '
                'checks them all in one forward pass; the output is exactly what the target alone would write.</p>')
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                pair = gr.Dropdown(pair_labels, value=pair_labels[0], label="Model pair (target ← draft)",
                                   info="Loaded once and kept; switching loads the new pair.")
                drafter = gr.Dropdown([(k.label, k.name) for k in kinds], value=kinds[0].name, label="Drafter",
                                      info="Who proposes tokens for the target to verify.", elem_id="sv-drafter")
                dtype = gr.Radio(dtypes, value=dtypes[0], label="Precision",
                                 info="bfloat16 is ~2× faster on CPU; float32 makes greedy outputs token-exact.")
                gamma = gr.Slider(1, MAX_GAMMA, value=4, step=1, label="γ (draft length)",
                                  info="Tokens proposed per verification step (history lookup: n − 1, each candidate's length).")
                adaptive = gr.Checkbox(False, label="adaptive γ (up to γ)", elem_id="sv-adaptive",
                                       info="Choose γ before every step from the measured acceptance and costs; "
                                            "γ 0 (a plain step) when speculation cannot pay. Each step's γ is in the figure.")
                options, option_boxes = option_panels(kinds, kinds[0].name)
                acceptance = gr.Radio(list(ACCEPTANCE_MODES), value="lossless", label="acceptance when sampling",
                                      info="greedy: exact, temperature 0 only. lossless: rejection sampling keeps the "
                                           "target's distribution. typical (Medusa's): accepts any plausible token, "
                                           "lossy by design.")
                max_new = gr.Slider(1, MAX_NEW_TOKENS, value=max_new_default, step=1, label="Max new tokens",
                                    info="Each side stops here or at end of sequence.")
                temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature",
                                        info="0 = greedy (outputs comparable token by token).")
                top_k = gr.Number(0, precision=0, label="Top-k", info="0 switches it off.")
                top_p = gr.Slider(0.05, 1, value=1, step=0.05, label="Top-p", info="1 switches it off.")
                seed = gr.Number(0, precision=0, label="Seed", info="Same seed for both sides.")
            with gr.Column(scale=3):
                prompt = gr.Textbox(prompts["code"][0], lines=4, label="Prompt",
                                    info="Shown and rendered as plain text, whatever it contains.")
                for key, label in EXAMPLE_KINDS:
                    gr.Examples([[p] for p in prompts[key]], inputs=[prompt], label=label)
                with gr.Row():
                    run = gr.Button("Run side by side", variant="primary", elem_id="sv-run")
                    stop = gr.Button("Stop", variant="stop", elem_id="sv-stop")
                    sweep = gr.Button("γ sweep 1…8 on this prompt", elem_id="sv-sweep")
                status = gr.HTML(panels.status("ready"), elem_id="sv-status")
                echo = gr.HTML(elem_id="sv-echo")
        gr.HTML(panels.how_it_runs())
        with gr.Row(equal_height=False):
            with gr.Column():
                gr.HTML('<h3 class="sv-side">Plain decoding</h3>')
                plain_text = gr.HTML(elem_id="sv-plain")
            with gr.Column():
                gr.HTML('<h3 class="sv-side">Speculative decoding</h3>')
                spec_text = gr.HTML(elem_id="sv-spec")
        metrics = gr.HTML(elem_id="sv-metrics")
        badge = gr.HTML(elem_id="sv-badge")
        gr.HTML('<h3 class="sv-side">Every verification step (Figure 1 of Leviathan et al.)</h3>' + legend())
        rows = gr.HTML(elem_id="sv-fig1", max_height=520, autoscroll=True)
        with gr.Row():
            race_plot = gr.Plot(charts.placeholder("tokens/s of both sides appear here during a run"),
                                label="tokens/s", elem_id="sv-race-chart")
        sweep_plot = gr.Plot(charts.placeholder("press “γ sweep” to measure γ = 1…8 on the current prompt"),
                             label="γ sweep", elem_id="sv-sweep-chart")
        with gr.Accordion("The run in numbers (JSON)", open=False):
            summary = gr.JSON(elem_id="sv-summary")

        controls = in_api_order(dict(
            pair=pair, drafter=drafter, dtype=dtype, prompt=prompt, gamma=gamma, max_new=max_new,
            temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, acceptance=acceptance, adaptive=adaptive,
            **options))
        race_outputs = [status, echo, plain_text, spec_text, rows, metrics, badge, race_plot, summary]

        def do_race(request: gr.Request, **values):
            flag = board.fresh(request.session_hash)
            req = _request(values)
            try:
                shown = charted = 0.0
                for view in backend.race(req, flag.is_set):
                    now = time.perf_counter()
                    if view.finished or now - shown >= UPDATE_EVERY_S:
                        chart = view.finished or now - charted >= CHART_EVERY_S
                        shown, charted = now, now if chart else charted
                        yield _race_outputs(view, req.prompt, chart)
            except Exception as exc:  # one message on screen; the server keeps serving
                yield (_failure(exc), panels.prompt_echo(str(req.prompt)), *[gr.skip()] * (len(race_outputs) - 2))

        def do_sweep(request: gr.Request, progress=gr.Progress(), **values):
            flag = board.fresh(request.session_hash)
            try:
                for view in backend.sweep(_request(values), stopped=flag.is_set):
                    progress(view.progress(), desc=view.message)
                    kind = "done" if view.finished else "busy"
                    yield panels.status(f"γ sweep: {view.message}", kind), charts.sweep_chart(view)
            except Exception as exc:
                yield _failure(exc), gr.skip()

        def do_load(pair_label, dtype_name):
            try:
                for line in backend.shelf.load(pair_label, dtype_name):
                    yield panels.status(line, "busy")
                yield panels.status(f"ready: {pair_label} ({dtype_name})", "done")
            except Exception as exc:
                yield _failure(exc)

        def do_stop(request: gr.Request):
            board.stop(request.session_hash)

        device = dict(concurrency_id="device", concurrency_limit=1)  # one generation on the device at a time
        run.click(do_race, inputs_kwargs=controls, outputs=race_outputs, api_name="run", **device)
        sweep.click(do_sweep, inputs_kwargs=controls, outputs=[status, sweep_plot], api_name="sweep", **device)
        boxes = list(option_boxes.values())
        drafter.change(lambda name: [gr.update(visible=n == name) for n in option_boxes], drafter, boxes,
                       api_name=False, queue=False)
        pair.change(do_load, [pair, dtype], [status], api_name="load", **device)
        dtype.change(do_load, [pair, dtype], [status], api_name=False, **device)
        stop.click(do_stop, None, None, api_name="stop", concurrency_id="stop", concurrency_limit=None)
    return demo


def launch_options() -> dict:
    """Theme and stylesheet: Gradio 6 takes them in launch(), not in Blocks()."""
    return dict(theme=gr.themes.Soft(), css=(ASSETS / "specviz.css").read_text())
