"""The "Concurrency" tab at work, in its two modes, on the code examples or the visitor's own prompts and the lanes and
rounds chosen at its top:

- levels: plain decoding and each drafter with 1, 2, 4 … requests decoded together. As each level runs, the charts
  draw total throughput and each request's own speed against concurrency (the theory dashed, each round's spread a
  bar, each drafter's crossover marked and labelled), and the verdicts, the table, the identity badge and vLLM's
  configuration fill in;
- rates: requests arriving at each rate (a seeded Poisson process), served by continuous batching. As each run lands,
  the verdict (where each drafter stops paying, each lane's capacity under the SLO), the charts of TPOT and goodput
  against the rate (the simulator's point at each rate, predicted from the others, dashed) and the table fill in; at
  the end vLLM's draft length per batch size and the rate from which to turn speculation off.

The progress line says what the run does, the prompts being read between two lanes too. Either run downloads as a
record and a snapshot page, and a record replays, setting the fields to what it ran. No torch here."""

import json
import time
import uuid
from collections import Counter

import gradio as gr

from ...errors import InvalidRequest
from ...paths import ASSETS
from ...render import panels
from ...render.concurrency_charts import concurrency_chart
from ...render.concurrency_page import concurrency_progress, concurrency_snapshot_html, concurrency_table, vllm_block
from ...render.traffic_page import (
    traffic_charts,
    traffic_production,
    traffic_progress,
    traffic_snapshot_html,
    traffic_table,
    traffic_verdict,
)
from ...traffic import traffic_plan
from ...traffic.levels_view import ConcurrencyView
from ...traffic.rates_view import TrafficView
from ...traffic.traffic_plan import ROUNDS
from ...traffic.traffic_record import ConcurrencyRecord, TrafficRecord, replay
from ...views.replay import SPEEDS
from .grand_prix_screen import lanes_asked
from .workload_screen import prompts_from

EXAMPLES = "the code examples"
YOURS = "your prompts (the “Your prompts” tab)"
DEFAULT_LEVELS = ", ".join(map(str, traffic_plan.DEFAULT_LEVELS))
DEFAULT_RATES = "0.5, 1, 2"
DEFAULT_REQUESTS = 16
DEFAULT_ROWS = 8
DEFAULT_SLO = (5.0, 0.2)  # seconds to the first token, then seconds per token
UPDATE_EVERY_S = 0.5
PACES = {**SPEEDS, "at once": 0.0}  # a run on a CPU lasts many minutes: its replay may also show it whole


def mode_outputs(s, mode: str, charts: tuple[str, ...]) -> list:
    """What a run of either mode fills, in its endpoint's order: the status, then the mode's progress line, its
    `charts`, its table, its vLLM block and its two downloads (each element named `{mode}_{part}`)."""
    parts = ("progress", *charts, "table", "vllm", "record", "snapshot")
    return [s.status, *(getattr(s, f"{mode}_{part}") for part in parts)]


def concurrency_outputs(s) -> list:
    """What a concurrency sweep fills, in the /concurrency endpoint's order."""
    return mode_outputs(s, "concurrency", ("throughput", "latency"))


def traffic_outputs(s) -> list:
    """What a traffic run fills, in the /traffic endpoint's order."""
    return mode_outputs(s, "traffic", ("verdict", "charts"))


def replayed_inputs(s, record: ConcurrencyRecord | TrafficRecord) -> dict:
    """The fields a replay sets to what its record ran (the lanes by name, the levels or the rates with the requests,
    rows and SLO, the rounds): run again as they read, they ask the same run. A recorded trace's own arrival times
    (rate 0) have no rate to show: the rates field keeps what it had."""
    shown = {s.concurrency_names: ", ".join(record.lanes[1:])}
    if isinstance(record, ConcurrencyRecord):
        rounds = max(Counter((run.lane, run.rows) for run, _ in record.runs).values(), default=1)
        shown[s.concurrency_levels] = ", ".join(str(level) for level in record.levels)
    else:
        rounds = record.rounds
        shown |= {
            s.traffic_requests: max((len(run.timings) for run, _ in record.runs), default=DEFAULT_REQUESTS),
            s.traffic_rows: record.max_rows,
            s.traffic_ttft: record.slo.ttft_s,
            s.traffic_tpot: record.slo.tpot_s,
        }
        if min(record.rates, default=0) > 0:
            shown[s.traffic_rates] = ", ".join(f"{rate:g}" for rate in record.rates)
    return shown | {s.concurrency_rounds: min(max(rounds, ROUNDS[0]), ROUNDS[-1])}


def levels_replay_outputs(s) -> list:
    """What a concurrency sweep's replay fills: what a concurrency sweep does, and the fields it ran with."""
    return [*concurrency_outputs(s), s.concurrency_names, s.concurrency_levels, s.concurrency_rounds]


def traffic_replay_outputs(s) -> list:
    """What a traffic replay fills: what a run does, and the fields it ran with."""
    return [*traffic_outputs(s), s.concurrency_names, s.traffic_rates, s.traffic_requests, s.traffic_rows,
            s.traffic_ttft, s.traffic_tpot, s.concurrency_rounds]  # fmt: skip


def uploaded_path(uploaded, what: str, button: str) -> str:
    """Where an uploaded record lies (Gradio hands a path, or a file object naming one); one line when none came."""
    if not uploaded:
        raise InvalidRequest(f"upload {what} first ({button} gives one)")
    return getattr(uploaded, "path", None) or getattr(uploaded, "name", None) or str(uploaded)


