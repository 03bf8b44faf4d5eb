"""What a race, live or replayed, puts on screen: the components it fills, declared once in the order the /run and
/replay endpoints return them, and the values a run's view gives each. A handler returns {component: value} for the
components it changes; Gradio leaves the others as they are, so no one counts positions. No torch here."""

from dataclasses import dataclass, fields

import gradio as gr

from ...events import PLAIN, summarize
from ...render import charts, panels
from ...render.figure1 import step_rows
from ...render.handoff_block import production_block
from ...views.race import RaceView

MAX_ROWS = 300  # Figure-1 rows kept on screen; earlier ones are summarised in one line


@dataclass(frozen=True, eq=False)
class RaceScreen:
    """The race's components. Field order is the order of the endpoints' outputs, which an API client reads by
    position, so it never changes: the first nine are the published ones (the trace, a State, is not returned to a
    client); a component added later goes last."""

    status: gr.HTML
    echo: gr.HTML
    plain_text: gr.HTML
    spec_text: gr.HTML
    rows: gr.HTML  # Figure 1
    metrics: gr.HTML
    badge: gr.HTML
    race_plot: gr.Plot
    summary: gr.JSON
    trace: gr.State  # the path of the last run's trace file
    step: gr.Slider  # the step "Explain a step" shows
    download: gr.DownloadButton
    snapshot: gr.DownloadButton
    diagnosis: gr.HTML  # why this speedup: a line, where the time went, acceptance by draft position
    time_plot: gr.Plot
    position_plot: gr.Plot
    gp: gr.HTML  # the Grand Prix's lanes: a race empties them, so the two sides show again
    production: gr.HTML  # take it to production: the drafter's settings in transformers, vLLM and SGLang

    @classmethod
    def of(cls, screen) -> "RaceScreen":
        """The race's components among a screen's (an object with an attribute of each field's name)."""
        return cls(**{f.name: getattr(screen, f.name) for f in fields(cls)})

    def outputs(self) -> list:
        """The components as an event's outputs list, in the endpoints' order."""
        return [getattr(self, f.name) for f in fields(self)]


def figure1(view: RaceView) -> str:
    events = view.spec.events
    hidden = max(0, len(events) - MAX_ROWS)
    note = f'<div class="sv-status">{hidden} earlier steps not shown</div>' if hidden else ""
    return note + step_rows(events[hidden:], view.text_of)


def race_summary(view: RaceView) -> dict:
    """The run in numbers, for the API and for anyone who wants them raw."""
    same = None
    if view.finished and view.greedy:
        same = view.divergence is None
    return {
        "finished": view.finished,
        "stopped": view.stopped,
        "wall_s": round(view.wall_s, 4),
        PLAIN: summarize(view.plain.events).to_json(),
        "speculative": summarize(view.spec.events).to_json(),
        "identical": same,
        "mode": view.mode,
        "lossy": view.lossy,
        "plain_tokens": view.plain.tokens,
        "speculative_tokens": view.spec.tokens,
        "speculative_gammas": [e.gamma for e in view.spec.events],
    }  # γ of each step (adaptive: as chosen)


def first_rejection(events) -> int:
    """The step worth explaining first: the first one with a rejected draft, else the first that drafted (1-based)."""
    drafted = [e for e in events if e.proposed]
    pick = next((e for e in drafted if e.accepted < len(e.proposed)), drafted[0] if drafted else None)
    return pick.index + 1 if pick else 1


def race_status(view: RaceView) -> str:
    """The status line: running, done (with both sides' own clocks) or stopped."""
    if not view.finished:
        started = view.plain.events or view.spec.events
        return panels.status(f"running… {view.message}" if started else view.message, "busy")
    if view.stopped:
        return panels.status(f"stopped after {view.wall_s:.1f} s wall time", "done")
    return panels.status(
        f"done in {view.wall_s:.1f} s wall time (plain {view.plain.clock_s:.1f} s + speculative "
        f"{view.spec.clock_s:.1f} s on their own clocks); {view.message}",
        "done",
    )


def race_update(
    screen: RaceScreen, view: RaceView, prompt: str, chart: bool = True, files: tuple[str, str] | None = None
) -> dict:
    """What the screen shows of `view`: the race itself at every update, the chart when `chart` (it costs more to
    draw), and once the run is recorded (`files`: its trace and snapshot files) the step to explain, the downloads
    and why this speedup."""
    shown = {
        screen.status: race_status(view),
        screen.echo: panels.prompt_echo(prompt),
        screen.plain_text: panels.lane_text(view, PLAIN),
        screen.spec_text: panels.lane_text(view, "spec"),
        screen.rows: figure1(view),
        screen.metrics: panels.metrics_strip(view),
        screen.badge: panels.identity_badge(view),
        screen.summary: race_summary(view),
        screen.gp: "",
        screen.production: production_block(view.production, copy=True) if view.finished else "",
    }
    if chart:
        shown[screen.race_plot] = charts.race_chart(view)
    if files is not None:
        trace_file, snapshot_file = files
        step = first_rejection(view.spec.events)
        shown |= {
            screen.trace: trace_file,
            screen.step: gr.Slider(minimum=1, maximum=max(2, len(view.spec.events)), value=step),
            screen.download: trace_file,
            screen.snapshot: snapshot_file,
            screen.diagnosis: panels.diagnosis(view),
            screen.time_plot: charts.time_chart(view),
            screen.position_plot: charts.position_chart(view.spec.events),
        }
    return shown
