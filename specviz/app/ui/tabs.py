"""The tabs below the race: Figure 1, a step explained (and its acceptance rule replayed), the charts, the drafter
comparison, one's own prompts, many requests at once (concurrency), the γ sweep, the recorded runs, the run in
numbers and how the race is run. Each part adds its components to the screen (a namespace the layout hands round).
No torch here."""

import gradio as gr

from ...events import PLAIN
from ...render import charts, panels
from ...render.explain import explain_step
from ...render.figure1 import legend
from ...traffic.traffic_plan import ROUNDS
from ...views.replay import SPEEDS
from .grand_prix_screen import BEST as BEST_LANES
from .grand_prix_screen import SIDEBAR
from .handlers import recorded_runs
from .under_load_screen import (
    DEFAULT_LEVELS,
    DEFAULT_RATES,
    DEFAULT_REQUESTS,
    DEFAULT_ROWS,
    DEFAULT_SLO,
    EXAMPLES,
    PACES,
    YOURS,
)
from .workload_screen import BEST, FIXED

# Figure 1's rows say which step they show; a click on one asks for its explanation.
PICK_JS = (
    "element.addEventListener('click', (e) => { const row = e.target.closest('.sv-row[data-step]'); "
    "if (row) { trigger('pick', {step: Number(row.dataset.step)}); } });"
)


def chart(waiting: str, label: str, elem_id: str, **more) -> gr.Plot:
    """A Plotly chart that says `waiting` until a run fills it. The figure's own title names it, so Gradio's label
    (kept for the API) is not drawn: it would lie over the title in the figure's top left corner."""
    return gr.Plot(charts.placeholder(waiting), label=label, show_label=False, elem_id=elem_id, **more)


def result_tabs(s, kinds) -> None:
    """Every tab, in the order shown; `s.tabs` is their strip (a handler can select one by id). Tabs that do not fit
    one row wrap onto the next, so every tab stays one click away (Gradio's default hides them under a "…" menu)."""
    with gr.Tabs(elem_id="sv-tabs", overflow_behavior="wrap") as s.tabs:
        figure1_tab(s)
        explain_tab(s)
        chart_tabs(s)
        compare_tab(s, kinds)
        workload_tab(s, kinds)
        concurrency_tab(s, kinds)
        sweep_tab(s)
        recorded_tab(s)
        with gr.Tab("Run in numbers", id="numbers"):
            s.summary = gr.JSON(elem_id="sv-summary")
        with gr.Tab("How the race is run", id="how"):
            gr.HTML(panels.how_it_runs())


def figure1_tab(s) -> None:
    with gr.Tab("Figure 1", id="fig1"):
        gr.HTML(legend())
        s.rows = gr.HTML(elem_id="sv-fig1", max_height=520, autoscroll=True, js_on_load=PICK_JS)


def explain_tab(s) -> None:
    """One step of the speculative side in words, ◀ ▶ to move, and its acceptance rule replayed with no model."""
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
        s.replay_plot = chart(
            "a sampled step's rule, replayed: what it emits against p", "rule replayed", "sv-replay-chart"
        )


def chart_tabs(s) -> None:
    """tokens/s during a run, and after it why this speedup: a line, where the time went, acceptance by position."""
    with gr.Tab("tokens/s", id="chart"):
        s.race_plot = chart("tokens/s of both sides appear here during a run", "tokens/s", "sv-race-chart")
    with gr.Tab("Why this speedup", id="why"):
        s.diagnosis = gr.HTML(panels.diagnosis(None), elem_id="sv-diagnosis")
        with gr.Row():  # side by side where both get 400 px, else one above the other
            s.time_plot = chart("after a run: where each side's time went", "time", "sv-time-chart", min_width=400)
            s.position_plot = chart(
                "after a run: how acceptance decays along the draft",
                "acceptance by position",
                "sv-position-chart",
                min_width=400,
            )


def drafter_boxes(kinds, ticked, label: str, elem_id: str) -> gr.CheckboxGroup:
    """A tab's choice of drafters: one box per kind, by its label, the `ticked` ones ticked at the start."""
    return gr.CheckboxGroup(
        [(k.listing.label, k.name) for k in kinds],
        value=[k.name for k in ticked],
        label=label,
        elem_id=elem_id,
        scale=3,
    )


