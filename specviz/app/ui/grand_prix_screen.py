"""The Grand Prix on screen: Compare all races plain decoding and every chosen lane at once in the lanes under the
prompt, and once it ends the comparison tab fills (the table, the chart, each lane's text) and the race can be
replayed on the lanes' own clocks at 1×, ¼× or 4×. No torch here."""

import time
from html import escape

import gradio as gr

from ...analysis.physics import shown_speedup
from ...events import PLAIN
from ...render import charts, panels
from ...render.figure1 import origin_text
from ...render.grand_prix_lanes import grand_prix_lanes, ordinal
from ...render.handoff_block import production_block
from ...render.runtime_compare import runtime_comparison
from ...views.grand_prix import KIND, GrandPrixView, replay_grand_prix
from ...views.replay import SPEEDS

BEST = "each drafter's best"  # every lane at the γ and adaptive choice its drafter measured best
SIDEBAR = "the sidebar's settings"  # every lane at the sidebar's γ and adaptive choice
UPDATE_EVERY_S = 0.5  # the lanes refresh at most this often; the engine never waits for them


def lanes_asked(drafters, lane_text: str | None) -> str | list[str] | None:
    """The lanes typed by name ("draft@2, draft@4") when there are any, else the drafters ticked (None: all)."""
    if lane_text and lane_text.strip():
        return lane_text
    return list(drafters) if drafters is not None else None


def grand_prix_status(view: GrandPrixView) -> str:
    if not view.finished:
        started = any(lane.events for lane in view.lanes)
        return panels.status(f"Grand Prix: {view.message}" if not started else f"Grand Prix running… {view.message}",
                             "busy")  # fmt: skip
    if view.stopped:
        return panels.status(f"Grand Prix stopped after {view.wall_s:.1f} s: every lane keeps what it wrote", "done")
    podium = ", ".join(
        f"{ordinal(row.place)} {row.name}"
        + (f" {shown_speedup(row.speedup, row.tau)}" if row.speedup and row.name != PLAIN else "")
        for row in sorted((r for r in view.rows() if r.place), key=lambda r: r.place)[:3]
    )
    return panels.status(f"Grand Prix done in {view.wall_s:.1f} s wall time: {podium}", "done")


class GrandPrixHandlers:
    """Compare all (a Grand Prix), its outputs, and its replay on the lanes' own clocks; mixed into Handlers, whose
    screen (`self.screen`), stop board, backend and downloads these use."""

    def compare(self, request: gr.Request, lanes=None, lane_setting=BEST, lane_names="", both_runtimes=False, **values):
        with self.on_device(request.session_hash) as flag:
            try:
                views = self.backend.grand_prix(
                    values,
                    lanes_asked(lanes, lane_names),
                    best=lane_setting != SIDEBAR,
                    stopped=flag.is_set,
                    session=request.session_hash,
                    both_runtimes=bool(both_runtimes),
                )
                yield from self.stream_grand_prix(views)
            except Exception as exc:
                yield {self.screen.status: panels.failure(exc)}

    def stream_grand_prix(self, views):
        shown = 0.0
        for view in views:
            now = time.perf_counter()
            if view.finished or now - shown >= UPDATE_EVERY_S:
                shown = now
                yield self.grand_prix_outputs(view)

    def grand_prix_outputs(self, view: GrandPrixView) -> dict:
        """The lanes and the status at every update; once the race is over, the comparison tab, the numbers, the
        downloads and the trace that a replay takes."""
        s = self.screen
        out = {s.status: grand_prix_status(view), s.gp: grand_prix_lanes(view)}
        if view.finished:  # the numbers (every lane's tokens among them) once, not again with every update
            out[s.summary] = view.summary()
            out |= self.comparison(view)
            if view.trace is not None and not view.recorded:
                out[s.trace], out[s.snapshot] = self.downloads(view.trace)
                out[s.download] = out[s.trace]
        return out

    def comparison(self, view: GrandPrixView) -> dict:
        """The comparison tab: the table, the chart and each drafter's text (a drafter raced at several settings
        shows each lane's under its name)."""
        s = self.screen
        rows = view.rows()
        table = panels.compare_table(rows) + runtime_comparison(view, view.runtime, view.curves)
        table += production_block(view.production, open_first=False, copy=True)
        out = {s.compare_table: table, s.compare_chart: charts.compare_chart(rows)}
        for name, box in s.compare_texts.items():
            lanes = [lane for lane in view.lanes if (lane.drafter if lane is not view.plain else PLAIN) == name]
            texts = [
                (f'<div class="sv-note">{escape(lane.name)}</div>' if len(lanes) > 1 else "")
                + (origin_text(lane.events, view.text_of) if lane.events else panels.waiting_text(lane.note or "–"))
                for lane in lanes
            ]
            out[box] = "".join(texts) or panels.waiting_text("not in this race")
        return out

    def replay_last(self, held: str | None, speed: str, request: gr.Request):
        """The last Grand Prix (or a recorded one) again, on the lanes' own clocks at the pace chosen."""
        self.board.arm(request.session_hash)  # not queued: it starts at once
        with self.board.running(request.session_hash) as flag:
            trace = self.trace(held)
            if trace is None or trace.kind not in (KIND, "comparison"):
                yield {
                    self.screen.status: panels.status("run a Grand Prix first (Compare all), then replay it", "info")
                }
                return
            yield from self.stream_grand_prix(replay_grand_prix(trace, SPEEDS.get(speed, 1.0), flag.is_set))
