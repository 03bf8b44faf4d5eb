"""What the screen's buttons do: race, sweep, compare, replay, explain a step, stop, and the files a run can be
downloaded as. Each handler streams the pure-Python views of the backend (or of a recorded trace) into HTML and
charts; any failure becomes one line in the status box. No torch here."""

import sys
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import gradio as gr

from ...analysis.rule_replay import replay_step, rules_for
from ...errors import InvalidRequest, SpecvizError
from ...paths import ASSETS
from ...render import charts, panels
from ...render.explain import explain_step
from ...render.snapshot import snapshot_html
from ...trace import Trace
from ...views.grand_prix import KIND as GRAND_PRIX
from ...views.grand_prix import replay_grand_prix
from ...views.race import RaceView
from ...views.replay import SPEEDS, replay
from .grand_prix_screen import GrandPrixHandlers
from .race_screen import RaceScreen, race_update
from .under_load_screen import UnderLoadHandlers
from .workload_screen import WorkloadHandlers

UPDATE_EVERY_S = 0.2  # the screen refreshes at most this often; the engine never waits for it
CHART_EVERY_S = 1.0  # building a plotly figure costs ~17 ms on a laptop CPU: the chart refreshes less often
RECORDED = ASSETS / "traces"


class StopBoard:
    """Stop flags per browser session, so Stop halts only that viewer's runs, including one still waiting for the
    device. A click arms the session's flag at once (before its run is queued) and the run takes that flag when it
    starts, so a Stop pressed in between is kept. Stop sets the session's armed and running flags; a session with
    neither (an API client, which has no click to arm) keeps the stop for its next run to start, but only if the
    device was busy when it asked: otherwise nothing of theirs could have been waiting."""

    def __init__(self):
        self._armed: dict[str, threading.Event] = {}  # armed by a click, not yet taken by its run
        self._running: dict[str, set[threading.Event]] = {}
        self._pending: set[str] = set()  # sessions whose next run starts stopped
        self._lock = threading.Lock()

    def arm(self, session: str) -> None:
        """A click: the run it queues gets a fresh flag; an earlier Stop does not carry over to it."""
        with self._lock:
            self._armed[session] = threading.Event()
            self._pending.discard(session)

    @contextmanager
    def running(self, session: str) -> Iterator[threading.Event]:
        """The flag of a run starting now: the one its click armed, else a new one (set if a stop waits for it)."""
        with self._lock:
            flag = self._armed.pop(session, None) or threading.Event()
            if session in self._pending:
                self._pending.discard(session)
                flag.set()
            self._running.setdefault(session, set()).add(flag)
        try:
            yield flag
        finally:
            with self._lock:
                self._running[session].discard(flag)
                if not self._running[session]:
                    del self._running[session]

    def forget(self, session: str) -> None:
        """The session ended: nothing of it is kept (a run still under way keeps its own flag until it ends)."""
        with self._lock:
            self._armed.pop(session, None)
            self._pending.discard(session)

    def stop(self, session: str, device_busy: bool = False) -> None:
        with self._lock:
            flags = [*self._running.get(session, ()), *([self._armed[session]] if session in self._armed else [])]
            for flag in flags:
                flag.set()
            if not flags and device_busy:
                self._pending.add(session)


def recorded_runs(folder: Path = RECORDED) -> list[tuple[str, str]]:
    """(label, path) of the traces shipped with specviz, for the "recorded runs" menu."""
    runs = []
    for path in sorted(folder.glob("*.json")):
        try:
            trace = Trace.load(path)
        except SpecvizError:
            continue
        drafters = ", ".join(s.name for s in trace.drafted)
        runs.append((f"{path.stem}: {trace.models.pair}, {drafters}", str(path)))
    return runs


