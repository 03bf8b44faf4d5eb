"""Traffic on the "Concurrency" tab at work: requests arriving at each rate (a seeded Poisson process), served by
continuous batching plain and by the lanes chosen above, on the prompts chosen above, as many rounds as above. As each
run lands, the verdict (where each drafter stops paying, each lane's capacity under the SLO), the charts of TPOT and
goodput against the rate (the simulator's point at each rate, predicted from the other rates, dashed) and the table
(every figure with the simulator's and its error) fill in; at the end vLLM's draft length per batch size and the rate
from which to turn speculation off. The run downloads as a record and a snapshot page; a record replays. No torch
here."""

import time
import uuid

import gradio as gr

from ...render import panels
from ...render.traffic_page import (
    traffic_charts,
    traffic_production,
    traffic_progress,
    traffic_snapshot_html,
    traffic_table,
    traffic_verdict,
)
from ...traffic.rates_view import TrafficView
from ...traffic.traffic_plan import ROUNDS
from ...traffic.traffic_record import TrafficRecord, replay
from .concurrency_screen import EXAMPLES, PACES, UPDATE_EVERY_S, YOURS, example_prompts, uploaded_path
from .grand_prix_screen import lanes_asked
from .workload_screen import prompts_from

DEFAULT_RATES = "0.5, 1, 2"
DEFAULT_REQUESTS = 16
DEFAULT_ROWS = 8
DEFAULT_SLO = (5.0, 0.2)  # seconds to the first token, then seconds per token


def traffic_outputs(s) -> list:
    """What a traffic run fills, in the /traffic endpoint's order."""
    return [
        s.status,
        s.traffic_progress,
        s.traffic_verdict,
        s.traffic_charts,
        s.traffic_table,
        s.traffic_vllm,
        s.traffic_record,
        s.traffic_snapshot,
    ]


def replayed_inputs(s, record: TrafficRecord) -> dict:
    """The fields a traffic replay sets to what its record ran: run again as they read, they ask the same traffic. A
    recorded trace's own arrival times (rate 0) have no rate to show: the rates field keeps what it had."""
    rounds = min(max(record.rounds, ROUNDS[0]), ROUNDS[-1])
    shown = {
        s.concurrency_names: ", ".join(record.lanes[1:]),
        s.traffic_requests: max((len(run.timings) for run, _ in record.runs), default=DEFAULT_REQUESTS),
        s.traffic_rows: record.max_rows,
        s.traffic_ttft: record.slo.ttft_s,
        s.traffic_tpot: record.slo.tpot_s,
        s.concurrency_rounds: rounds,
    }
    if min(record.rates, default=0) > 0:
        shown[s.traffic_rates] = ", ".join(f"{rate:g}" for rate in record.rates)
    return shown


def replay_outputs(s) -> list:
    """What a traffic replay fills: what a run does, and the fields it ran with."""
    return [*traffic_outputs(s), s.concurrency_names, s.traffic_rates, s.traffic_requests, s.traffic_rows,
            s.traffic_ttft, s.traffic_tpot, s.concurrency_rounds]  # fmt: skip


class TrafficHandlers:
    """Mixed into the screen's Handlers: a traffic run, its replay and what both show."""

    def traffic(
        self,
        request: gr.Request,
        concurrency_lanes=None,
        concurrency_names="",
        rates=DEFAULT_RATES,
        requests=DEFAULT_REQUESTS,
        max_rows=DEFAULT_ROWS,
        slo_ttft=DEFAULT_SLO[0],
        slo_tpot=DEFAULT_SLO[1],
        source=EXAMPLES,
        rounds=1,
        prompts_text="",
        prompts_file=None,
        **values,
    ):
        s, session = self.screen, request.session_hash
        with self.on_device(session) as flag:
            try:
                prompts = example_prompts() if source != YOURS else prompts_from(prompts_text, prompts_file)
                lanes = lanes_asked(concurrency_lanes, concurrency_names)
                slo = (slo_ttft, slo_tpot)
                views = self.backend.traffic(
                    values, prompts, lanes, rates, requests, slo, max_rows, rounds, stopped=flag.is_set, session=session
                )
                yield from self.stream_traffic(views)
            except Exception as exc:  # one line in the tab and the status box; the server keeps serving
                yield {s.traffic_progress: panels.failure(exc), s.status: panels.failure(exc)}

    def stream_traffic(self, views):
        """Every view that lands a run or says what comes next, with its charts; in between, how far a run got at
        most every UPDATE_EVERY_S."""
        shown, runs, said = 0.0, -1, -1
        for view in views:
            done = len(view.order)
            if view.finished or done != runs or view.said != said or time.perf_counter() - shown >= UPDATE_EVERY_S:
                yield self.traffic_shown(view, charts=view.finished or done != runs)
                shown, runs, said = time.perf_counter(), done, view.said

    def traffic_shown(self, view: TrafficView, charts: bool = True) -> dict:
        s = self.screen
        out = {
            s.status: panels.status(f"traffic: {view.message}", "done" if view.finished else "busy"),
            s.traffic_progress: traffic_progress(view),
        }
        if charts:
            out |= {
                s.traffic_verdict: traffic_verdict(view),
                s.traffic_charts: traffic_charts(view),
                s.traffic_table: traffic_table(view),
            }
        if view.finished:
            out[s.traffic_vllm] = traffic_production(view)
            if view.saved is not None:
                stem = self.files / f"specviz-traffic-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
                view.saved.save(stem.with_suffix(".json"))
                stem.with_suffix(".html").write_text(traffic_snapshot_html(view.saved), encoding="utf-8")
                out[s.traffic_record] = str(stem.with_suffix(".json"))
                out[s.traffic_snapshot] = str(stem.with_suffix(".html"))
        return out

    def replay_traffic(self, uploaded, speed: str, request: gr.Request):
        """A recorded traffic run (uploaded) shown again, each run after its own duration at the pace chosen."""
        self.board.arm(request.session_hash)  # not queued: it starts at once
        with self.board.running(request.session_hash) as flag:
            try:
                record = TrafficRecord.load(uploaded_path(uploaded, "a recorded traffic run", "Download traffic"))
                yield replayed_inputs(self.screen, record)
                yield from self.stream_traffic(replay(record, PACES.get(speed, 1.0), flag.is_set))
            except Exception as exc:
                yield {self.screen.traffic_progress: panels.failure(exc), self.screen.status: panels.failure(exc)}
