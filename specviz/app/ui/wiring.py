"""What each control sets off: the runs on the device (race, γ sweep, comparison, one's own prompts) and the replay,
the step shown and explained, and the settings (drafter options, loading a pair, Stop, a visitor's own pair, presenter
mode). The API's endpoints are named here: /run, /sweep, /compare (the Grand Prix), /workload, /concurrency (many
requests at once), /traffic (requests arriving at a rate), /replay, /replay_grand_prix, /replay_concurrency,
/replay_traffic, /load, /stop, /add_pair.
No torch here."""

import gradio as gr

from .controls import in_api_order
from .under_load_screen import concurrency_outputs, levels_replay_outputs, traffic_outputs, traffic_replay_outputs

# One generation on the device at a time. Gradio's own progress (its queue timers and bars) is never drawn over the
# screen: the status line says what a run waits for (its place in line, the models loading) and how it goes.
ONE_ON_THE_DEVICE = dict(concurrency_id="device", concurrency_limit=1, show_progress="hidden")
AT_ONCE = dict(queue=False, show_progress="hidden")  # a click's own answer, before its run is queued
REPLAYED = dict(concurrency_id="replay", concurrency_limit=None, show_progress="hidden")  # replays never wait


def wire_events(demo: gr.Blocks, s, h) -> None:
    """Every listener of the screen `s`, answered by the handlers `h`."""
    wire_runs(s, h, run_controls(s))
    wire_steps(s, h)
    wire_settings(demo, s, h)


def run_controls(s) -> dict:
    """The controls a run reads, by name, in the order the /run, /sweep and /compare endpoints take them."""
    return in_api_order(
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
            **s.options,
            exact=s.exact,
            runtime=s.runtime,
        )
    )


def compare_outputs(s) -> list:
    """What a Grand Prix fills, in the /compare endpoint's order: the published outputs first, then its lanes, its
    numbers and its trace."""
    return [s.status, s.compare_table, s.compare_chart, *s.compare_texts.values(), s.download, s.snapshot, s.gp,
            s.summary, s.trace]  # fmt: skip


def own_prompts(s) -> dict:
    """The prompts of one's own (typed, or a file) that the workload and the Concurrency tab both read."""
    return dict(prompts_text=s.workload_prompts, prompts_file=s.workload_file)


def replay_outputs(s) -> list:
    """A replay fills the race (a duel) or the lanes and the comparison tab (a Grand Prix)."""
    shown = s.race.outputs()
    return shown + [c for c in compare_outputs(s) if c not in shown]


def on_the_device(button, waiting: tuple, run, inputs: dict, outputs: list, api_name: str) -> None:
    """A click that runs on the device: `waiting` (its handler, inputs and outputs) says at once what the run waits for
    and arms Stop, then `run` queues for the device with its `inputs` by name, as the endpoint `api_name`."""
    say, said_from, said_to = waiting
    button.click(say, said_from, said_to, api_name=False, **AT_ONCE).then(
        run, inputs_kwargs=inputs, outputs=outputs, api_name=api_name, **ONE_ON_THE_DEVICE
    )


def wire_runs(s, h, controls: dict) -> None:
    """Run, γ sweep, Compare all, a workload of one's own prompts and the Concurrency tab's runs (each arms Stop at
    the click, before it waits for the device), and Replay."""
    race_outputs = s.race.outputs()
    waiting = [s.status, s.queue_timer]
    on_the_device(s.run, (h.waiting, None, waiting), h.race, controls, race_outputs, "run")
    on_the_device(s.sweep, (h.waiting_sweep, None, waiting), h.sweep, controls, [s.status, s.sweep_plot], "sweep")
    lanes = dict(lanes=s.gp_drafters, lane_setting=s.gp_setting, lane_names=s.gp_lanes, both_runtimes=s.gp_runtimes)
    grand_prix_waits = (h.waiting_grand_prix, [s.gp_drafters, s.gp_lanes], waiting)
    on_the_device(s.compare, grand_prix_waits, h.compare, dict(controls, **lanes), compare_outputs(s), "compare")
    s.queue_timer.tick(h.queued, None, waiting, api_name=False, **AT_ONCE)
    workload = dict(controls, **own_prompts(s), drafters=s.workload_drafters, draft_length=s.workload_gamma)
    shown = [s.status, s.workload_progress, s.workload_table, s.workload_report, s.workload_csv]
    on_the_device(s.workload_run, (h.waiting_workload, None, waiting), h.workload, workload, shown, "workload")
    wire_under_load(s, h, controls, waiting)
    s.replay.click(h.replay, [s.recorded, s.upload, s.speed], replay_outputs(s), api_name="replay", **REPLAYED)
    s.gp_replay.click(h.replay_last, [s.trace, s.gp_speed], replay_outputs(s), api_name="replay_grand_prix", **REPLAYED)