def compare_tab(s, kinds) -> None:
    """The Grand Prix's lanes (every drafter by default, each at its best settings, or lanes named with their γ), its
    replay at real pace, and what it leaves behind: a table, a chart, and each side's text in a tab of its own
    (`s.compare_texts`: {"plain" or drafter name: its text})."""
    with gr.Tab("Compare drafters", id="compare"):
        gr.HTML(
            '<p class="sv-note">The Grand Prix races plain decoding and every lane at once on this prompt, taking '
            "turns on one device by the race's rule (whichever lane is furthest behind on its own clock runs "
            "next).</p>"
        )
        with gr.Row(equal_height=True):
            s.gp_drafters = drafter_boxes(kinds, kinds, "lanes", "sv-gp-drafters")
            with gr.Column(scale=2, min_width=220):
                s.gp_setting = gr.Radio(
                    [BEST_LANES, SIDEBAR], value=BEST_LANES, label="each lane's settings", elem_id="sv-gp-setting"
                )
                s.gp_lanes = gr.Textbox(
                    "",  # a value: the API's clients may leave it out, as they did before it came
                    label="or lanes by name (a fixed γ: @4, adaptive: @a8)",
                    placeholder="draft@2, draft@4, draft@8",
                    elem_id="sv-gp-lanes",
                    max_lines=1,
                )
                s.gp_runtimes = gr.Checkbox(
                    False,
                    label="on every runtime: each lane on each runtime that runs the pair here, each beside its own "
                    "plain decoding, and why the speedups differ",
                    elem_id="sv-gp-runtimes",
                )
        with gr.Row(equal_height=True):
            s.gp_replay = gr.Button("Replay the last Grand Prix at real pace", elem_id="sv-gp-replay", scale=3)
            s.gp_speed = gr.Radio(list(SPEEDS), value="1×", label="pace", elem_id="sv-gp-speed", scale=1)
        s.compare_table = gr.HTML(panels.compare_table([]), elem_id="sv-compare-table")
        s.compare_chart = chart(
            "tokens/s and speedup of every lane appear here", "drafters compared", "sv-compare-chart"
        )
        s.compare_texts = {}
        with gr.Tabs():
            for name in [PLAIN, *(k.name for k in kinds)]:
                with gr.Tab(name):
                    s.compare_texts[name] = gr.HTML(elem_id=f"sv-compare-{name}")


def workload_tab(s, kinds) -> None:
    """Every chosen drafter on the visitor's own prompts (pasted or uploaded) against plain decoding: a table that
    fills as runs finish, a progress bar with the time left, and the report and its table to download."""
    with gr.Tab("Your prompts", id="workload"):
        with gr.Row():
            s.workload_prompts = gr.Textbox(
                lines=6,
                max_lines=14,
                label="your prompts: one per line, or blocks separated by a blank line",
                placeholder="Write a SQL query that lists the ten newest orders.\nSummarise this ticket: ...",
                elem_id="sv-workload-prompts",
                scale=3,
            )
            s.workload_file = gr.File(
                label="or a .txt, .jsonl (prompt or turns) or .csv (prompt column)",
                file_types=[".txt", ".jsonl", ".csv"],
                elem_id="sv-workload-file",
                scale=2,
            )
        with gr.Row(equal_height=True):
            s.workload_drafters = drafter_boxes(kinds, kinds, "drafters", "sv-workload-drafters")
            s.workload_gamma = gr.Radio(
                [BEST, FIXED],
                value=BEST,
                label="draft length",
                elem_id="sv-workload-gamma",
                scale=2,
            )
        with gr.Row():
            s.workload_run = gr.Button("Run on my prompts", variant="primary", elem_id="sv-workload-run")
            s.workload_report = gr.DownloadButton("Download report (HTML)", elem_id="sv-workload-report")
            s.workload_csv = gr.DownloadButton("Download table (CSV)", elem_id="sv-workload-csv")
        s.workload_progress = gr.HTML(elem_id="sv-workload-progress")
        s.workload_table = gr.HTML(elem_id="sv-workload-table")


