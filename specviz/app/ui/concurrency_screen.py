"""The "Concurrency" tab at work: plain decoding and the chosen drafters with 1, 2, 4 … requests decoded together, on
the code examples or the visitor's own prompts. The progress line says what the sweep does, the prompts being read
between two lanes too; as each level runs, the charts draw total throughput and each request's own speed against
concurrency (the theory dashed, each round's spread a bar, each drafter's crossover marked and labelled), and the
verdicts, the table, the identity badge and vLLM's configuration fill in; the sweep can be downloaded as a record and a
snapshot page, and a record replays. No torch here."""

import json
import time
import uuid
from collections import Counter

import gradio as gr

from ...errors import InvalidRequest
from ...render import panels
from ...render.concurrency_charts import concurrency_chart
from ...render.concurrency_page import concurrency_progress, concurrency_snapshot_html, concurrency_table, vllm_block
from ...runtime import ASSETS
from ...traffic import traffic_plan
from ...traffic.levels_view import ConcurrencyView
from ...traffic.traffic_plan import ROUNDS
from ...traffic.traffic_record import ConcurrencyRecord, replay
from ...views.replay import SPEEDS
from .grand_prix_screen import lanes_asked
from .workload_screen import prompts_from

EXAMPLES, YOURS = "the code examples", "your prompts (the “Your prompts” tab)"
DEFAULT_LEVELS = ", ".join(map(str, traffic_plan.DEFAULT_LEVELS))
UPDATE_EVERY_S = 0.5
PACES = {**SPEEDS, "at once": 0.0}  # a sweep on a CPU runs for many minutes: its replay may also show it whole


def concurrency_outputs(s) -> list:
    """What a sweep fills, in the /concurrency endpoint's order."""
    return [
        s.status,
        s.concurrency_progress,
        s.concurrency_throughput,
        s.concurrency_latency,
        s.concurrency_table,
        s.concurrency_vllm,
        s.concurrency_record,
        s.concurrency_snapshot,
    ]


def replayed_inputs(s, record: ConcurrencyRecord) -> dict:
    """The fields a sweep's replay sets to what its record ran (the lanes by name, the levels, the rounds): run
    again as they read, they ask the same sweep."""
    rounds = max(Counter((run.lane, run.rows) for run, _ in record.runs).values(), default=1)
    return {
        s.concurrency_names: ", ".join(record.lanes[1:]),
        s.concurrency_levels: ", ".join(str(level) for level in record.levels),
        s.concurrency_rounds: min(max(rounds, ROUNDS[0]), ROUNDS[-1]),
    }


def replay_outputs(s) -> list:
    """What a sweep's replay fills: what a sweep does, and the fields it ran with."""
    return [*concurrency_outputs(s), s.concurrency_names, s.concurrency_levels, s.concurrency_rounds]


def uploaded_path(uploaded, what: str, button: str) -> str:
    """Where an uploaded record lies (Gradio hands a path, or a file object naming one); one line when none came."""
    if not uploaded:
        raise InvalidRequest(f"upload {what} first ({button} gives one)")
    return getattr(uploaded, "path", None) or getattr(uploaded, "name", None) or str(uploaded)


def example_prompts() -> list[str]:
    return json.loads((ASSETS / "prompts.json").read_text())["code"]


class ConcurrencyHandlers:
    """Mixed into the screen's Handlers: the sweep, its replay and what both show."""

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
        s, session = self.screen, request.session_hash
        with self.on_device(session) as flag:
            try:
                prompts = example_prompts() if source != YOURS else prompts_from(prompts_text, prompts_file)
                views = self.backend.concurrency(
                    values,
                    prompts,
                    lanes_asked(concurrency_lanes, concurrency_names),
                    levels,
                    rounds,
                    stopped=flag.is_set,
                    session=session,
                )
                yield from self.stream_concurrency(views)
            except Exception as exc:  # one line in the tab and the status box; the server keeps serving
                yield {s.concurrency_progress: panels.failure(exc), s.status: panels.failure(exc)}

    def stream_concurrency(self, views, vllm=()):
        """Every view that lands a run, with its charts, and every one that says what the sweep does next (the next
        lane's prompts being read can take a minute: a line held back then would leave the last one standing); in
        between, how far a level got at most every UPDATE_EVERY_S."""
        shown, runs, said = 0.0, -1, -1
        for view in views:
            done = len(view.order)
            if view.finished or done != runs or view.said != said or time.perf_counter() - shown >= UPDATE_EVERY_S:
                yield self.concurrency_outputs(view, vllm, charts=view.finished or done != runs)
                shown, runs, said = time.perf_counter(), done, view.said

    def concurrency_outputs(self, view: ConcurrencyView, vllm=(), charts: bool = True) -> dict:
        s = self.screen
        kind = "done" if view.finished else "busy"
        out = {
            s.status: panels.status(f"concurrency: {view.message}", kind),
            s.concurrency_progress: concurrency_progress(view),
        }
        if charts:  # a plotly figure costs milliseconds: drawn when a run lands, not with every progress line
            out |= {
                s.concurrency_throughput: concurrency_chart(view, "throughput"),
                s.concurrency_latency: concurrency_chart(view, "latency"),
                s.concurrency_table: concurrency_table(view),
            }
        if view.finished:
            record = view.saved
            advice = record.vllm if record else vllm  # a replay shows what its record says
            out[s.concurrency_vllm] = vllm_block(advice, view.fewest_rounds())
            if record is not None:
                stem = self.files / f"specviz-concurrency-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
                record.save(stem.with_suffix(".json"))
                stem.with_suffix(".html").write_text(concurrency_snapshot_html(record), encoding="utf-8")
                out[s.concurrency_record] = str(stem.with_suffix(".json"))
                out[s.concurrency_snapshot] = str(stem.with_suffix(".html"))
        return out

    def replay_concurrency(self, uploaded, speed: str, request: gr.Request):
        """A recorded sweep (uploaded) shown again, each run after its own time at the pace chosen."""
        self.board.arm(request.session_hash)  # not queued: it starts at once
        with self.board.running(request.session_hash) as flag:
            try:
                record = ConcurrencyRecord.load(uploaded_path(uploaded, "a recorded sweep", "Download sweep"))
                yield replayed_inputs(self.screen, record)
                views = replay(record, PACES.get(speed, 1.0), flag.is_set)
                yield from self.stream_concurrency(views, record.vllm)
            except Exception as exc:
                yield {self.screen.concurrency_progress: panels.failure(exc), self.screen.status: panels.failure(exc)}