def wire_under_load(s, h, controls: dict, waiting: list) -> None:
    """The Concurrency tab: a sweep and traffic (each arms Stop at the click, before it waits for the device; the
    lanes, prompts and rounds are the sweep's for both), and a recorded one of either replayed."""
    shared = dict(  # what both modes read: the lanes, the prompts and the rounds
        controls,
        concurrency_lanes=s.concurrency_lanes,
        concurrency_names=s.concurrency_names,
        source=s.concurrency_source,
        rounds=s.concurrency_rounds,
        **own_prompts(s),
    )
    levels = dict(shared, levels=s.concurrency_levels)
    concurrency_waits = (h.waiting_concurrency, None, waiting)
    on_the_device(s.concurrency_run, concurrency_waits, h.concurrency, levels, concurrency_outputs(s), "concurrency")
    rates = dict(
        shared,
        rates=s.traffic_rates,
        requests=s.traffic_requests,
        max_rows=s.traffic_rows,
        slo_ttft=s.traffic_ttft,
        slo_tpot=s.traffic_tpot,
    )
    on_the_device(s.traffic_run, (h.waiting_traffic, None, waiting), h.traffic, rates, traffic_outputs(s), "traffic")
    replay_inputs = [s.concurrency_upload, s.concurrency_speed]
    s.concurrency_replay.click(
        h.replay_concurrency, replay_inputs, levels_replay_outputs(s), api_name="replay_concurrency", **REPLAYED
    )
    traffic_replayed = [s.traffic_upload, s.traffic_speed]
    s.traffic_replay.click(
        h.replay_traffic, traffic_replayed, traffic_replay_outputs(s), api_name="replay_traffic", **REPLAYED
    )


def wire_steps(s, h) -> None:
    """The step shown in "Explain a step": the slider, ◀ ▶, a click on a Figure-1 row, a new run; and the rules that
    step can be replayed with."""
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


def wire_settings(demo: gr.Blocks, s, h) -> None:
    """The chosen drafter's options and note, loading a pair or precision, Stop, a visitor's own pair, presenter mode
    from the URL, and a visitor leaving."""
    s.drafter.change(
        lambda name: [gr.update(visible=n == name) for n in s.option_boxes] + [s.drafter_notes.get(name, "")],
        s.drafter,
        [*s.option_boxes.values(), s.drafter_note],
        api_name=False,
        queue=False,
    )
    loading = [s.pair, s.dtype, s.draft_dtype, s.runtime]
    s.pair.change(h.load, loading, [s.status], api_name="load", **ONE_ON_THE_DEVICE)
    for precision in (s.dtype, s.draft_dtype, s.runtime):
        precision.change(h.load, loading, [s.status], api_name=False, **ONE_ON_THE_DEVICE)
    s.stop.click(h.stop, None, None, api_name="stop", concurrency_id="stop", concurrency_limit=None)
    s.add_pair.click(h.add_pair, [s.any_target, s.any_draft], [s.pair, s.status], api_name="add_pair")
    demo.load(None, None, s.presenter, js="() => new URLSearchParams(window.location.search).get('presenter') === '1'")
    demo.unload(h.leave)  # the visitor's earlier runs, kept for drafting, go with them
    s.presenter.change(None, s.presenter, None, js="(on) => { window.svSetPresenter(on); return []; }")