def concurrency_tab(s, kinds) -> None:
    """Its controls, its charts side by side, the table, vLLM's configuration and the downloads."""
    with gr.Tab("Concurrency", id="concurrency"):
        gr.HTML(
            '<p class="sv-note">Concurrent requests: each level decodes that many requests together (one target '
            "forward per step for all of them), plain decoding first, then each drafter. Verifying γ drafts for B "
            "requests is a forward of B × (γ + 1) tokens: cheap while the device waits on memory, dear once it "
            "computes; the crossover is where a drafter stops paying.</p>"
        )
        with gr.Row(equal_height=True):
            batched = [k for k in kinds if k.build_batch is not None]  # those that decode a batch
            s.concurrency_lanes = drafter_boxes(kinds, batched, "drafters", "sv-concurrency-drafters")
            with gr.Column(scale=2, min_width=240):
                s.concurrency_names = gr.Textbox(
                    "",
                    label="or lanes by name (a fixed γ: @4, adaptive: @a8, the last sweep's table: @table)",
                    placeholder="draft@4, draft@a8, ngram",
                    elem_id="sv-concurrency-lanes",
                    max_lines=1,
                )
                s.concurrency_levels = gr.Textbox(
                    DEFAULT_LEVELS, label="concurrent requests (levels)", elem_id="sv-concurrency-levels", max_lines=1
                )
        with gr.Row(equal_height=True):
            s.concurrency_source = gr.Radio(
                [EXAMPLES, YOURS], value=EXAMPLES, label="prompts", elem_id="sv-concurrency-source"
            )
            s.concurrency_rounds = gr.Slider(
                ROUNDS[0], ROUNDS[-1], value=1, step=1, label="rounds (median shown)", elem_id="sv-concurrency-rounds"
            )
            s.concurrency_run = gr.Button("Run concurrency sweep", variant="primary", elem_id="sv-concurrency-run")
        s.concurrency_progress = gr.HTML(elem_id="sv-concurrency-progress")
        with gr.Row():
            s.concurrency_throughput = chart(
                "total tokens/s against concurrency appear here",
                "throughput",
                "sv-concurrency-throughput",
                min_width=400,
            )
            s.concurrency_latency = chart(
                "each request's own tokens/s against concurrency", "latency", "sv-concurrency-latency", min_width=400
            )
        s.concurrency_table = gr.HTML(elem_id="sv-concurrency-table")
        s.concurrency_vllm = gr.HTML(elem_id="sv-concurrency-vllm")
        with gr.Row(equal_height=True):
            s.concurrency_record = gr.DownloadButton("Download sweep (JSON)", elem_id="sv-concurrency-record")
            s.concurrency_snapshot = gr.DownloadButton("Download snapshot (HTML)", elem_id="sv-concurrency-snapshot")
            s.concurrency_upload = gr.File(
                label="a recorded sweep", file_types=[".json"], elem_id="sv-concurrency-upload"
            )
            s.concurrency_speed = gr.Radio(list(PACES), value="4×", label="pace", elem_id="sv-concurrency-speed")
            s.concurrency_replay = gr.Button("Replay", elem_id="sv-concurrency-replay")
        traffic_part(s)


def traffic_part(s) -> None:
    """Traffic below the sweep: the rates, how many requests and rows, the SLO; the lanes, prompts and rounds are the
    sweep's above. Its progress, verdict, charts, table, vLLM's lines, downloads and replay."""
    gr.HTML(
        '<h3 class="sv-traffic-title">Traffic: requests arriving at a rate</h3><p class="sv-note">Requests arrive at '
        "random times at each rate (the same times for every lane) and join the running batch at its next step, up "
        "to the rows allowed, leaving when done. Each lane is judged against the SLO: a request meets it when its "
        "first token comes within the TTFT objective and then each token within the TPOT objective; goodput is the "
        "requests per second that do. The lanes, prompts and rounds are the sweep's above.</p>"
    )
    with gr.Row(equal_height=True):
        s.traffic_rates = gr.Textbox(
            DEFAULT_RATES, label="request rates (per second)", elem_id="sv-traffic-rates", max_lines=1, min_width=160
        )
        s.traffic_requests = gr.Number(
            DEFAULT_REQUESTS, label="requests per rate", precision=0, elem_id="sv-traffic-requests", min_width=120
        )
        s.traffic_rows = gr.Number(
            DEFAULT_ROWS, label="at most at once", precision=0, elem_id="sv-traffic-rows", min_width=120
        )
        s.traffic_ttft = gr.Number(DEFAULT_SLO[0], label="SLO: TTFT (s)", elem_id="sv-traffic-ttft", min_width=120)
        s.traffic_tpot = gr.Number(DEFAULT_SLO[1], label="SLO: TPOT (s)", elem_id="sv-traffic-tpot", min_width=120)
        s.traffic_run = gr.Button("Run traffic", variant="primary", elem_id="sv-traffic-run", min_width=140)
    s.traffic_progress = gr.HTML(elem_id="sv-traffic-progress")
    s.traffic_verdict = gr.HTML(elem_id="sv-traffic-verdict")
    s.traffic_charts = gr.HTML(elem_id="sv-traffic-charts")
    s.traffic_table = gr.HTML(elem_id="sv-traffic-table")
    s.traffic_vllm = gr.HTML(elem_id="sv-traffic-vllm")
    with gr.Row(equal_height=True):
        s.traffic_record = gr.DownloadButton("Download traffic (JSON)", elem_id="sv-traffic-record")
        s.traffic_snapshot = gr.DownloadButton("Download snapshot (HTML)", elem_id="sv-traffic-snapshot")
        s.traffic_upload = gr.File(label="a recorded traffic run", file_types=[".json"], elem_id="sv-traffic-upload")
        s.traffic_speed = gr.Radio(list(PACES), value="4×", label="pace", elem_id="sv-traffic-speed")
        s.traffic_replay = gr.Button("Replay", elem_id="sv-traffic-replay")


def sweep_tab(s) -> None:
    with gr.Tab("γ sweep", id="sweep"):
        s.sweep = gr.Button("γ sweep 1…8 on this prompt", elem_id="sv-sweep")
        s.sweep_plot = chart("press “γ sweep” to measure γ = 1…8 on the current prompt", "γ sweep", "sv-sweep-chart")


def recorded_tab(s) -> None:
    """A recorded run (shipped or uploaded) to replay at a pace, and the last run's trace and snapshot to download."""
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