class Handlers(WorkloadHandlers, GrandPrixHandlers, UnderLoadHandlers):
    """The callbacks, bound to the backend, the per-session stop flags and the screen's components (`screen.race`:
    those a race fills)."""

    def __init__(self, backend, screen: SimpleNamespace):
        self.backend = backend
        self.screen = screen
        self.board = StopBoard()
        self.race_screen: RaceScreen = screen.race
        self.files = Path(tempfile.mkdtemp(prefix="specviz-downloads-"))  # this server's downloadable runs
        # A session's last run is held as the path of its trace file, not as a Trace: Gradio keeps a closed session's
        # state for an hour, and a long run's events in memory are megabytes. The few read last stay parsed.
        self._parsed: OrderedDict[str, Trace] = OrderedDict()
        self._parsing = threading.Lock()

    # -- the race, live or replayed --
    def race_outputs(self, view: RaceView, prompt: str, chart: bool = True) -> dict:
        files = self.downloads(view.trace) if view.finished and view.trace is not None else None
        return race_update(self.race_screen, view, prompt, chart, files)

    def stream(self, views, prompt: str):
        shown = charted = 0.0
        for view in views:
            now = time.perf_counter()
            if view.finished or now - shown >= UPDATE_EVERY_S:
                chart = view.finished or now - charted >= CHART_EVERY_S
                shown = now
                charted = now if chart else charted
                yield self.race_outputs(view, prompt, chart)

    @contextmanager
    def on_device(self, session: str) -> Iterator[threading.Event]:
        """A run that queued for the device starts: its stop flag; its place in line is given up when it ends,
        also when it failed before it reached the device."""
        try:
            with self.board.running(session) as flag:
                yield flag
        finally:
            self.backend.line.leave(session)

    def race(self, request: gr.Request, **values):
        prompt = values.get("prompt")
        with self.on_device(request.session_hash) as flag:
            try:
                yield from self.stream(self.backend.race(values, flag.is_set, request.session_hash), prompt)
            except Exception as exc:  # one message on screen; the server keeps serving
                yield {
                    self.race_screen.status: panels.failure(exc),
                    self.race_screen.echo: panels.prompt_echo(str(prompt)),
                }

    def leave(self, request: gr.Request) -> None:
        print(f"specviz: {self.backend.memories.forget(request.session_hash)}", file=sys.stderr, flush=True)
        self.board.forget(request.session_hash)
        self.backend.shelf.forget(request.session_hash)

    # -- a click waits for the device: Stop reaches its run from now on, and the status line tells its place --
    def waiting(self, request: gr.Request, runs: int = 2, what: str = "race"):
        """Shown at once when a run's button is pressed, before the run gets the device: the click takes its place in
        line (a run of N sides counts as N runs), and the status line says what it waits for until it starts."""
        session = request.session_hash
        self.board.arm(session)
        self.backend.line.wait(session, runs, what)
        return panels.status(self.backend.line.busy(session) or "starting…", "busy"), gr.Timer(active=True)

    def waiting_sweep(self, request: gr.Request):
        return self.waiting(request, 9, "γ sweep")

    def waiting_grand_prix(self, drafters, lane_names, request: gr.Request):
        named = [n for n in (lane_names or "").split(",") if n.strip()]
        lanes = len(named) if named else len(drafters or []) or len(self.screen.compare_texts) - 1
        return self.waiting(request, 1 + lanes, f"Grand Prix of {1 + lanes} lanes")

    def waiting_workload(self, request: gr.Request):
        return self.waiting(request, 1, "workload")

    def waiting_concurrency(self, request: gr.Request):
        return self.waiting(request, 1, "concurrency sweep")

    def waiting_traffic(self, request: gr.Request):
        return self.waiting(request, 1, "traffic")

    def queued(self, request: gr.Request):
        """Every second while the session's click waits: its place in line, until its run starts."""
        session = request.session_hash
        if not self.backend.line.waiting(session):
            return gr.skip(), gr.Timer(active=False)
        return panels.status(self.backend.line.busy(session) or "starting…", "busy"), gr.skip()

    def replay(self, chosen: str, uploaded, speed: str, request: gr.Request):
        self.board.arm(request.session_hash)  # not queued: it starts at once
        with self.board.running(request.session_hash) as flag:
            try:
                path = uploaded or chosen
                if not path:
                    raise InvalidRequest("choose a recorded run or upload a trace file first")
                trace = Trace.load(path)
                if trace.kind in (GRAND_PRIX, "comparison"):  # every lane, on its own clock
                    yield {self.race_screen.echo: panels.prompt_echo(trace.prompt), self.screen.trace: str(path)}
                    yield from self.stream_grand_prix(replay_grand_prix(trace, SPEEDS.get(speed, 1.0), flag.is_set))
                    return
                yield from self.stream(replay(trace, speed=SPEEDS.get(speed, 1.0), stopped=flag.is_set), trace.prompt)
            except Exception as exc:
                yield {self.race_screen.status: panels.failure(exc)}

    def downloads(self, trace: Trace) -> tuple[str, str]:
        """The run as a trace file and as a snapshot page, for the two download buttons."""
        stem = (
            self.files
            / f"specviz-{trace.kind.replace(' ', '-')}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        )
        trace.save(stem.with_suffix(".json"))
        stem.with_suffix(".html").write_text(snapshot_html(trace), encoding="utf-8")
        self._keep(str(stem.with_suffix(".json")), trace)
        return str(stem.with_suffix(".json")), str(stem.with_suffix(".html"))

    def _keep(self, path: str, trace: Trace) -> Trace:
        with self._parsing:
            self._parsed[path] = trace
            self._parsed.move_to_end(path)
            while len(self._parsed) > 4:
                self._parsed.popitem(last=False)
        return trace

    def trace(self, held: str | None) -> Trace | None:
        """The run a session holds (the path its trace was saved to), or None."""
        if not held:
            return None
        with self._parsing:
            parsed = self._parsed.get(held)
        return self._keep(held, parsed or Trace.load(held))

    # -- explaining one step of the speculative side, and replaying its acceptance rule --
    @staticmethod
    def _step(step, trace: Trace | None):
        """The speculative side's event at the 1-based `step` (clamped), or None."""
        events = trace.spec.events if trace is not None and trace.spec else []
        return events[min(max(int(step or 1), 1), len(events)) - 1] if events else None

    def explain(self, step, held: str | None) -> str:
        trace = self.trace(held)
        event = self._step(step, trace)
        return explain_step(event, trace.text_of, len(trace.spec.events)) if event else explain_step(None, str)

    def replay_choices(self, step, held: str | None):
        rules = list(rules_for(self._step(step, self.trace(held))))
        return gr.Dropdown(choices=rules, value=rules[0] if rules else None, interactive=bool(rules))

    def replay_rule(self, step, held: str | None, rule: str):
        trace = self.trace(held)
        event = self._step(step, trace)
        rules = rules_for(event)
        if not rules:
            return panels.status(
                "only a sampled step verified by the lossless rule can be replayed: run with a "
                "temperature above 0 and pick a step that drafted",
                "info",
            ), gr.skip()
        replayed = replay_step(event, trace.text_of, rule if rule in rules else next(iter(rules)))
        fits = replayed.p_value > 1e-3
        line = (
            f"{replayed.rule.split(':')[0]}, draft position {replayed.position}: {replayed.n:,} replays in "
            f"{replayed.seconds * 1000:.0f} ms: "
            + (
                "the emitted tokens follow the target's p (χ² p-value {:.2g}): this rule keeps the target's "
                "distribution"
                if fits
                else "the emitted tokens do not follow the target's p (χ² p-value {:.2g}): "
                "this rule changes what the model would write"
            ).format(replayed.p_value)
        )
        return panels.status(line, "done" if fits else "error"), charts.replay_chart(replayed)

    def nudge(self, step, held: str | None, by: int):
        trace = self.trace(held)
        count = len(trace.spec.events) if trace is not None and trace.spec else 1
        return min(max(int(step or 1) + by, 1), max(count, 1))

    def pick(self, held: str | None, evt: gr.EventData):
        """A click on a Figure-1 row: that step, explained, in the explanation tab."""
        step = int(getattr(evt, "step", 0)) + 1
        return step, self.explain(step, held), gr.Tabs(selected="explain")

    # -- the γ sweep --
    def sweep(self, request: gr.Request, **values):
        with self.on_device(request.session_hash) as flag:
            try:
                for view in self.backend.sweep(values, stopped=flag.is_set, session=request.session_hash):
                    yield (
                        panels.status(f"γ sweep: {view.message}", "done" if view.finished else "busy"),
                        charts.sweep_chart(view),
                    )
            except Exception as exc:
                yield panels.failure(exc), gr.skip()

    def load(self, pair_label, dtype_name, draft_dtype="same", runtime="auto", request: gr.Request = None):
        try:
            self.backend.shelf.preset(pair_label, request.session_hash if request else "")
            mixed = draft_dtype not in ("same", dtype_name)
            draft = "" if not mixed else draft_dtype
            for line in self.backend.shelf.load(pair_label, dtype_name, draft_dtype=draft, runtime=runtime):
                yield panels.status(line, "busy")
            pair = self.backend.shelf.current()
            yield panels.status(f"ready: {pair_label} ({pair.precision_words()} on {pair.runs_on.name})", "done")
        except Exception as exc:
            yield panels.failure(exc)

    def add_pair(self, target: str, draft: str, request: gr.Request):
        """A pair named by the visitor joins their own menu and becomes the choice (which loads it)."""
        session = request.session_hash
        try:
            label = self.backend.shelf.add(target, draft, session)
        except SpecvizError as exc:
            return gr.skip(), panels.failure(exc)
        choices = self.backend.shelf.choices(session)
        return gr.Dropdown(choices=choices, value=label), panels.status(f"pair: {label}", "info")

    def stop(self, request: gr.Request):
        self.board.stop(request.session_hash, device_busy=bool(self.backend.line.busy()))