def example_prompts() -> list[str]:
    return json.loads((ASSETS / "prompts.json").read_text())["code"]


class UnderLoadHandlers:
    """Mixed into the screen's Handlers: a concurrency sweep and a traffic run, their replays and what each shows."""

    def concurrency(
        self,
        request: gr.Request,
        concurrency_lanes=None,
        concurrency_names="",
        levels=DEFAULT_LEVELS,
        source=EXAMPLES,
        rounds=1,
        prompts_text="",
        prompts_file=None,
        **values,
    ):
        def views(prompts, lanes, stopped, session):
            return self.backend.concurrency(values, prompts, lanes, levels, rounds, stopped=stopped, session=session)

        yield from self._under_load(request, views, (concurrency_lanes, concurrency_names), source,
                                    (prompts_text, prompts_file), self.concurrency_outputs, "concurrency")  # fmt: skip

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
        def views(prompts, lanes, stopped, session):
            slo = (slo_ttft, slo_tpot)
            return self.backend.traffic(values, prompts, lanes, rates, requests, slo, max_rows, rounds,
                                        stopped=stopped, session=session)  # fmt: skip

        yield from self._under_load(request, views, (concurrency_lanes, concurrency_names), source,
                                    (prompts_text, prompts_file), self.traffic_shown, "traffic")  # fmt: skip

    def _under_load(self, request: gr.Request, views, lanes: tuple, source: str, yours: tuple, shown, mode: str):
        """A run of either mode on the device: the prompts and lanes read from the tab, each view `shown`; a bad
        input or a failed run is one line in the tab's progress line (`mode`'s) and the status box, and the server
        keeps serving."""
        s = self.screen
        session = request.session_hash
        progress = getattr(s, f"{mode}_progress")
        with self.on_device(session) as flag:
            try:
                prompts = example_prompts() if source != YOURS else prompts_from(*yours)
                yield from self.stream_under_load(views(prompts, lanes_asked(*lanes), flag.is_set, session), shown)
            except Exception as exc:
                yield {progress: panels.failure(exc), s.status: panels.failure(exc)}

    def stream_under_load(self, views, shown):
        """Every view that lands a run, with its charts, and every one that says what the run does next (the next
        lane's prompts being read can take a minute: a line held back then would leave the last one standing); in
        between, how far a run got at most every UPDATE_EVERY_S."""
        drawn = 0.0
        runs = -1
        said = -1
        for view in views:
            done = len(view.order)
            if view.finished or done != runs or view.said != said or time.perf_counter() - drawn >= UPDATE_EVERY_S:
                yield shown(view, charts=view.finished or done != runs)
                drawn = time.perf_counter()
                runs = done
                said = view.said

    def stream_concurrency(self, views):
        return self.stream_under_load(views, self.concurrency_outputs)

    def concurrency_outputs(self, view: ConcurrencyView, charts: bool = True) -> dict:
        s = self.screen
        out = {
            s.status: panels.status(f"concurrency: {view.message}", "done" if view.finished else "busy"),
            s.concurrency_progress: concurrency_progress(view),
        }
        if charts:  # a plotly figure costs milliseconds: drawn when a run lands, not with every progress line
            out |= {
                s.concurrency_throughput: concurrency_chart(view, "throughput"),
                s.concurrency_latency: concurrency_chart(view, "latency"),
                s.concurrency_table: concurrency_table(view),
            }
        if view.finished:
            out[s.concurrency_vllm] = vllm_block(view.advice, view.fewest_rounds())
            if view.saved is not None:
                saved = view.saved
                out |= self._downloads(saved, s.concurrency_record, s.concurrency_snapshot, concurrency_snapshot_html)
        return out

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
                out |= self._downloads(view.saved, s.traffic_record, s.traffic_snapshot, traffic_snapshot_html)
        return out

    def _downloads(self, record, as_json, as_page, page) -> dict:
        """The finished run as its record and its snapshot page, each a file for its download button."""
        stem = self.files / f"{record.FORMAT}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        record.save(stem.with_suffix(".json"))
        stem.with_suffix(".html").write_text(page(record), encoding="utf-8")
        return {as_json: str(stem.with_suffix(".json")), as_page: str(stem.with_suffix(".html"))}

    def replay_concurrency(self, uploaded, speed: str, request: gr.Request):
        """A recorded concurrency sweep (uploaded) shown again, each run after its own time at the pace chosen."""
        shown = self.concurrency_outputs
        yield from self._replay(uploaded, speed, request, ConcurrencyRecord, "Download sweep", shown, "concurrency")

    def replay_traffic(self, uploaded, speed: str, request: gr.Request):
        """A recorded traffic run (uploaded) shown again, each run after its own duration at the pace chosen."""
        yield from self._replay(
            uploaded, speed, request, TrafficRecord, "Download traffic", self.traffic_shown, "traffic"
        )

    def _replay(self, uploaded, speed: str, request: gr.Request, kind, button: str, shown, mode: str):
        s = self.screen
        progress = getattr(s, f"{mode}_progress")
        self.board.arm(request.session_hash)  # not queued: it starts at once
        with self.board.running(request.session_hash) as flag:
            try:
                record = kind.load(uploaded_path(uploaded, kind.WHAT, button))
                yield replayed_inputs(s, record)
                yield from self.stream_under_load(replay(record, PACES.get(speed, 1.0), flag.is_set), shown)
            except Exception as exc:
                yield {progress: panels.failure(exc), s.status: panels.failure(exc)}
